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

from warren._proto.warren.v1 import sandboxes_pb2 as pb
from warren._proto.warren.v1 import sandboxes_pb2_grpc, system_pb2, system_pb2_grpc


class System(system_pb2_grpc.SystemServicer):
    def __init__(self):
        self.metadata = []

    def GetVersion(self, request, context):
        self.metadata.append(dict(context.invocation_metadata()))
        return system_pb2.GetVersionResponse(version="0.0.0-fake", api_version="v1")


class Sandboxes(sandboxes_pb2_grpc.SandboxesServicer):
    def __init__(self):
        self.boxes = {}
        self.n = 0
        self.last_create = None
        self.exec_requests = []

    def _find(self, key, context):
        for s in self.boxes.values():
            if key in (s.id, s.name):
                return s
        context.abort(grpc.StatusCode.NOT_FOUND, f"sandbox {key!r} not found")

    def CreateSandbox(self, request, context):
        self.last_create = request
        self.n += 1
        s = pb.Sandbox(id="sb-%016x" % self.n, name=request.name,
                       status=pb.SANDBOX_STATUS_RUNNING, image_ref=request.image.ref)
        self.boxes[s.id] = s
        return s

    def GetSandbox(self, request, context):
        return self._find(getattr(request, request.WhichOneof("key")), context)

    def ListSandboxes(self, request, context):
        return pb.ListSandboxesResponse(sandboxes=list(self.boxes.values()))

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
    port = server.add_insecure_port(address)
    server.start()
    return server, port, sbx, sysv


if __name__ == "__main__":
    import sys

    srv, port, _, _ = start()
    print(port, flush=True)
    sys.stdin.read()  # run until the parent closes our stdin
    srv.stop(0)
