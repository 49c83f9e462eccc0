"""A real single-node Kubernetes cluster for the k8s compute class tests.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd
and kubelet, all on 127.0.0.1, with every file in one temp dir; images are
built locally (umoci + skopeo) and imported with `ctr images import`, so
nothing is pulled from anywhere. The binaries come from
scripts/k8s-build.sh (built from the Go module proxy once, cached under
~/.cache/warren/k8s/<version>/). See /work/shared/design/K8S.md and
docs/k8s.md for why each setting is there.

    python3 tests/k8s/cluster.py up      # start, print the kubeconfig, wait for Ctrl-C

Teardown stops only the processes this fixture started (and the container
shims its containerd started, found by their -address argument), unmounts
everything under its dir, removes the cgroups under its own cgroup root and
the CNI veths/netns of its pods and the kubelet's KUBE-* iptables chains
(iptables-nft) that were not there before, and puts back the kernel
settings the kubelet changes.
"""

import base64
import contextlib
import json
import os
import pathlib
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[2]
VERSION = os.environ.get("K8S_VERSION", "v1.37.2")
# Private ranges of this cluster only: never 192.0.2.0/24, 10.255.0.0/16
# (other fixtures) or warrend's --sandbox-cidr (100.96.0.0/16 and up).
SERVICE_CIDR = "10.97.0.0/24"
POD_CIDR = "10.98.0.0/24"
CALLBACK_CIDR = "10.98.1.0/24"  # Pods route it to the node: warrend's relay callback
NODE_NAME = "localhost"  # resolves to 127.0.0.1: apiserver -> kubelet stays on loopback
# Images of the tests: a loopback registry name, so an accidental pull
# never leaves the machine.
PAUSE_IMAGE = "localhost/warren/pause:1"
BUSYBOX_IMAGE = "localhost/warren/busybox:1"
# The kernel settings the kubelet sets at start (container_manager_linux.go
# setupKernelTunables); put back once the node is up and at teardown.
KUBELET_SYSCTLS = ["vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic",
                   "kernel/panic_on_oops", "kernel/keys/root_maxkeys",
                   "kernel/keys/root_maxbytes"]


sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/
from freeport import free_port  # noqa: E402,F401  (below the ephemeral range)


def k8s_bin_dir():
    """The cached binaries (built when missing: ~12 minutes)."""
    out = subprocess.run([str(REPO / "scripts/k8s-build.sh")], check=True,
                         stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()
    return pathlib.Path(out[-1])


def _run(args, **kw):
    kw.setdefault("check", True)
    kw.setdefault("capture_output", True)
    r = subprocess.run(args, **kw)
    return r


def _nft_chains():
    """The host's nftables chains: {(family, table, chain): [(rule handle,
    its jump/goto target or None), ...]}."""
    r = _run(["nft", "-j", "list", "ruleset"], check=False)
    if r.returncode != 0:
        return {}
    out = {}
    for item in json.loads(r.stdout or b"{}").get("nftables", []):
        if "chain" in item:
            c = item["chain"]
            out.setdefault((c["family"], c["table"], c["name"]), [])
        elif "rule" in item:
            ru = item["rule"]
            target = None
            for e in ru.get("expr", []):
                for verb in ("jump", "goto"):
                    if isinstance(e, dict) and verb in e:
                        target = e[verb]["target"]
            out.setdefault((ru["family"], ru["table"], ru["chain"]), []).append(
                (ru["handle"], target))
    return out


def _openssl_cert(d, name, cn, ca=None, org=None, sans=None):
    key, csr, crt = d / (name + ".key"), d / (name + ".csr"), d / (name + ".crt")
    subj = "/CN=" + cn + ("/O=" + org if org else "")
    _run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
          "-out", str(csr), "-subj", subj])
    ext = d / (name + ".ext")
    lines = ["basicConstraints=CA:FALSE", "keyUsage=digitalSignature,keyEncipherment"]
    lines.append("extendedKeyUsage=" + ("serverAuth,clientAuth" if sans else "clientAuth"))
    if sans:
        lines.append("subjectAltName=" + ",".join(sans))
    ext.write_text("\n".join(lines) + "\n")
    _run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
          "-CAcreateserial", "-days", "30", "-out", str(crt), "-extfile", str(ext)])
    return crt, key


def _tar_dir_image(work, name, files, cmd):
    """An OCI image of files {path_in_image: host_path}, as a docker-archive
    tar for `ctr images import`."""
    layout = work / ("oci-" + name.replace("/", "_").replace(":", "_"))
    bundle = work / ("bundle-" + layout.name)
    shutil.rmtree(layout, ignore_errors=True)
    shutil.rmtree(bundle, ignore_errors=True)
    _run(["umoci", "init", "--layout", str(layout)])
    _run(["umoci", "new", "--image", str(layout) + ":img"])
    _run(["umoci", "unpack", "--image", str(layout) + ":img", str(bundle)])
    root = bundle / "rootfs"
    for dst, src in files.items():
        p = root / dst.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, tuple):  # ("symlink", target)
            os.symlink(src[1], p)
        else:
            shutil.copy2(src, p)
    for dname in ("tmp", "etc", "proc", "sys", "dev"):
        (root / dname).mkdir(exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                     "nobody:x:65534:65534:nobody:/:/bin/sh\n")
    (root / "etc/group").write_text("root:x:0:\nnogroup:x:65534:\n")
    _run(["umoci", "repack", "--image", str(layout) + ":img", str(bundle)])
    cfg = ["umoci", "config", "--image", str(layout) + ":img", "--config.env",
           "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    for c in cmd:
        cfg += ["--config.cmd", c]
    _run(cfg)
    tar = work / (layout.name + ".tar")
    if tar.exists():
        tar.unlink()
    _run(["skopeo", "copy", "--quiet", "oci:" + str(layout) + ":img",
          "docker-archive:" + str(tar) + ":" + name])
    shutil.rmtree(bundle, ignore_errors=True)
    shutil.rmtree(layout, ignore_errors=True)
    return tar


def build_pause(work):
    src = work / "pause.c"
    src.write_text(
        "#include <signal.h>\n#include <unistd.h>\n#include <stdlib.h>\n#include <sys/wait.h>\n"
        "static void bye(int s) { (void) s; _exit(0); }\n"
        "static void reap(int s) { (void) s; while (waitpid(-1, NULL, WNOHANG) > 0) ; }\n"
        "int main(void) { signal(SIGINT, bye); signal(SIGTERM, bye); signal(SIGCHLD, reap);\n"
        "  for (;;) pause(); }\n")
    out = work / "pause"
    _run(["gcc", "-static", "-O2", "-o", str(out), str(src)])
    return _tar_dir_image(work, PAUSE_IMAGE, {"/pause": out}, ["/pause"])


def build_busybox(work, name=BUSYBOX_IMAGE, extra=None):
    """A busybox image like tests/images/busybox-rootfs.sh's (the host class's
    tests use that one): /bin/busybox, every applet, /bin/bash as a wrapper of
    busybox sh (the seed examples call bash), an empty /workspace."""
    files = {"/bin/busybox": "/bin/busybox"}
    applets = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    for a in applets:
        if a != "busybox":
            files["/bin/" + a] = ("symlink", "busybox")
    work.mkdir(parents=True, exist_ok=True)
    wrapper = work / "bash-wrapper"
    wrapper.write_text('#!/bin/sh\nexec /bin/busybox sh "$@"\n')
    wrapper.chmod(0o755)
    files["/bin/bash"] = str(wrapper)
    keep = work / "empty"
    keep.write_text("")
    files["/workspace/.keep"] = str(keep)
    files.update(extra or {})
    return _tar_dir_image(work, name, files, ["/bin/sh"])


class Cluster:
    def __init__(self, bin_dir=None):
        self.bin = pathlib.Path(bin_dir) if bin_dir else k8s_bin_dir()
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="warren-k8s-"))
        self.procs = {}  # name -> Popen
        self.sysctls = {}
        self.cgroup_root = "/warren-k8s-" + self.dir.name.split("-")[-1]
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.containerd_sock = self.dir / "containerd" / "containerd.sock"
        self._save_sysctls()
        self.netns_before = self._cni_netns()
        self.nft_before = _nft_chains()

    # ---- start ----

    def start(self, timeout=120):
        try:
            t0 = time.monotonic()
            self._certs()
            self._start_etcd()
            self._start_apiserver()
            self._wait_api(60)
            self.t_api = time.monotonic() - t0
            self._start_containerd()
            self._import_images()
            self._start_controller_manager()
            self._start_scheduler()
            self._start_kubelet()
            self._wait_node_ready(timeout)
            self._restore_sysctls()
            self._wait_default_sa(60)
            self.t_ready = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name, args, **kw):
        log = open(self.dir / (name + ".log"), "wb")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, **kw)
        log.close()
        self.procs[name] = p
        return p

    def log(self, name):
        try:
            return (self.dir / (name + ".log")).read_text(errors="replace")
        except OSError:
            return ""

    def _certs(self):
        d = self.pki = self.dir / "pki"
        d.mkdir()
        self.ca = (d / "ca.crt", d / "ca.key")
        _run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
              str(self.ca[1]), "-out", str(self.ca[0]), "-days", "30", "-subj",
              "/CN=warren-test-k8s-ca", "-addext", "basicConstraints=critical,CA:TRUE",
              "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"])
        svc_ip = SERVICE_CIDR.rsplit(".", 1)[0] + ".1"
        self.apiserver_cert = _openssl_cert(
            d, "apiserver", "kube-apiserver", self.ca,
            sans=["IP:127.0.0.1", "DNS:localhost", "IP:" + svc_ip, "DNS:kubernetes",
                  "DNS:kubernetes.default", "DNS:kubernetes.default.svc"])
        self.admin_cert = _openssl_cert(d, "admin", "warren-test-admin", self.ca,
                                        org="system:masters")
        _run(["openssl", "genrsa", "-out", str(d / "sa.key"), "2048"])
        _run(["openssl", "rsa", "-in", str(d / "sa.key"), "-pubout", "-out", str(d / "sa.pub")])
        self.api_port = free_port()
        self.server = "https://127.0.0.1:%d" % self.api_port
        self.write_kubeconfig(self.kubeconfig, client_cert=self.admin_cert)

    def write_kubeconfig(self, path, client_cert=None, token=None, namespace=None):
        """A kubeconfig in YAML, as kubeadm and `kubectl config` write it
        (block style), with everything inline. warrend's JSON path is the
        unit tests' (tests/unit/test-k8s-config.c)."""
        user = {}
        if client_cert:
            user["client-certificate-data"] = base64.b64encode(client_cert[0].read_bytes()).decode()
            user["client-key-data"] = base64.b64encode(client_cert[1].read_bytes()).decode()
        if token:
            user["token"] = token
        ctx = {"cluster": "warren-test", "user": "u"}
        if namespace:
            ctx["namespace"] = namespace
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "warren-test", "cluster": {
                "server": self.server,
                "certificate-authority-data": base64.b64encode(self.ca[0].read_bytes()).decode()}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": ctx}],
        }
        import yaml
        pathlib.Path(path).write_text(yaml.safe_dump(cfg, default_flow_style=False))
        os.chmod(path, 0o600)
        return path

    def _start_etcd(self):
        self.etcd_port, peer = free_port(), free_port()
        self.etcd_url = "http://127.0.0.1:%d" % self.etcd_port
        self._spawn("etcd", ["etcd", "--name", "warren-test", "--data-dir", str(self.dir / "etcd"),
                             "--listen-client-urls", self.etcd_url,
                             "--advertise-client-urls", self.etcd_url,
                             "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
                             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
                             "--initial-cluster", "warren-test=http://127.0.0.1:%d" % peer,
                             "--listen-metrics-urls", "http://127.0.0.1:%d" % free_port(),
                             "--log-level", "warn"])

    def _start_apiserver(self):
        p = self.pki
        self._spawn("kube-apiserver", [
            str(self.bin / "kube-apiserver"),
            "--etcd-servers", self.etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.api_port),
            "--endpoint-reconciler-type", "none",
            "--tls-cert-file", str(self.apiserver_cert[0]),
            "--tls-private-key-file", str(self.apiserver_cert[1]),
            "--client-ca-file", str(self.ca[0]),
            "--service-account-key-file", str(p / "sa.pub"),
            "--service-account-signing-key-file", str(p / "sa.key"),
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--authorization-mode", "Node,RBAC",
            "--kubelet-client-certificate", str(self.admin_cert[0]),
            "--kubelet-client-key", str(self.admin_cert[1]),
            "--kubelet-preferred-address-types", "Hostname",
            "--allow-privileged=true",
            "--v", "1"])

    def api(self, method, path, body=None, timeout=10):
        """One request to the apiserver as the admin: (status, parsed JSON)."""
        ctx = ssl.create_default_context(cafile=str(self.ca[0]))
        ctx.load_cert_chain(str(self.admin_cert[0]), str(self.admin_cert[1]))
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=timeout) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode())
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw.decode(errors="replace")

    def _wait_api(self, timeout):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            for n in ("etcd", "kube-apiserver"):
                if self.procs[n].poll() is not None:
                    raise RuntimeError("%s exited:\n%s" % (n, self.log(n)[-4000:]))
            try:
                st, body = self.api("GET", "/readyz", timeout=2)
                if st == 200:
                    return
                last = body
            except OSError as e:
                last = e
            time.sleep(0.2)
        raise RuntimeError("apiserver not ready: %s\n%s" % (last, self.log("kube-apiserver")[-4000:]))

    def _start_containerd(self):
        d = self.dir / "containerd"
        cni_conf = self.dir / "cni"
        cni_conf.mkdir()
        (cni_conf / "10-warren-test.conflist").write_text(json.dumps({
            "cniVersion": "0.4.0", "name": "warren-test",
            "plugins": [{"type": "ptp", "ipMasq": False,
                         "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR}]],
                                  # warrend's relay callback (tests/k8s/conftest.py)
                                  "routes": [{"dst": CALLBACK_CIDR}],
                                  "dataDir": str(self.dir / "cni-ipam")}}]}))
        d.mkdir()
        cfg = d / "config.toml"
        cfg.write_text(f"""version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{self.containerd_sock}"
[ttrpc]
  address = "{d}/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni_conf}"
""")
        self._spawn("containerd", ["containerd", "--config", str(cfg)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.procs["containerd"].poll() is not None:
                raise RuntimeError("containerd exited:\n" + self.log("containerd")[-4000:])
            if self.containerd_sock.exists() and self.ctr("version", check=False).returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("containerd not ready:\n" + self.log("containerd")[-4000:])

    def ctr(self, *args, check=True):
        return _run(["ctr", "--address", str(self.containerd_sock), "-n", "k8s.io"] + list(args),
                    check=check)

    def import_image(self, tar):
        self.ctr("images", "import", str(tar))

    def _import_images(self):
        work = self.dir / "images"
        work.mkdir()
        self.import_image(build_pause(work))
        self.import_image(build_busybox(work))

    def _start_controller_manager(self):
        self._spawn("kube-controller-manager", [
            str(self.bin / "kube-controller-manager"),
            "--kubeconfig", str(self.kubeconfig),
            "--authentication-kubeconfig", str(self.kubeconfig),
            "--authorization-kubeconfig", str(self.kubeconfig),
            "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
            "--leader-elect=false",
            "--service-account-private-key-file", str(self.pki / "sa.key"),
            "--root-ca-file", str(self.ca[0]),
            "--cluster-signing-cert-file", str(self.ca[0]),
            "--cluster-signing-key-file", str(self.ca[1]),
            "--use-service-account-credentials=false",
            "--v", "1"])

    def _start_scheduler(self):
        self._spawn("kube-scheduler", [
            str(self.bin / "kube-scheduler"),
            "--kubeconfig", str(self.kubeconfig),
            "--authentication-kubeconfig", str(self.kubeconfig),
            "--authorization-kubeconfig", str(self.kubeconfig),
            "--bind-address", "127.0.0.1", "--secure-port", str(free_port()),
            "--leader-elect=false", "--v", "1"])

    def _make_cgroup_root(self):
        """The kubelet wants its --cgroup-root to exist in every hierarchy;
        a v1 cpuset child starts empty, so it gets its parent's."""
        for top in pathlib.Path("/sys/fs/cgroup").iterdir():
            if not top.is_dir() or top.is_symlink():
                continue
            root = top / self.cgroup_root.lstrip("/")
            with contextlib.suppress(FileExistsError):
                root.mkdir()
            for f in ("cpuset.cpus", "cpuset.mems"):
                if (root / f).exists():
                    (root / f).write_text((top / f).read_text())

    def _start_kubelet(self):
        self._make_cgroup_root()
        root = self.dir / "kubelet"
        root.mkdir()
        self.kubelet_port = free_port()
        cfg = self.dir / "kubelet.json"
        cfg.write_text(json.dumps({
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": "127.0.0.1", "port": self.kubelet_port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": free_port(),
            "failCgroupV1": False, "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root, "cgroupsPerQOS": True,
            "failSwapOn": False, "podCIDR": POD_CIDR,
            "authentication": {"anonymous": {"enabled": False},
                               "webhook": {"enabled": False},
                               "x509": {"clientCAFile": str(self.ca[0])}},
            "authorization": {"mode": "AlwaysAllow"},
            "containerRuntimeEndpoint": "unix://" + str(self.containerd_sock),
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%"},
            "serializeImagePulls": False,
            "resolvConf": "/etc/resolv.conf",
            "maxPods": 60,
        }))
        self._spawn("kubelet", [
            str(self.bin / "kubelet"), "--config", str(cfg), "--kubeconfig", str(self.kubeconfig),
            "--root-dir", str(root), "--hostname-override", NODE_NAME, "--v", "1"])

    def _wait_node_ready(self, timeout):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            for n, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError("%s exited (%d):\n%s" % (n, p.returncode, self.log(n)[-6000:]))
            st, body = self.api("GET", "/api/v1/nodes/" + NODE_NAME)
            if st == 200:
                for c in body.get("status", {}).get("conditions", []):
                    if c["type"] == "Ready":
                        last = c
                        if c["status"] == "True":
                            return
            time.sleep(0.3)
        raise RuntimeError("node not Ready: %s\n%s" % (last, self.log("kubelet")[-6000:]))

    def _wait_default_sa(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st, _ = self.api("GET", "/api/v1/namespaces/default/serviceaccounts/default")
            if st == 200:
                return
            time.sleep(0.2)
        raise RuntimeError("no default service account:\n" + self.log("kube-controller-manager")[-4000:])

    # ---- helpers for tests ----

    def create_namespace(self, ns):
        st, body = self.api("POST", "/api/v1/namespaces",
                            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        if st not in (200, 201, 409):
            raise RuntimeError("create namespace %s: %s %s" % (ns, st, body))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            st, _ = self.api("GET", "/api/v1/namespaces/%s/serviceaccounts/default" % ns)
            if st == 200:
                return
            time.sleep(0.2)
        raise RuntimeError("namespace %s has no default service account" % ns)

    def pods(self, ns, selector=None):
        path = "/api/v1/namespaces/%s/pods" % ns
        if selector:
            path += "?labelSelector=" + urllib.request.quote(selector)
        st, body = self.api("GET", path)
        assert st == 200, body
        return body["items"]

    # ---- stop ----

    def _save_sysctls(self):
        for k in KUBELET_SYSCTLS:
            with contextlib.suppress(OSError):
                self.sysctls[k] = pathlib.Path("/proc/sys", k).read_text().strip()

    def _restore_sysctls(self):
        for k, v in self.sysctls.items():
            p = pathlib.Path("/proc/sys", k)
            with contextlib.suppress(OSError):
                if p.read_text().strip() != v:
                    p.write_text(v + "\n")

    def _shim_pids(self):
        """containerd-shim processes of this containerd (their -address is
        our socket) and everything in their sessions."""
        want = str(self.containerd_sock).encode()
        pids = []
        for e in os.listdir("/proc"):
            if not e.isdigit():
                continue
            try:
                cmd = open("/proc/%s/cmdline" % e, "rb").read().split(b"\0")
            except OSError:
                continue
            if cmd and b"containerd-shim" in cmd[0] and want in cmd:
                pids.append(int(e))
        return pids

    def _stop_proc(self, name, timeout=10):
        p = self.procs.get(name)
        if not p or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def stop(self):
        # Pods first, while the kubelet still runs: their containers and
        # CNI setup are taken down by the runtime itself.
        if self.procs.get("kubelet") and self.procs["kubelet"].poll() is None:
            with contextlib.suppress(Exception):
                st, body = self.api("GET", "/api/v1/pods")
                for pod in body.get("items", []) if st == 200 else []:
                    m = pod["metadata"]
                    self.api("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (
                        m["namespace"], m["name"]))
        for n in ("kube-controller-manager", "kube-scheduler", "kubelet"):
            self._stop_proc(n)
        # containers left: stop the pod sandboxes through CRI, then the shims
        if self.procs.get("containerd") and self.procs["containerd"].poll() is None:
            with contextlib.suppress(Exception):
                tasks = self.ctr("tasks", "ls", "-q", check=False).stdout.decode().split()
                for t in tasks:
                    self.ctr("tasks", "kill", "-s", "SIGKILL", t, check=False)
                time.sleep(0.5)
                for t in tasks:
                    self.ctr("tasks", "delete", "-f", t, check=False)
            with contextlib.suppress(Exception):
                for c in self.ctr("containers", "ls", "-q", check=False).stdout.decode().split():
                    self.ctr("containers", "delete", c, check=False)
        shims = self._shim_pids()
        self._stop_proc("containerd")
        for pid in shims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for n in ("kube-apiserver", "etcd"):
            self._stop_proc(n)
        self._cleanup_net()
        self._cleanup_kube_chains()
        self._unmount_all()
        self._remove_cgroups()
        self._restore_sysctls()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _cleanup_kube_chains(self):
        """The kubelet's iptables chains in the host's namespace
        (KUBE-FIREWALL with the INPUT/OUTPUT jumps to it, KUBE-IPTABLES-HINT,
        the KUBE-KUBELET-CANARY of each table), made through iptables-nft
        and left when it stops: the KUBE-* chains that were not there
        before this cluster, the rules jumping to them, and the tables that
        appeared with them once nothing is left in them."""
        now = _nft_chains()
        new = {k for k in now if k not in self.nft_before and k[2].startswith("KUBE-")}
        if not new:
            return
        for (fam, table, chain), rules in now.items():
            for handle, target in rules:
                if target and (fam, table, target) in new:
                    _run(["nft", "delete", "rule", fam, table, chain, "handle", str(handle)],
                         check=False)
        for fam, table, chain in new:
            _run(["nft", "delete", "chain", fam, table, chain], check=False)
        tables_before = {(f, t) for f, t, _ in self.nft_before}
        left = _nft_chains()
        if new & set(left):
            raise RuntimeError("kubelet chains left in the host's nftables: %s" % sorted(new & set(left)))
        for fam, table in {(f, t) for f, t, _ in new} - tables_before:
            chains = [k for k in left if k[:2] == (fam, table)]
            if all(not left[k] for k in chains):
                _run(["nft", "delete", "table", fam, table], check=False)

    def _cleanup_net(self):
        """CNI netns (containerd keeps them under /var/run/netns/cni-*) of
        pods whose IPs this cluster's host-local allocated, and their
        ptp host-side veths (routes to POD_CIDR addresses)."""
        ipam = self.dir / "cni-ipam" / "warren-test"
        ids = set()
        if ipam.is_dir():
            for f in ipam.iterdir():
                if f.name[0].isdigit():
                    with contextlib.suppress(OSError):
                        ids.add(f.read_text().split()[0])
        prefix = POD_CIDR.rsplit(".", 1)[0] + "."
        routes = _run(["ip", "-4", "route", "show"], check=False).stdout.decode().splitlines()
        for line in routes:
            parts = line.split()
            if parts and parts[0].startswith(prefix) and "dev" in parts:
                dev = parts[parts.index("dev") + 1]
                if dev.startswith("veth"):
                    _run(["ip", "link", "del", dev], check=False)
        # containerd makes a netns per pod (/var/run/netns/cni-<uuid>)
        # and leaves the file when it is killed: remove the ones that
        # appeared while this cluster ran
        for name in self._cni_netns() - self.netns_before:
            f = pathlib.Path("/var/run/netns") / name
            _run(["umount", str(f)], check=False)
            with contextlib.suppress(OSError):
                f.unlink()

    @staticmethod
    def _cni_netns():
        d = pathlib.Path("/var/run/netns")
        return {f.name for f in d.iterdir() if f.name.startswith("cni-")} if d.is_dir() else set()

    def _unmount_all(self):
        base = str(self.dir)
        for _ in range(5):
            mounts = []
            with open("/proc/self/mountinfo") as f:
                for line in f:
                    mp = line.split()[4].replace("\\040", " ")
                    if mp == base or mp.startswith(base + "/"):
                        mounts.append(mp)
            if not mounts:
                return
            for mp in sorted(mounts, key=len, reverse=True):
                _run(["umount", "-l", mp], check=False)

    def _remove_cgroups(self):
        for top in pathlib.Path("/sys/fs/cgroup").iterdir():
            root = top / self.cgroup_root.lstrip("/")
            if not root.is_dir():
                continue
            dirs = sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(str(p)),
                          reverse=True)
            for p in dirs + [root]:
                for _ in range(20):
                    try:
                        os.rmdir(p)
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        # processes still inside: kill them (they are ours:
                        # this cgroup root is this cluster's own)
                        with contextlib.suppress(OSError):
                            for pid in open(p / "cgroup.procs").read().split():
                                with contextlib.suppress(ProcessLookupError):
                                    os.kill(int(pid), signal.SIGKILL)
                        time.sleep(0.1)


if __name__ == "__main__":
    if sys.argv[1:] == ["up"]:
        c = Cluster().start()
        print("kubeconfig:", c.kubeconfig, "api ready %.1fs, node ready %.1fs" % (c.t_api, c.t_ready),
              flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
        finally:
            c.stop()
    else:
        print(__doc__)
