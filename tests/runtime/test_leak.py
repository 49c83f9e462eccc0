"""200 create/spawn/destroy cycles in one process leave nothing behind: no
fd in that process, no mount, no cgroup dir, no process, no state dir."""
import json
import os
import subprocess

from conftest import SANITIZED, host_state

CYCLES = 50 if SANITIZED else 200


def test_create_destroy_cycles_leak_nothing(sandbox, workdir):
    report = workdir / "leak.json"
    before = host_state()
    r = sandbox.run(["/bin/true"], opts=["--repeat", str(CYCLES), "--report", str(report)],
                    timeout=600)
    assert r.returncode == 0, r.stderr
    rep = json.loads(report.read_text())
    assert rep["n"] == CYCLES
    # + 1: the sealed init memfd the library caches for the process
    assert rep["fds_after"] == rep["fds_before"] + 1
    assert rep["mounts_after"] == rep["mounts_before"]
    assert rep["cgroups_after"] == rep["cgroups_before"]
    assert host_state() == before
    t = rep["create_to_first_exec_ms"]
    print(f"\ncreate->first exec over {CYCLES}: p50 {t['p50']:.2f} ms, p99 {t['p99']:.2f} ms; "
          f"create p50 {rep['create_ms']['p50']:.2f} ms; "
          f"destroy p50 {rep['destroy_ms']['p50']:.2f} ms")


def test_failed_creates_leak_nothing(sandbox, workdir):
    """A create that fails in the child (here: /etc is a file) undoes
    everything, 20 times over."""
    bad = workdir / "etc-file-leak"
    bad.mkdir()
    (bad / "etc").write_text("x")
    before = host_state()
    for _ in range(20):
        r = sandbox.run(["/bin/true"], layers=[bad])
        assert r.returncode == 125
    assert host_state() == before


def test_processes_left_running_are_killed(sandbox):
    """Daemonised processes (double fork, new session) die with the sandbox."""
    before = host_state()
    r = sandbox.sh("setsid sh -c 'sleep 100 & sleep 100 &' ; "
                   "(trap '' TERM HUP; sleep 100) & echo started")
    assert r.stdout == b"started\n"
    assert host_state() == before


def test_usage_counters(sandbox, workdir):
    report = workdir / "usage.json"
    r = sandbox.sh("i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done; sleep 2 & "
                   "x=$(head -c 20000000 /dev/zero | tr '\\0' a)",
                   opts=["--report", str(report)])
    assert r.returncode == 0, r.stderr
    u = json.loads(report.read_text())["usage"]
    assert u["cpu_seconds"] > 0.01
    assert u["pids"] == 2  # init and the background sleep
    assert u["memory_bytes"] > 0
    if u["memory_peak_bytes"]:
        assert u["memory_peak_bytes"] > 20_000_000


def test_sandbox_outlives_its_creator_and_is_cleaned_up_by_id(sandbox, workdir, tool):
    """--keep: the creating process exits, the sandbox keeps running (as
    after a daemon restart); `destroy --id` (rt_sandbox_cleanup) removes it."""
    state = workdir / "kept"
    before = host_state()
    r = sandbox.run(["/bin/true"], opts=["--keep", "--id", "wrs-kept-1", "--state", str(state)])
    try:
        check_kept(sandbox, tool, r, state, before)
    finally:
        subprocess.run([tool, "destroy", "--id", "wrs-kept-1", "--state", str(state)])


def check_kept(sandbox, tool, r, state, before):
    import subprocess
    assert r.returncode == 0, r.stderr
    pid, path = r.stdout.decode().split()
    assert path == str(state)
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        assert f.read() == b"warren-init\0"
    assert (state / "ctl.sock").exists() and (state / "upper").is_dir()
    mid = host_state()
    assert int(pid) in mid["procs"]
    # the same id cannot be created twice
    r2 = sandbox.run(["/bin/true"], opts=["--id", "wrs-kept-1"])
    assert r2.returncode == 125 and b"File exists" in r2.stderr, r2.stderr
    d = subprocess.run([tool, "destroy", "--id", "wrs-kept-1", "--state", str(state)],
                       capture_output=True)
    assert d.returncode == 0, d.stderr
    assert not state.exists()
    # init was re-parented away from us; wait for whoever reaps it
    for _ in range(100):
        if not os.path.exists(f"/proc/{pid}") or \
                open(f"/proc/{pid}/stat").read().split()[2] == "Z":
            break
        __import__("time").sleep(0.02)
    assert host_state() == before
    # idempotent
    d = subprocess.run([tool, "destroy", "--id", "wrs-kept-1", "--state", str(state)],
                       capture_output=True)
    assert d.returncode == 0, d.stderr


def test_any_tree_the_sandbox_builds_is_removed(sandbox):
    """A directory chain far deeper than any recursion limit (the old
    remover stopped at 256 levels and left the upper dir behind), a wide
    directory, a mode-000 directory and symlinks out: teardown removes
    all of it and follows none of the links."""
    outside = "/tmp/warren-leak-canary"
    with open(outside, "w") as f:
        f.write("keep")
    try:
        before = host_state()
        r = sandbox.sh("i=0; while [ $i -lt 1500 ]; do mkdir d && cd d || exit 9; i=$((i+1)); "
                       "done; touch leaf; ln -s /tmp/warren-leak-canary out; cd /; "
                       "mkdir /wide && cd /wide && i=0; while [ $i -lt 2000 ]; do "
                       "mkdir w$i; i=$((i+1)); done; mkdir -p /locked/inner && "
                       "touch /locked/inner/f && chmod 000 /locked/inner /locked; "
                       "ln -s / /root-link; echo built", timeout=300)
        assert r.stdout == b"built\n", r.stderr
        assert host_state() == before
        with open(outside) as f:
            assert f.read() == "keep"
    finally:
        os.unlink(outside)


def test_devpts_has_its_own_bound_and_rlimits(sandbox):
    r = sandbox.sh("grep ' /dev/pts ' /proc/self/mountinfo; "
                   "grep -E 'Max (pending signals|msgqueue size)' /proc/self/limits")
    out = r.stdout.decode()
    assert "max=256" in out, out
    sig = [l for l in out.splitlines() if l.startswith("Max pending signals")][0].split()
    assert sig[3] == sig[4] == "4096", sig
    mq = [l for l in out.splitlines() if l.startswith("Max msgqueue size")][0].split()
    assert mq[3] == mq[4] == str(256 * 1024), mq
