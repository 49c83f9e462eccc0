#!/usr/bin/env python3
"""bench/image.py [BUILD_DIR] [-n N] [--mb MB]: registry pull throughput and
cold vs cached sandbox start from a pulled image.

Starts a real registry (Debian's docker-registry) on 127.0.0.1 with a temp
storage dir, pushes two images with skopeo from OCI layouts built here,
starts its own warrend (temp state dir, unix socket), then measures:
  pull cold        PullImage of a ~MB MB random-data image (4 gzip layers;
                   random data does not compress, so blob bytes ~= MB) with
                   nothing cached: download + sha256 + unpack + commit.
                   Prints MB/s of blob bytes over the whole pull and over the
                   download phase alone (until the last layer left
                   "downloading"). DeleteImage between runs drops the layers.
  pull cached      the same pull again: manifest + config only, all "cached"
  warrend mem      warrend's VmRSS before the first pull and after them, and
                   its VmHWM (peak): registry work runs in warren-fetch
                   (--helper-mem: also the helpers' own peak, sampled)
  create->exec     busybox image from the registry: cold = PullImage +
                   CreateSandbox + Exec(/bin/true) with nothing cached;
                   cached = CreateSandbox + Exec with the image present
                   (skipped when sandboxes cannot start on this host)
Everything stays on loopback.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "registry"))

import grpc  # noqa: E402

import registry as R  # noqa: E402
from warren._proto.warren.v1 import images_pb2, images_pb2_grpc  # noqa: E402
from warren._proto.warren.v1 import sandboxes_pb2 as pb  # noqa: E402
from warren._proto.warren.v1 import sandboxes_pb2_grpc  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def mem(pid):
    """warrend's VmRSS, VmHWM, RssAnon, RssFile in MB (/proc/PID/status)."""
    with open("/proc/%d/status" % pid) as f:
        kv = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
    return tuple(int(kv[k].split()[0]) / 1024.0 for k in ("VmRSS", "VmHWM", "RssAnon", "RssFile"))


class HelperPeak:
    """The largest VmHWM of any warren-fetch child of pid while running."""

    def __init__(self, pid):
        import threading
        self.pid, self.peak, self.stop = pid, 0.0, False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            for p in os.listdir("/proc"):
                if not p.isdigit():
                    continue
                try:
                    with open("/proc/%s/status" % p) as f:
                        kv = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
                except OSError:
                    continue
                if kv.get("Name", "").strip() == "warren-fetch" and \
                        kv.get("PPid", "").strip() == str(self.pid) and "VmHWM" in kv:
                    self.peak = max(self.peak, int(kv["VmHWM"].split()[0]) / 1024.0)
            time.sleep(0.01)

    def done(self):
        self.stop = True
        self.t.join()
        return self.peak


def timed_pull(stub, ref):
    """(seconds total, seconds until downloads ended, blob bytes, states)."""
    t0 = time.perf_counter()
    dl_end = None
    total = 0
    states = set()
    for m in stub.PullImage(images_pb2.PullImageRequest(ref=ref), timeout=600):
        if m.layers:
            total = sum(l.total_bytes for l in m.layers)
            states = {l.state for l in m.layers}
            if dl_end is None and not states & {"waiting", "downloading"}:
                dl_end = time.perf_counter() - t0
    t = time.perf_counter() - t0
    return t, dl_end or t, total, states


def exec_true(stub, sid):
    req = pb.ExecRequest(start=pb.ExecStart(sandbox=sid, argv=["/bin/true"]))
    for resp in stub.Exec(iter([req]), timeout=60):
        if resp.WhichOneof("kind") == "exited":
            assert resp.exited.exit_code == 0, resp
            return


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.environ.get("WARREN_BUILD",
                                                               os.path.join(ROOT, "build")))
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--helper-mem", action="store_true",
                    help="sample warren-fetch's VmHWM during the pulls (costs CPU: not for timing)")
    ap.add_argument("--mb", type=int, default=100)
    a = ap.parse_args()
    if not R.available():
        sys.exit("bench/image.py: needs docker-registry and skopeo (scripts/deps.sh)")

    tmp = tempfile.mkdtemp(prefix="warren-bench-image-")
    reg = daemon = None
    try:
        reg = R.Registry()
        lay = os.path.join(tmp, "layout")
        L = R.Layout(lay)
        per = a.mb * (1 << 20) // 4
        big = [R.layer_tar([("data%d" % i, "file", os.urandom(per))]) for i in range(4)]
        md, _ = L.image(big, {})
        L.tag(md, "big")
        rootfs, tar = os.path.join(tmp, "rootfs"), os.path.join(tmp, "busybox.tar")
        subprocess.run([os.path.join(ROOT, "tests/images/busybox-rootfs.sh"), rootfs, "--tar",
                        tar], check=True, capture_output=True)
        with open(tar, "rb") as f:
            bb, _ = L.image([f.read()], {"Cmd": ["/bin/sh"]})
        L.tag(bb, "busybox")
        t = time.perf_counter()
        reg.push(lay, "big", "bench/big:v1")
        reg.push(lay, "busybox", "bench/busybox:v1")
        print("setup: registry %s, pushed %d MB in %.1f s" % (reg.host, a.mb,
                                                             time.perf_counter() - t))

        state = os.path.join(tmp, "state")
        sock = os.path.join(tmp, "warren.sock")
        log = open(os.path.join(tmp, "warrend.log"), "wb")
        daemon = subprocess.Popen([os.path.join(a.build, "src/daemon/warrend"), "--state-dir",
                                   state, "--listen", "unix:" + sock, "--log-level", "warn"],
                                  stdout=log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        ch = grpc.insecure_channel("unix:" + sock)
        imgs = images_pb2_grpc.ImagesStub(ch)
        sbx = sandboxes_pb2_grpc.SandboxesStub(ch)

        ref = "%s/bench/big:v1" % reg.host
        idle = mem(daemon.pid)
        helper = HelperPeak(daemon.pid) if a.helper_mem else None
        cold, dl = [], []
        nbytes = 0
        for _ in range(a.n):
            t, d, nbytes, states = timed_pull(imgs, ref)
            assert states == {"done"}, states
            cold.append(t)
            dl.append(d)
            imgs.DeleteImage(images_pb2.DeleteImageRequest(image=ref))
        mb = nbytes / 1e6
        print("pull cold     %.0f MB blobs: p50 %.2f s = %.0f MB/s (download+verify phase "
              "%.0f MB/s), best %.0f MB/s, n=%d"
              % (mb, pct(cold, 50), mb / pct(cold, 50), mb / pct(dl, 50), mb / min(cold), a.n))
        timed_pull(imgs, ref)
        cached = []
        for _ in range(a.n):
            t, _, _, states = timed_pull(imgs, ref)
            assert states == {"cached"}, states
            cached.append(t)
        print("pull cached   p50 %.1f ms (manifest + config, every layer cached)"
              % (pct(cached, 50) * 1e3))
        after = mem(daemon.pid)
        helper_peak = helper.done() if helper else 0
        print("warrend mem   VmRSS idle %.1f MB (anon %.1f, file %.1f), after %d pulls %.1f MB "
              "(anon %.1f, file %.1f); VmHWM %.1f MB"
              % (idle[0], idle[2], idle[3], 2 * a.n + 1, after[0], after[2], after[3], after[1]))
        if helper_peak:
            print("warren-fetch  VmHWM %.1f MB (the largest helper; one per pull, gone after it)"
                  % helper_peak)

        bref = "%s/bench/busybox:v1" % reg.host
        image = images_pb2.ImageSpec(ref="%s/bench/busybox:v1" % reg.host)
        try:
            cold_s, cached_s = [], []
            for _ in range(a.n):
                t = time.perf_counter()
                timed_pull(imgs, bref)
                sb = sbx.CreateSandbox(pb.CreateSandboxRequest(image=image), timeout=60)
                exec_true(sbx, sb.id)
                cold_s.append(time.perf_counter() - t)
                sbx.TerminateSandbox(pb.TerminateSandboxRequest(id=sb.id,
                                                                grace_period_seconds=1))
                t = time.perf_counter()
                sb = sbx.CreateSandbox(pb.CreateSandboxRequest(image=image), timeout=60)
                exec_true(sbx, sb.id)
                cached_s.append(time.perf_counter() - t)
                sbx.TerminateSandbox(pb.TerminateSandboxRequest(id=sb.id,
                                                                grace_period_seconds=1))
                for _ in range(100):
                    try:
                        imgs.DeleteImage(images_pb2.DeleteImageRequest(image=bref))
                        break
                    except grpc.RpcError as e:
                        if e.code() != grpc.StatusCode.FAILED_PRECONDITION:
                            raise
                        time.sleep(0.05)
            print("create->exec  cold (pull+create+exec) p50 %.1f ms, cached (create+exec) "
                  "p50 %.1f ms, n=%d" % (pct(cold_s, 50) * 1e3, pct(cached_s, 50) * 1e3, a.n))
        except grpc.RpcError as e:
            print("create->exec  skipped: %s: %s" % (e.code().name, e.details()))
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait(timeout=30)
        if reg:
            reg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
