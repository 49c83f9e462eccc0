#!/usr/bin/env python3
"""A stand-in for warren-fetch that speaks its protocol (fetch-proto.h) and
lies, for test_fetch.py: warrend must not take the helper's word.
  LYING_FETCH_MODE=swap     claims a layer blob digest, writes other bytes
                            (a valid tar whose diff id the config it
                            reports does match): only warrend's own sha256
                            of the landed blob catches it
  LYING_FETCH_MODE=garbage  answers the manifest request with a malformed
                            message
  LYING_FETCH_MODE=unasked  answers with an id nobody asked for
LYING_FETCH_LAYERS: a JSON file {"claimed": digest, "tar": hex bytes}; a
helper that breaks the protocol first appends its pid to that path + ".liars"."""
import hashlib
import json
import os
import socket
import struct
import sys

MAGIC, VERSION = 0x57464531, 1
SIZES = {0x81: 41064, 0x83: 98408, 0x85: 24, 0x84: 24}


def hdr(t, ident):
    return struct.pack("<IHHII", MAGIC, VERSION, t, SIZES[t], ident)


def z(b, n):
    return b + b"\0" * (n - len(b))


def main():
    fd = int(sys.argv[sys.argv.index("--sock-fd") + 1])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=fd)
    mode = os.environ["LYING_FETCH_MODE"]
    spec_path = os.environ["LYING_FETCH_LAYERS"]
    spec = json.load(open(spec_path))
    tar = bytes.fromhex(spec["tar"])
    diff_id = "sha256:" + hashlib.sha256(tar).hexdigest()
    config_digest = "sha256:" + "c" * 64
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(s, 4096, 4)
        except OSError:
            return
        if not msg:
            return
        _, _, t, _, ident = struct.unpack_from("<IHHII", msg)
        if mode in ("garbage", "unasked"):
            with open(spec_path + ".liars", "a") as f:  # for the test: who lied
                f.write("%d\n" % os.getpid())
        if mode == "garbage":
            s.send(b"\x01\x02\x03 not a message")
            continue
        if mode == "unasked":
            s.send(hdr(0x85, 4242) + struct.pack("<Q", 1))
            continue
        if t == 1:  # manifest: one layer, the claimed digest
            body = z(config_digest.encode(), 72) + struct.pack("<QII", 100, 1, 0)
            body += z(spec["claimed"].encode(), 72) + struct.pack("<Q", len(tar))
            s.send(z(hdr(0x81, ident) + body, SIZES[0x81]))
        elif t == 2:  # config: its diff id is that of the bytes we will write
            strings = diff_id.encode() + b"\0" + b"lied\0"
            counts = [1, 0, 0, 1] + [0] * 7
            body = struct.pack("<11II", *counts, len(strings))
            body += struct.pack("<qqqqiI", 0, 0, 0, 0, 0, 0) + strings
            s.send(z(hdr(0x83, ident) + body, SIZES[0x83]))
        elif t == 3:  # blob: write other bytes than claimed, say it went fine
            os.pwrite(fds[0], tar, 0)
            os.close(fds[0])
            s.send(hdr(0x85, ident) + struct.pack("<Q", len(tar)))


if __name__ == "__main__":
    main()
