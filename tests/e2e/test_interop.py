"""gRPC interop: Python grpcio (the oracle) and the C client against warrend's
Diag service, over TCP, a unix socket and TLS.

Covers the RPC layer's acceptance list: unary, 4 MiB messages, over-size →
RESOURCE_EXHAUSTED, unknown method → UNIMPLEMENTED, grpc-message with
non-ASCII/'%'/newline, a 200 MB bidi stream with content checked, client
cancel frees the server call, DEADLINE_EXCEEDED within 50 ms of the
deadline, 100 concurrent streams on one connection.
"""
import os
import subprocess
import threading
import time

import grpc
import pytest

from conftest import SANITIZED, build_path
from warren._proto.warren.v1 import diag_pb2, diag_pb2_grpc

MiB = 1 << 20
TRANSPORTS = ["tcp", "unix", "tls"]
INTEROP = build_path("tests/tools/wr-rpc-interop")
# Under ASan everything is several times slower; timing bounds stay honest
# on the normal build.
SLACK = 0.25 if SANITIZED else 0.05
BIG_OPTS = [("grpc.max_receive_message_length", 64 * MiB),
            ("grpc.max_send_message_length", 64 * MiB)]


@pytest.fixture(params=TRANSPORTS)
def target(request):
    """(transport, daemon) for each transport."""
    kind = request.param
    d = request.getfixturevalue("warrend_tls" if kind == "tls" else "warrend")
    return kind, d


def channel(target, options=()):
    kind, d = target
    opts = list(options)
    if kind == "unix":
        return grpc.insecure_channel(d.unix_addr, options=opts)
    if kind == "tcp":
        return grpc.insecure_channel(d.tcp_addr, options=opts)
    creds = grpc.ssl_channel_credentials(root_certificates=open(d.ca_file, "rb").read())
    opts.append(("grpc.ssl_target_name_override", "localhost"))
    return grpc.secure_channel(d.tcp_addr, creds, options=opts)


@pytest.fixture
def stub(target):
    ch = channel(target, BIG_OPTS)
    yield diag_pb2_grpc.DiagStub(ch)
    ch.close()


def stats(stub):
    return stub.Stats(diag_pb2.StatsRequest(), timeout=5)


def wait_idle(stub, timeout=5.0):
    """Wait until the server holds no calls but the Stats call itself."""
    deadline = time.monotonic() + timeout
    while True:
        s = stats(stub)
        if s.calls_in_flight == 0 or time.monotonic() > deadline:
            return s
        time.sleep(0.02)


def test_unary(stub):
    r = stub.Echo(diag_pb2.EchoRequest(payload=b"hello warren"), timeout=10)
    assert r.payload == b"hello warren"
    r = stub.Echo(diag_pb2.EchoRequest(), timeout=10)
    assert r.payload == b""


def test_large_message(stub):
    payload = os.urandom(4 * MiB)
    r = stub.Echo(diag_pb2.EchoRequest(payload=payload), timeout=30)
    assert r.payload == payload


def test_oversize_message(stub):
    # The server's limit is 16 MiB; the request is refused without the
    # connection being harmed.
    with pytest.raises(grpc.RpcError) as ei:
        stub.Echo(diag_pb2.EchoRequest(payload=b"x" * (17 * MiB)), timeout=30)
    assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert stub.Echo(diag_pb2.EchoRequest(payload=b"after"), timeout=10).payload == b"after"


def test_unknown_method(target):
    ch = channel(target)
    call = ch.unary_unary("/warren.v1.Diag/NoSuchMethod",
                          request_serializer=diag_pb2.EchoRequest.SerializeToString,
                          response_deserializer=diag_pb2.EchoResponse.FromString)
    with pytest.raises(grpc.RpcError) as ei:
        call(diag_pb2.EchoRequest(payload=b"x"), timeout=10)
    assert ei.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "NoSuchMethod" in ei.value.details()
    ch.close()


def test_error_message_round_trip(stub):
    msg = "naïve 100% sure ✓\nsecond line %41 \x7f"
    with pytest.raises(grpc.RpcError) as ei:
        stub.Echo(diag_pb2.EchoRequest(status=9, message=msg), timeout=10)
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert ei.value.details() == msg


def chunk(i, size):
    head = i.to_bytes(8, "little")
    return head + bytes([(i + j) % 251 for j in range(256)]) * ((size - 8) // 256)


@pytest.mark.slow
def test_bidi_200mb(stub):
    size = MiB
    n = 200
    # Reuse a few buffers (with distinct headers) to keep the client fast.
    bodies = [chunk(i, size)[8:] for i in range(4)]

    def expected(i):
        return i.to_bytes(8, "little") + bodies[i % 4]

    def requests():
        for i in range(n):
            yield diag_pb2.EchoRequest(payload=expected(i))

    got = 0
    for i, r in enumerate(stub.Bidi(requests(), timeout=120)):
        assert r.payload == expected(i), "message %d corrupted" % i
        got += len(r.payload)
    assert got == n * (size - (size - 8) % 256)
    s = wait_idle(stub)
    assert s.calls_in_flight == 0


def test_client_cancel_frees_call(stub):
    before = wait_idle(stub)
    release = threading.Event()

    def requests():
        for i in range(3):
            yield diag_pb2.EchoRequest(payload=b"p%d" % i)
        release.wait(10)

    call = stub.Bidi(requests(), timeout=30)
    assert next(call).payload == b"p0"
    s = stats(stub)
    assert s.calls_in_flight >= 1
    call.cancel()
    release.set()
    after = wait_idle(stub)
    assert after.calls_in_flight == 0
    assert after.cancelled >= before.cancelled + 1


def test_deadline(stub):
    before = wait_idle(stub)
    t0 = time.monotonic()
    with pytest.raises(grpc.RpcError) as ei:
        stub.Sleep(diag_pb2.SleepRequest(millis=10000), timeout=0.3)
    elapsed = time.monotonic() - t0
    assert ei.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert 0.3 - 0.01 <= elapsed <= 0.3 + SLACK, elapsed
    # The server stopped the work (deadline or the client's cancel, whichever
    # came first) and freed the call.
    after = wait_idle(stub)
    assert after.calls_in_flight == 0
    assert (after.deadline_exceeded + after.cancelled) >= (before.deadline_exceeded + before.cancelled + 1)


def test_sleep_completes(stub):
    t0 = time.monotonic()
    stub.Sleep(diag_pb2.SleepRequest(millis=100), timeout=5)
    assert 0.09 <= time.monotonic() - t0 < 2


def test_100_concurrent_streams(stub):
    # 100 calls in flight at once on one connection: each sleeps 300 ms, so
    # serial handling would take 30 s.
    t0 = time.monotonic()
    futs = [stub.Sleep.future(diag_pb2.SleepRequest(millis=300), timeout=20) for _ in range(100)]
    for f in futs:
        f.result()
    assert time.monotonic() - t0 < 5
    # And 100 concurrent bidi streams, each checked.
    results = {}

    def run(i):
        msgs = [diag_pb2.EchoRequest(payload=b"%d-%d" % (i, k)) for k in range(20)]
        results[i] = [r.payload for r in stub.Bidi(iter(msgs), timeout=30)]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 100
    for i in range(100):
        assert results[i] == [b"%d-%d" % (i, k) for k in range(20)]


def test_source_and_sink(stub):
    msgs = list(stub.Source(diag_pb2.SourceRequest(count=50, size=100000), timeout=30))
    assert len(msgs) == 50
    want = bytes(i % 251 for i in range(100000))
    assert all(m.payload == want for m in msgs)
    data = [os.urandom(5000) for _ in range(40)]
    r = stub.Sink(iter(diag_pb2.EchoRequest(payload=d) for d in data), timeout=30)
    h = 0xcbf29ce484222325
    for d in data:
        for b in d:
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    assert (r.total_bytes, r.messages, r.fnv1a) == (200000, 40, h)


# --- the C client (tests/tools/wr-rpc-interop) ---

C_CASES = ["unary", "large", "oversize", "unimplemented", "error-message", "bidi",
           "cancel", "deadline", "concurrent", "source-sink"]


@pytest.mark.parametrize("case", C_CASES)
def test_c_client(target, case):
    kind, d = target
    args = [INTEROP]
    if kind == "unix":
        args += ["--addr", d.unix_addr]
    else:
        args += ["--addr", d.tcp_addr]
    if kind == "tls":
        args += ["--tls", "--ca", d.ca_file, "--server-name", "localhost"]
    if case == "bidi":
        args += ["--megabytes", "20" if SANITIZED else "200"]
    if case == "deadline":
        args += ["--slack-ms", str(int(SLACK * 1000))]
    p = subprocess.run(args + [case], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, "wr-rpc-interop %s failed:\n%s%s" % (case, p.stdout, p.stderr)
    assert "PASS %s" % case in p.stdout
