"""The mount table (struct rt_mount): each kind inside a real sandbox, read-only
enforced, hostile image symlinks never followed out of the root, bad entries
refused before anything is made, the warm pool's two steps giving the same
sandbox as a plain create, and nothing left behind."""
import hashlib
import json
import os
import pathlib
import socket

import pytest

from conftest import SANITIZED, USERNS, host_state

# in a user namespace bind sources are idmapped (their files keep their ids)
IDMAPPED = ",idmapped" if USERNS else ""

PRESTART = ["same", "bare", "extra", "nolayers"]


@pytest.fixture
def vol(tmp_path):
    d = tmp_path / "vol"
    d.mkdir()
    (d / "f").write_text("hostdata\n")
    return d


def run_ok(sandbox, script, opts, layers=()):
    r = sandbox.sh(script, opts=opts, layers=layers)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


@pytest.mark.parametrize("mode", [None] + PRESTART)
def test_bind_dir_read_write_and_read_only(sandbox, vol, mode):
    before = host_state()
    opts = ["--bind", f"{vol}:/data", "--bind", f"{vol}:/srv/ro/data:ro"]
    if mode:
        opts += ["--prestart", mode]
    out = run_ok(sandbox, "cat /data/f /srv/ro/data/f; echo new > /data/new && echo rw-ok; "
                 "echo x > /srv/ro/data/x 2>/dev/null || echo ro-refused; "
                 "rm /srv/ro/data/f 2>/dev/null || echo ro-kept; "
                 "grep -E ' /(data|srv/ro/data) ' /proc/self/mountinfo | cut -d' ' -f5,6 | sort",
                 opts)
    assert out.splitlines() == ["hostdata", "hostdata", "rw-ok", "ro-refused", "ro-kept",
                                "/data rw,nosuid,nodev,relatime" + IDMAPPED,
                                "/srv/ro/data ro,nosuid,nodev,relatime" + IDMAPPED]
    assert (vol / "new").read_text() == "new\n"  # the write reached the host dir
    assert sorted(os.listdir(vol)) == ["f", "new"]
    assert host_state() == before


def test_bind_by_fd_file_and_socket(sandbox, vol, tmp_path):
    sock_path = tmp_path / "agent.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(sock_path))
    srv.listen(1)
    try:
        out = run_ok(sandbox, "cat /dir/f /one-file; stat -c %F /one-file /run/agent.sock; "
                     "echo x >> /one-file 2>/dev/null || echo file-ro",
                     ["--bind-fd", f"{vol}:/dir", "--bind", f"{vol / 'f'}:/one-file:ro",
                      "--bind", f"{sock_path}:/run/agent.sock"])
    finally:
        srv.close()
    assert out.splitlines() == ["hostdata", "hostdata", "regular file", "socket", "file-ro"]
    assert (vol / "f").read_text() == "hostdata\n"


def test_tmpfs_entry_is_sized(sandbox):
    out = run_ok(sandbox, "df -k /scratch | tail -1 | awk '{print $2}'; "
                 "dd if=/dev/zero of=/scratch/big bs=1M count=4 2>/dev/null || echo full; "
                 "stat -f -c %T /scratch",
                 ["--tmpfs", "/scratch:2Mi"])
    assert out.splitlines() == ["2048", "full", "tmpfs"]


@pytest.mark.parametrize("mode", [None, "bare"])
def test_file_entries_content_mode_and_read_only(sandbox, mode):
    opts = ["--file", "/etc/app/secret:s3cr:et", "--ro-file", "/etc/ca.pem:CA-BUNDLE",
            "--copy", "/etc/motd:hello"]
    if mode:
        opts += ["--prestart", mode]
    out = run_ok(sandbox, "cat /etc/app/secret; echo; cat /etc/ca.pem; echo; cat /etc/motd; "
                 "echo; stat -f -c %T /etc/app/secret /etc/ca.pem; "
                 "grep -c ' /etc/motd ' /proc/self/mountinfo; "
                 "stat -c %a /etc/app/secret /etc/motd; "
                 "echo y > /etc/ca.pem 2>/dev/null || echo ca-ro; "
                 "echo changed > /etc/app/secret && cat /etc/app/secret; "
                 "echo changed > /etc/motd && rm /etc/motd && echo copy-is-the-sandboxs",
                 opts)
    assert out.splitlines() == ["s3cr:et", "CA-BUNDLE", "hello",
                                # files never on the host disk; a copy is no mount
                                "tmpfs", "tmpfs", "0",
                                "644", "644",
                                "ca-ro", "changed", "copy-is-the-sandboxs"]


def make_hostile_mount_layer(path, host_dir):
    path.mkdir()
    (path / "etc").mkdir()
    # absolute and relative escapes, a leaf symlink to a host secret, a
    # dangling parent, a parent into /proc
    os.symlink(str(host_dir), path / "abs")
    os.symlink("../../../../../../../../" + str(host_dir), path / "rel")
    os.symlink("/etc/shadow", path / "leaf")
    os.symlink("/etc/passwd", path / "etc/motd")
    os.symlink("/nonexistent/dir", path / "dangling")
    os.symlink("/proc/sys", path / "intoproc")
    return path


@pytest.mark.parametrize("mode", [None, "bare", "extra"])
def test_hostile_targets_stay_in_the_root(sandbox, workdir, vol, tmp_path, mode):
    host_dir = tmp_path / "host-target"
    host_dir.mkdir()
    evil = make_hostile_mount_layer(workdir / f"evil-mounts-{mode}", host_dir)
    pool = ["--prestart", mode] if mode else []
    host_files = {p: pathlib.Path(p).read_bytes()
                  for p in ("/etc/passwd", "/etc/shadow") if os.path.exists(p)}
    before = host_state()
    out = run_ok(sandbox,
                 "cat /abs/sub/f; cat /rel/t/x; echo; cat /leaf; echo; cat /etc/motd; echo; "
                 "ls /dangling; stat -c %F /leaf /etc/motd; grep -c root /etc/passwd",
                 ["--bind", f"{vol}:/abs/sub", "--ro-file", "/rel/t/x:inside",
                  "--file", "/leaf:not-shadow", "--copy", "/etc/motd:not-passwd",
                  "--tmpfs", "/dangling/tmp:1Mi"] + pool, layers=[evil])
    assert out.splitlines() == ["hostdata", "inside", "not-shadow", "not-passwd", "tmp",
                                "regular file", "regular file", "1"]
    # nothing landed outside the root
    assert os.listdir(host_dir) == []
    for p, data in host_files.items():
        assert pathlib.Path(p).read_bytes() == data, p
    assert sorted(os.listdir(vol)) == ["f"]
    # a parent that resolves into /proc is refused, and nothing is left
    r = sandbox.run(["/bin/true"], opts=["--tmpfs", "/intoproc/x:1Mi"] + pool, layers=[evil])
    assert r.returncode == 125
    assert "mount /intoproc/x: /intoproc resolves into /proc, /dev or /sys" in r.stderr.decode()
    assert host_state() == before


@pytest.mark.parametrize("opts,msg", [
    (["--tmpfs", "data"], "mount 0 (data): target must be an absolute path"),
    (["--tmpfs", "/a/../b"], "mount 0 (/a/../b): target must be an absolute path"),
    (["--tmpfs", "/"], "mount 0 (/): target must be an absolute path"),
    (["--file", "/ok:x", "--tmpfs", "/proc/x"], "mount 1 (/proc/x): target is under /proc"),
    (["--tmpfs", "/dev"], "mount 0 (/dev): target is under /dev"),
    (["--copy", "/sys/kernel/x:y"], "mount 0 (/sys/kernel/x): target is under /sys"),
    (["--mount-kind", "9:/x"], "mount 0 (/x): unknown kind 9"),
    (["--tmpfs", "/x:0"], "bad --tmpfs size"),
    (["--bind", "relative:/x"], "mount 0 (/x): bind source must be an absolute host path"),
    (["--bind", "/nonexistent-src:/x"], "mount 0 (/x): bind source /nonexistent-src: No such"),
    (["--bind", "/dev/null:/x"], "mount 0 (/x): bind source is not a directory, regular file"),
])
def test_bad_entries_refused_before_anything_is_made(sandbox, opts, msg):
    before = host_state()
    for mode in (None, "same"):
        r = sandbox.run(["/bin/true"], opts=opts + (["--prestart", mode] if mode else []))
        assert r.returncode == 125
        assert msg in r.stderr.decode(), r.stderr
    assert host_state() == before


def test_binary_content_and_size_limits(sandbox, tmp_path):
    blob = bytes(range(256)) * 1024  # 256 KiB with NUL bytes: the limit
    (tmp_path / "blob").write_bytes(blob)
    (tmp_path / "big").write_bytes(b"x" * (256 * 1024 + 1))
    out = run_ok(sandbox, "md5sum /etc/blob /etc/blob.copy | cut -d' ' -f1",
                 ["--ro-file", f"/etc/blob:@{tmp_path / 'blob'}",
                  "--copy", f"/etc/blob.copy:@{tmp_path / 'blob'}"])
    assert out.split() == [hashlib.md5(blob).hexdigest()] * 2
    before = host_state()
    r = sandbox.run(["/bin/true"], opts=["--tmpfs", "/x:1Mi",
                                         "--file", f"/etc/big:@{tmp_path / 'big'}"])
    assert r.returncode == 125
    assert ("mount 1 (/etc/big): file content too large (262145 > 262144 bytes)"
            in r.stderr.decode()), r.stderr
    # three at the entry limit exceed the whole table's 512 KiB
    opts = []
    for i in range(3):
        opts += ["--file", f"/etc/blob{i}:@{tmp_path / 'blob'}"]
    r = sandbox.run(["/bin/true"], opts=opts)
    assert r.returncode == 125
    assert "mount table: file contents too large" in r.stderr.decode()
    assert host_state() == before


def test_too_many_entries_refused(sandbox):
    opts = []
    for i in range(65):
        opts += ["--copy", f"/etc/f{i}:x"]
    r = sandbox.run(["/bin/true"], opts=opts)
    assert r.returncode == 125
    assert "too many mounts (65 > 64)" in r.stderr.decode()


SCRIPT = ("for f in /data/f /etc/secret /etc/motd /etc/hostname; do cat $f; echo; done; "
          "cat /etc/hosts; hostname; ls -d /prestart-only 2>/dev/null; "
          "df -k /tmp /scratch | tail -2 | awk '{print $2, $6}'; ls /etc/app; "
          # a claim mounts a /tmp of another size on top of the prestart's:
          # the same view, one more line in mountinfo
          "cut -d' ' -f5,6,9 /proc/self/mountinfo | grep -v '^/ ' | sort -u")


@pytest.mark.parametrize("mode", PRESTART)
def test_prestart_gives_what_a_plain_create_gives(sandbox, vol, mode):
    opts = ["--hostname", "pooled", "--tmp", "8Mi", "--bind", f"{vol}:/data:ro",
            "--tmpfs", "/scratch:3Mi", "--file", "/etc/secret:abc", "--copy", "/etc/motd:hi",
            "--tmpfs", "/etc/app:1Mi"]
    plain = run_ok(sandbox, SCRIPT, opts)
    pooled = run_ok(sandbox, SCRIPT, opts + ["--prestart", mode])
    assert pooled == plain
    lines = plain.splitlines()
    assert lines[:4] == ["hostdata", "", "abc", "hi"]
    assert "127.0.1.1\tpooled" in lines
    assert "8192 /tmp" in lines and "3072 /scratch" in lines


def test_prestart_with_other_layers_rebuilds_with_the_same_table(sandbox, vol, probe_layer):
    """The claim names more layers than the prestart: a new root, and the
    prestart's identical mounts moved into it."""
    opts = ["--hostname", "h", "--bind", f"{vol}:/data", "--file", "/etc/secret:abc"]
    plain = run_ok(sandbox, SCRIPT + "; ls /bin/warren-probe", opts, layers=[probe_layer])
    # --prestart same with a layer: same table, same layers -> reused;
    # nolayers/extra rebuild; all equal to the plain create
    for mode in ("same", "extra", "nolayers"):
        out = run_ok(sandbox, SCRIPT + "; ls /bin/warren-probe", opts + ["--prestart", mode],
                     layers=[probe_layer])
        assert out == plain, mode


@pytest.mark.parametrize("mode", [None, "same", "bare"])
def test_mount_cycles_leave_nothing(sandbox, vol, workdir, mode):
    n = 10 if SANITIZED else 30
    report = workdir / f"mount-leak-{mode}.json"
    before = host_state()
    opts = ["--repeat", str(n), "--report", str(report), "--bind", f"{vol}:/data",
            "--bind-fd", f"{vol}:/data2:ro", "--tmpfs", "/scratch:1Mi",
            "--file", "/etc/secret:abc", "--ro-file", "/etc/ca:x", "--copy", "/etc/motd:hi"]
    if mode:
        opts += ["--prestart", mode]
    r = sandbox.run(["/bin/cat", "/data/f"], opts=opts, timeout=600)
    assert r.returncode == 0, r.stderr
    rep = json.loads(report.read_text())
    assert rep["n"] == n
    # + 1: the cached init memfd (the --bind-fd source is open before and after)
    assert rep["fds_after"] == rep["fds_before"] + 1
    assert rep["cgroups_after"] == rep["cgroups_before"]
    # host_state() counts the host's mounts of wr-sandbox dirs; and none of
    # the bind source (the raw mountinfo count of the tool moves with
    # other suites' mounts on this shared machine)
    assert host_state() == before
    with open("/proc/self/mountinfo") as f:
        assert str(vol) not in f.read()
    assert sorted(os.listdir(vol)) == ["f"]


@pytest.mark.parametrize("mode,stacked", [
    ("same", []),          # every entry identical: none redone at the claim
    ("bare", ["/tmp"]),    # the prestart's /tmp was of another size: one on top
    ("extra", []),         # rebuilt root: each entry once (the prestart's moved in)
])
def test_claim_redoes_only_what_differs(sandbox, vol, mode, stacked):
    opts = ["--tmp", "8Mi", "--bind", f"{vol}:/data", "--tmpfs", "/scratch:1Mi",
            "--file", "/etc/secret:abc", "--prestart", mode]
    out = run_ok(sandbox, "cut -d' ' -f5 /proc/self/mountinfo | sort | uniq -c", opts)
    counts = {line.split()[1]: int(line.split()[0]) for line in out.splitlines()}
    for target in ("/tmp", "/run", "/data", "/scratch", "/etc/secret", "/proc", "/dev", "/sys"):
        assert counts[target] == (2 if target in stacked else 1), (target, counts)
