"""JSON-lines event logs shared by the bed's servers and its readers.

Each server appends one JSON object per line to its own log file:
{"t": <unix time>, "server": NAME, "event": ..., ...}. A line is written
with one write(2) on an O_APPEND fd, so readers never see half a line from
a finished event. Barrier probes carry "barrier": true; readers drop them.
"""
import json
import os
import signal
import sys
import threading
import time


class EventLog:
    def __init__(self, path, server):
        self.server = server
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self.lock = threading.Lock()

    def log(self, event, **fields):
        rec = {"t": time.time(), "server": self.server, "event": event}
        rec.update(fields)
        line = (json.dumps(rec, default=str, separators=(",", ":")) + "\n").encode()
        with self.lock:
            os.write(self.fd, line)


def read_events(path, offset=0):
    """Events in `path` from byte `offset`; returns (events, end_offset).
    A trailing partial line is left for the next read."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    events = []
    for line in data[:end].splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return events, offset + end


def serve_forever_until_signal(log):
    """Block the main thread until SIGTERM/SIGINT, then exit."""
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.log("ready", pid=os.getpid())
    while not stop.is_set():
        stop.wait(3600)
    log.log("stopped", pid=os.getpid())
    sys.stdout.flush()
    os._exit(0)


def load_config(argv):
    with open(argv[1]) as f:
        return json.load(f)
