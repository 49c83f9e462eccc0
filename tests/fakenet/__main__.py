"""Start/stop the fake internet by hand (root; run from tests/):

    cd tests && python3 -m fakenet up            # foreground; Ctrl-C (or `down`) stops it
    python3 -m fakenet status                    # running beds: slot, pid, netns, addresses
    python3 -m fakenet exec [-s SLOT] -- curl https://api.github.com/echo
    python3 -m fakenet env [-s SLOT]             # shell exports: CA, resolv.conf, client netns
    python3 -m fakenet down [-s SLOT]            # SIGTERM to the `up` process
    python3 -m fakenet cleanup                   # remove what crashed beds left (unheld slots only)
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

from .bed import FakeNet, cleanup_stale, running_beds


def _pick(slot):
    beds = running_beds()
    if slot is None:
        if len(beds) != 1:
            sys.exit(f"fakenet: {len(beds)} beds running ({sorted(beds)}); pass -s SLOT")
        slot = next(iter(beds))
    if slot not in beds or "client_ns" not in beds[slot]:
        sys.exit(f"fakenet: no bed of this CLI running in slot {slot}")
    return beds[slot]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m fakenet", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up")
    up.add_argument("--no-ssh", action="store_true")
    for name in ("exec", "env", "down", "status"):
        p = sub.add_parser(name)
        p.add_argument("-s", "--slot", type=int)
        if name == "exec":
            p.add_argument("argv", nargs=argparse.REMAINDER)
    sub.add_parser("cleanup")
    a = ap.parse_args(argv)

    if a.cmd == "up":
        bed = FakeNet(ssh=not a.no_ssh)
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        signal.signal(signal.SIGINT, lambda *_: stop.append(1))
        bed.start()
        try:
            info = {"pid": os.getpid(), "slot": bed.slot, "dir": bed.dir, "netns": bed.netns,
                    "client_ns": bed.client.ns, "dns": [bed.dns, bed.dns6], "ca_pem": bed.ca_pem,
                    "ranges": bed.ranges, "logs": bed.log_paths, "resolv_conf": bed.resolv_conf,
                    "env": {k: v for k, v in bed.client_env({}).items()},
                    "ssh": bed.ssh and {"user": bed.ssh.user, "key": bed.ssh.key,
                                        "known_hosts": bed.ssh.known_hosts},
                    "git": {k: bed.git[k] for k in ("https_url", "git_url", "ssh_url", "root", "user",
                                                    "password")}}
            bed._lock.write_state(info)
            print(json.dumps(info, indent=1), flush=True)
            print(f"fakenet: up in {bed.startup_seconds:.2f}s (slot {bed.slot}); Ctrl-C to stop", flush=True)
            while not stop:
                time.sleep(0.2)
        finally:
            bed.stop()
            print("fakenet: stopped", flush=True)
    elif a.cmd == "status":
        print(json.dumps(running_beds(), indent=1))
    elif a.cmd == "exec":
        st = _pick(a.slot)
        argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env.update(st["env"])
        sys.exit(subprocess.call(["ip", "netns", "exec", st["client_ns"], *(argv or ["sh"])], env=env))
    elif a.cmd == "env":
        st = _pick(a.slot)
        for k, v in st["env"].items():
            print(f"export {k}='{v}'")
        print(f"# client netns: {st['client_ns']}   DNS: {' '.join(st['dns'])}   CA: {st['ca_pem']}")
    elif a.cmd == "down":
        st = _pick(a.slot)
        os.kill(st["pid"], signal.SIGTERM)
    elif a.cmd == "cleanup":
        print("fakenet: cleaned slots", cleanup_stale())


if __name__ == "__main__":
    main()
