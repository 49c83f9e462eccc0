"""200 create/spawn/destroy cycles in one process leave nothing behind: no
fd in that process, no mount, no cgroup dir, no process, no state dir."""
import json
import os

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
