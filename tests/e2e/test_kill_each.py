"""kill -9 of each of warrend's processes in turn (issue 16 acceptance): no
sandbox escapes supervision, no secret is lost, the daemon recovers.

One warrend with a running sandbox holding a secret, and after each kill:
the sandbox still runs, under the same processes, and execs; a new create
opens the secret; identity tokens are still signed; at the end terminating
the sandbox leaves none of its processes behind. warrend runs with
--privsep, so warren-priv is among the victims, and last warren-fetch,
warren-priv's child, killed mid-pull from a registry of the test's own:
the pull fails cleanly and the next one works. (warren-egress killed
mid-transfer: tests/e2e/test_egress_policy.py, with the fake internet;
more of warren-fetch: tests/e2e/test_fetch.py.)

WARREN_DROP=1 (--user): a dropped warrend whose warren-priv is killed
exits (status 3) and the next one, started as root, recovers."""
import os
import re
import signal
import time

import pytest

import grpc

import warren as wr
from conftest import DROP, free_port, import_image
from test_fetch import Hostile, Image, fetchers, layer, sha, stalled_pull
from test_fetch import pull as registry_pull
from test_lifecycle import Restartable, sandbox_pids

IMAGE = "busybox:latest"
SECRET = "kill-each-7f3a"


def newest_pid(log, pattern):
    pids = re.findall(pattern, log)
    return int(pids[-1]) if pids else None


# name -> (log pattern of its pid, log line its death leaves)
VICTIMS = {
    "secrets signer": (r"warren-signer: ready \(pid (\d+)\), keeping the secrets key",
                       "secrets key, pid %d) exited"),
    "identity signer": (r"warren-signer: ready \(pid (\d+)\), keeping the identity key",
                        "identity key, pid %d) exited"),
    # with --privsep: the sandbox's signals, freezes and teardown go through it
    "warren-priv": (r"warren-priv started \(pid (\d+)", "warren-priv (pid %d) exited"),
}


def wait_log(life, text, timeout=15):
    deadline = time.monotonic() + timeout
    while text not in life.read_log():
        assert time.monotonic() < deadline, "no %r in the log:\n%s" % (text, life.read_log()[-4000:])
        time.sleep(0.05)


def check_all(c, sb, pids):
    # the sandbox still runs, its processes still in its cgroup, and execs
    h = c.get(id=sb.id)
    assert h.status == wr.SandboxStatus.RUNNING, h.status
    assert set(pids) <= set(sandbox_pids([sb.id])), (pids, sandbox_pids([sb.id]))
    r = h.exec("sh", "-c", 'printf "%s" "$KILL_EACH"')
    assert r.exit_code == 0 and r.stdout_text == SECRET, (r.exit_code, r.stderr_text)
    # a new create opens the secret
    n = c.create(image=IMAGE, secrets=[wr.Secret.from_name("KILL_EACH")])
    try:
        r = n.exec("sh", "-c", 'printf "%s" "$KILL_EACH"')
        assert r.stdout_text == SECRET
    finally:
        n.terminate()
    # identity tokens are still signed
    assert c.get_workload_identity_token("sts.example.com").count(".") == 2


def kill_fetch_mid_pull(life, c, sb, pids):
    """kill -9 of warren-fetch mid-pull: the pull fails cleanly (nothing
    stored), warrend and the sandbox carry on, the next pull works."""
    hostile = Hostile()
    try:
        call, pid, img, ref, msgs = stalled_pull(life, hostile)
        assert "warren-priv: started warren-fetch (pid %d)" % pid in life.read_log()
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while not any(isinstance(m, grpc.RpcError) for m in msgs):
            assert time.monotonic() < deadline, (msgs, life.read_log()[-3000:])
            time.sleep(0.05)
        err = [m for m in msgs if isinstance(m, grpc.RpcError)][0]
        assert err.code() == grpc.StatusCode.UNAVAILABLE, err.details()
        assert "nothing was stored" in err.details(), err.details()
        assert pid not in fetchers(life)
        check_all(c, sb, pids)
        hostile.stall.clear()
        hostile.release.set()
        assert list(registry_pull(life, ref).layers) == [sha(img.layers[0])]
    finally:
        hostile.stop()


def test_kill_each_process_in_turn():
    life = Restartable()
    port = free_port()
    extra = ["--admin-listen", "127.0.0.1:%d" % port, "--privsep"]
    sb, pids = None, []
    try:
        life.start(extra=extra)
        import_image(life, IMAGE)
        with wr.SandboxClient(life.unix_addr) as c:
            c.set_secret("KILL_EACH", SECRET)
            sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"],
                          secrets=[wr.Secret.from_name("KILL_EACH")])
            deadline = time.monotonic() + 10  # the sleep may not be started yet
            while len(sandbox_pids([sb.id])) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            pids = sandbox_pids([sb.id])
            assert len(pids) >= 2, pids  # warren-init and the sleep
            check_all(c, sb, pids)
            for name, (pattern, died) in VICTIMS.items():
                pid = newest_pid(life.read_log(), pattern)
                assert pid, "%s: no pid in the log" % name
                os.kill(pid, signal.SIGKILL)
                wait_log(life, died % pid)
                if DROP and name == "warren-priv":
                    # a dropped warrend cannot start another: it exits 3
                    # and the next one (root, then dropped) recovers
                    assert life.proc.wait(timeout=30) == 3, life.read_log()[-3000:]
                    life.start(extra=extra)  # the client's channel reconnects
                check_all(c, sb, pids)
                assert newest_pid(life.read_log(), pattern) != pid, name
            kill_fetch_mid_pull(life, c, sb, pids)
        # the API daemon itself
        life.kill9()
        life.start(extra=extra)
        with wr.SandboxClient(life.unix_addr) as c:
            check_all(c, sb, pids)
            c.get(id=sb.id).terminate()
            sb = None
        # none of its processes outlives it
        deadline = time.monotonic() + 10
        while any(os.path.exists("/proc/%d" % p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in pids if os.path.exists("/proc/%d" % p)]
    finally:
        if sb is not None:
            try:
                with wr.SandboxClient(life.unix_addr) as c:
                    c.get(id=sb.id).terminate()
            except Exception:
                pass
        life.stop()
        life.destroy()
