"""User namespaces (issue 16 item 5): what the sandbox and the host see of
the mapping. The rest of this suite runs in user namespaces too (conftest
USERNS); these tests look at the mapping itself."""
import os
import pathlib
import signal
import subprocess
import time

import pytest

from conftest import USERNS, tree_digest

pytestmark = pytest.mark.skipif(not USERNS, reason="WARREN_TEST_USERNS=0")


def test_root_inside_is_mapped_to_the_range(sandbox):
    r = sandbox.sh("id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["0", "0", "0", str(USERNS), "65536",
                                         "0", str(USERNS), "65536"]


def test_without_userns_root_is_host_root(sandbox):
    r = sandbox.sh("cat /proc/self/uid_map", opts=["--userns", "0"])
    assert r.stdout.decode().split() == ["0", "0", "4294967295"]


def wait_for(path, timeout=20):
    end = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < end, f"{path} did not appear"
        time.sleep(0.05)


def test_host_sees_the_range_on_processes_and_files(tool, rootfs, workdir):
    state = pathlib.Path(workdir) / "userns-state"
    sid = f"wrs-{os.getpid()}-userns"
    script = ("echo hi > /made; mkdir /d; echo x > /d/f; chown 1000:2000 /d/f; "
              "echo y >> /etc/hostname; touch /ready; exec sleep 60")
    p = subprocess.Popen([tool, "run", "--rootfs", str(rootfs), "--userns", str(USERNS),
                          "--state", str(state), "--id", sid, "--", "/bin/sh", "-c", script])
    try:
        wait_for(state / "upper/ready")
        upper = state / "upper"
        st = os.lstat(upper / "made")
        assert (st.st_uid, st.st_gid) == (USERNS, USERNS)
        st = os.lstat(upper / "d")
        assert (st.st_uid, st.st_gid) == (USERNS, USERNS)
        st = os.lstat(upper / "d/f")
        assert (st.st_uid, st.st_gid) == (USERNS + 1000, USERNS + 2000)
        # a copied-up file of the image and the runtime's own /etc files
        st = os.lstat(upper / "etc/hostname")
        assert (st.st_uid, st.st_gid) == (USERNS, USERNS)
        st = os.lstat(upper)
        assert (st.st_uid, st.st_gid) == (USERNS, USERNS)
        # every process of the sandbox runs as the range's first uid
        procs = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cg = pathlib.Path(f"/proc/{pid}/cgroup").read_text()
                status = pathlib.Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if f"/warren/{sid}" in cg:
                uids = next(line for line in status.splitlines() if line.startswith("Uid:"))
                procs.append(uids.split()[1:])
        assert procs and all(u == [str(USERNS)] * 4 for u in procs), procs
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    assert not state.exists()


def test_image_layers_stay_unchanged(sandbox, rootfs):
    before = tree_digest(rootfs)
    r = sandbox.sh("chown 1234:1234 /bin/busybox /etc; chmod 700 /etc; echo x >> /etc/passwd; "
                   "rm /bin/ls; ls -ln /bin/busybox | cut -c1-30")
    assert r.returncode == 0, r.stderr
    assert tree_digest(rootfs) == before


def test_image_files_keep_their_ids_inside(sandbox, rootfs, tmp_path):
    layer = tmp_path / "layer"
    (layer / "home").mkdir(parents=True)
    (layer / "home/f").write_text("x")
    os.chown(layer / "home/f", 1000, 1001)
    os.chown(layer / "home", 70000, 70000)  # outside the 65536 ids: the overflow id
    r = sandbox.sh("stat -c '%u:%g' /home/f /home", layers=[layer])
    assert r.stdout.decode().split() == ["1000:1001", "65534:65534"], r.stderr


def test_the_sandbox_cannot_change_its_mapping(sandbox):
    r = sandbox.sh("echo '0 0 1' > /proc/self/uid_map || echo uid-refused; "
                   "echo '0 0 1' > /proc/self/gid_map || echo gid-refused; "
                   "echo deny > /proc/self/setgroups || echo setgroups-refused; "
                   "cat /proc/self/uid_map")
    out = r.stdout.decode().split()
    assert out[:3] == ["uid-refused", "gid-refused", "setgroups-refused"], r.stderr
    assert out[3:] == ["0", str(USERNS), "65536"]


def test_low_ports_and_users(sandbox):
    # binding below 1024 still works (the network namespace is the host
    # user namespace's; the runtime opens low ports), and users by uid
    r = sandbox.sh("nc -l -p 80 & sleep 0.2; kill $! && echo bound; "
                   "su -s /bin/sh nobody -c 'id -u' 2>&1 || "
                   "setuidgid 65534 id -u 2>&1 || true")
    assert r.stdout.decode().split()[0] == "bound", r.stderr
