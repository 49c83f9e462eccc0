#!/usr/bin/env python3
"""grpcio unary benchmark against warren.v1.Diag/Echo: sequential calls for
N seconds on one channel; prints calls/s, p50 and p99 latency.

    bench/rpc.py --addr unix:/path/sock [--seconds 3]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import grpc  # noqa: E402

from warren._proto.warren.v1 import diag_pb2, diag_pb2_grpc  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    ch = grpc.insecure_channel(a.addr)
    stub = diag_pb2_grpc.DiagStub(ch)
    req = diag_pb2.EchoRequest(payload=b"0123456789abcdef")
    for _ in range(200):  # warm up
        stub.Echo(req)
    lat = []
    start = time.perf_counter()
    end = start + a.seconds
    while True:
        t = time.perf_counter()
        if t >= end:
            break
        stub.Echo(req)
        lat.append(time.perf_counter() - t)
    secs = time.perf_counter() - start
    lat.sort()
    print("grpcio-unary: %d calls in %.2f s = %.0f calls/s, p50 %.1f us, p99 %.1f us"
          % (len(lat), secs, len(lat) / secs, lat[len(lat) // 2] * 1e6,
             lat[len(lat) * 99 // 100] * 1e6))
    ch.close()


if __name__ == "__main__":
    main()
