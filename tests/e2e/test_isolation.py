"""The isolation baseline as seen through warrend (the runtime's own, more
detailed suite is tests/runtime/test_isolation.py): warren-probe runs in a
sandbox created over gRPC and reports what it can do."""
import json
import os

import pytest

import warren as wr


@pytest.fixture(scope="module")
def report(sandbox_daemon):
    with wr.SandboxClient(sandbox_daemon.unix_addr) as c:
        sb = c.create(image="probe:latest", name="probe-e2e")
        try:
            r = sb.exec("/usr/bin/warren-probe")
            assert r.exit_code == 0, r.stderr_text
            return json.loads(r.stdout_text)
        finally:
            sb.terminate()


def test_no_daemon_fd_leaks_into_the_sandbox(report):
    fds = {f["fd"]: f["target"] for f in report["fds"]}
    # stdin/stdout/stderr pipes from the exec, and nothing else: no socket,
    # database, log or layer-store fd of warrend.
    assert set(fds) == {0, 1, 2}, fds
    assert all(t.startswith("pipe:") for t in fds.values()), fds


def test_privileges_reduced(report):
    assert report["uid"] == 0
    assert report["no_new_privs"] == 1 and report["seccomp"] == 2
    assert report["caps"]["CapEff"] == report["caps"]["CapBnd"] == "00000000000005fb"
    assert report["caps"]["CapAmb"] == report["caps"]["CapInh"] == "0000000000000000"


def test_no_host_processes_visible(report):
    assert report["pids"] == [1, report["pid"]]
    assert report["hostname"] == "probe-e2e"


def test_escapes_fail(report):
    for name in ("mount_tmpfs", "unshare_newns", "unshare_newuser", "setns_net", "pivot_root",
                 "keyctl", "bpf", "ptrace_attach_pid1", "socket_raw", "mknod_char"):
        assert report["syscalls"][name]["ok"] is False, name


def test_namespaces_differ_from_the_host(report):
    for ns in ("mnt", "pid", "uts", "ipc", "net", "cgroup"):
        assert report["namespaces"][ns] != os.readlink("/proc/self/ns/" + ns), ns
