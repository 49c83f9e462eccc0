"""An in-process grpcio Warren server for the SDK's own tests: sandboxes
live in a dict and Exec runs the argv as a real local subprocess (stdin,
signals, exit codes, split output all real). Not a model of warrend's
isolation, only of its wire behaviour."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from concurrent import futures

import grpc

from warren._proto.warren.v1 import common_pb2, images_pb2, images_pb2_grpc
from warren._proto.warren.v1 import sandboxes_pb2 as pb
from warren._proto.warren.v1 import (sandboxes_pb2_grpc, secrets_pb2, secrets_pb2_grpc,
                                     system_pb2, system_pb2_grpc, volumes_pb2, volumes_pb2_grpc)

T0 = common_pb2.Timestamp(unix_nanos=1_700_000_000 * 10**9)


class System(system_pb2_grpc.SystemServicer):
    def __init__(self):
        self.metadata = []

    def GetVersion(self, request, context):
        self.metadata.append(dict(context.invocation_metadata()))
        return system_pb2.GetVersionResponse(version="0.0.0-fake", api_version="v1",
                                             uptime_seconds=7, cgroup_mode="v2")


class Images(images_pb2_grpc.ImagesServicer):
    IMG = images_pb2.Image(id="sha256:abc", names=["busybox:latest"], layers=["sha256:l1"],
                           size_bytes=1024, created_at=T0, source="import",
                           config=images_pb2.ImageConfig(env=["PATH=/bin", "A=b=c"],
                                                         working_dir="/w", cmd=["sh"]))

    def __init__(self):
        self.imported = []

    def GetImage(self, request, context):
        if request.image not in ("busybox:latest", self.IMG.id):
            context.abort(grpc.StatusCode.NOT_FOUND, f"image {request.image!r} not found")
        return self.IMG

    def ListImages(self, request, context):
        return images_pb2.ListImagesResponse(images=[self.IMG])

    def ImportImage(self, request_iterator, context):
        reqs = list(request_iterator)
        self.imported.append(reqs)
        img = images_pb2.Image()
        img.CopyFrom(self.IMG)
        img.names[:] = [reqs[0].meta.name]
        img.config.CopyFrom(reqs[0].meta.config)
        return img


class Secrets(secrets_pb2_grpc.SecretsServicer):
    def __init__(self):
        self.secrets = {}

    def SetSecret(self, request, context):
        info = secrets_pb2.SecretInfo(name=request.name, keys=sorted(request.values),
                                      updated_at_unix=1_700_000_000)
        self.secrets[request.name] = info
        return info

    def ListSecrets(self, request, context):
        return secrets_pb2.ListSecretsResponse(secrets=list(self.secrets.values()))


class Volumes(volumes_pb2_grpc.VolumesServicer):
    def __init__(self):
        self.files = {}

    def CreateVolume(self, request, context):
        return volumes_pb2.Volume(name=request.name, created_at=T0)

    def ListVolumes(self, request, context):
        return volumes_pb2.ListVolumesResponse(volumes=[volumes_pb2.Volume(name="v")])

    def PutFile(self, request_iterator, context):
        meta, data = None, b""
        for r in request_iterator:
            if r.HasField("meta"):
                meta = r.meta
            else:
                data += r.data
        self.files[(meta.volume, meta.path)] = data
        return volumes_pb2.FileInfo(path=meta.path, size_bytes=len(data), mode=meta.mode,
                                    modified_at=T0)

    def ListFiles(self, request, context):
        return volumes_pb2.ListFilesResponse(files=[
            volumes_pb2.FileInfo(path=p, size_bytes=len(d), mode=0o644)
            for (v, p), d in sorted(self.files.items())
            if v == request.volume and p.startswith(request.prefix)])


class Sandboxes(sandboxes_pb2_grpc.SandboxesServicer):
    def __init__(self):
        self.boxes = {}
        self.n = 0
        self.last_create = None
        self.exec_requests = []
        self.running = {}  # pid -> Popen of processes still running
        self.creates = []  # every CreateSandboxRequest received
        self.events = {}  # sandbox id -> [pb.NetworkEvent] (tests append)
        self.event_requests = []  # every ListNetworkEventsRequest received
        self.on_list_events = None  # called (sandbox) after each ListNetworkEvents

    def _find(self, key, context):
        for s in self.boxes.values():
            if key in (s.id, s.name):
                return s
        context.abort(grpc.StatusCode.NOT_FOUND, f"sandbox {key!r} not found")

    def CreateSandbox(self, request, context):
        self.last_create = request
        self.creates.append(request)
        if request.network_policy.host_rules:
            # As warrend answers until per-host request rules land.
            context.abort(grpc.StatusCode.UNIMPLEMENTED,
                          "network_policy.host_rules: per-host request rules are not "
                          "implemented yet")
        self.n += 1
        s = pb.Sandbox(id="sb-%016x" % self.n, name=request.name,
                       status=pb.SANDBOX_STATUS_RUNNING, image_ref=request.image.ref,
                       egress_enforced=request.HasField("network_policy"))
        self.boxes[s.id] = s
        return s

    def GetSandbox(self, request, context):
        return self._find(getattr(request, request.WhichOneof("key")), context)

    def ListSandboxes(self, request, context):
        return pb.ListSandboxesResponse(sandboxes=list(self.boxes.values()))

    def ListProcesses(self, request, context):
        self._find(request.sandbox, context)
        return pb.ListProcessesResponse(processes=[
            pb.Process(exec_id="ex-1", pid=pid, argv=list(p.args), running=True, started_at=T0)
            for pid, p in list(self.running.items())] + [
            pb.Process(exec_id="ex-0", pid=1, argv=["true"], running=False,
                       exited=pb.ExecExited(exit_code=0, reason=pb.EXIT_REASON_EXITED))])

    def ListNetworkEvents(self, request, context):
        self.event_requests.append(request)
        s = self._find(request.sandbox, context)
        evs = [e for e in self.events.get(s.id, []) if e.seq > request.after_seq]
        if request.limit:
            evs = evs[-request.limit:]
        resp = pb.ListNetworkEventsResponse(events=evs,
                                            last_seq=evs[-1].seq if evs else request.after_seq)
        if self.on_list_events:
            self.on_list_events(s)
        return resp

    def TerminateSandbox(self, request, context):
        s = self._find(getattr(request, request.WhichOneof("key")), context)
        s.status = pb.SANDBOX_STATUS_TERMINATED
        return s

    def Exec(self, request_iterator, context):
        first = next(request_iterator)
        start = first.start
        self._find(start.sandbox, context)
        self.exec_requests.append(first)
        env = dict(os.environ)
        env.update(start.env)
        p = subprocess.Popen(list(start.argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=start.workdir or None, env=env)
        self.running[p.pid] = p
        yield pb.ExecResponse(started=pb.ExecStarted(pid=p.pid, exec_id="ex-1"))

        def feed():
            try:
                for req in request_iterator:
                    self.exec_requests.append(req)
                    k = req.WhichOneof("kind")
                    if k == "stdin":
                        p.stdin.write(req.stdin)
                        p.stdin.flush()
                    elif k == "close_stdin":
                        p.stdin.close()
                    elif k == "signal":
                        p.send_signal(req.signal.signal)
            except Exception:
                pass

        threading.Thread(target=feed, daemon=True).start()
        out = []
        lock = threading.Lock()

        def pump(f, kind):
            # One byte at a time so multibyte characters split across messages.
            while True:
                b = f.read1(3) if hasattr(f, "read1") else f.read(3)
                if not b:
                    return
                with lock:
                    out.append(pb.ExecResponse(**{kind: pb.ExecOutput(data=b)}))

        ts = [threading.Thread(target=pump, args=(p.stdout, "stdout")),
              threading.Thread(target=pump, args=(p.stderr, "stderr"))]
        for t in ts:
            t.start()
        while any(t.is_alive() for t in ts) or out:
            with lock:
                batch, out[:] = list(out), []
            for r in batch:
                yield r
            time.sleep(0.005)
        rc = p.wait()
        self.running.pop(p.pid, None)
        if rc < 0:
            yield pb.ExecResponse(exited=pb.ExecExited(exit_code=128 - rc, signal=-rc,
                                                       reason=pb.EXIT_REASON_SIGNALED))
        else:
            yield pb.ExecResponse(exited=pb.ExecExited(exit_code=rc, reason=pb.EXIT_REASON_EXITED))


def start(address="127.0.0.1:0"):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    sbx, sysv = Sandboxes(), System()
    sandboxes_pb2_grpc.add_SandboxesServicer_to_server(sbx, server)
    system_pb2_grpc.add_SystemServicer_to_server(sysv, server)
    images_pb2_grpc.add_ImagesServicer_to_server(Images(), server)
    secrets_pb2_grpc.add_SecretsServicer_to_server(Secrets(), server)
    volumes_pb2_grpc.add_VolumesServicer_to_server(Volumes(), server)
    port = server.add_insecure_port(address)
    server.start()
    return server, port, sbx, sysv


if __name__ == "__main__":
    import sys

    srv, port, _, _ = start()
    print(port, flush=True)
    sys.stdin.read()  # run until the parent closes our stdin
    srv.stop(0)
