"""Privilege separation, phase 5, volume files (docs/privsep.md "Phase 5,
volume files, as built"): under --privsep (with and without --user warren)
the volume files API goes through warren-priv (VOLFILE_OPEN, VOLFILE_OP,
VOLFILE_LIST, counted by it): warrend writes a put into the temp file's fd
it is handed and reads a get from the file's fd, holds no fd of the
volume's data/ or .staging/, and a dropped warrend serves files that
belong to root or to a sandbox's ids (0600) and lists and stats them; the
statuses of the in-process path are kept; symlinks a sandbox plants are
resolved inside the volume; a sandbox of the dropped warrend mounts the
volume (the mount mirrored into warrend's own mount namespace)."""
import os
import stat

import pytest

import warren as wr
from conftest import free_port, import_image
from test_privsep import metrics
from test_privsep_drop import USER, user  # noqa: F401 (fixture)
from test_volumes import status_of
from warren import Status
from warren._files import FileKind

OPEN, OP, LIST = ('warren_priv_requests_total{type="%s"}' % t
                  for t in ("VOLFILE_OPEN", "VOLFILE_OP", "VOLFILE_LIST"))


def served(port):
    m = metrics(port)
    return [int(m.get(k, 0)) for k in (OPEN, OP, LIST)]


def volume_fds(pid, state_dir):
    """warrend's fds naming something inside a volume (but its mount's root)."""
    out = []
    for f in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, f))
        except OSError:
            continue
        if link.startswith(os.path.join(state_dir, "volumes")) and not link.endswith("/mnt"):
            out.append(link)
    return out


@pytest.mark.parametrize("drop", [False, True], ids=["privsep", "dropped"])
def test_volume_files_through_warren_priv(fresh_warrend, user, drop):  # noqa: F811
    port = free_port()
    args = ["--privsep", "--admin-listen", "127.0.0.1:%d" % port]
    if drop:
        args += ["--user", USER]
    d = fresh_warrend(extra_args=args)
    with wr.SandboxClient(d.unix_addr) as c:
        v = wr.Volume("vf", c, max_bytes=32 << 20)
        v.create()
        before = served(port)
        info = v.put_file("a/b/c.txt", b"hello\n", mode=0o640)
        assert info.size_bytes == 6 and info.mode == 0o640
        assert served(port) == [before[0] + 1, before[1] + 1, before[2]]  # PUT, COMMIT
        host = os.path.join(d.state_dir, "volumes", "default", "vf", "mnt", "data")
        st = os.stat(os.path.join(host, "a", "b", "c.txt"))
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o640)  # made by warren-priv
        assert stat.S_IMODE(os.stat(os.path.join(host, "a")).st_mode) == 0o755
        assert not os.listdir(os.path.join(host, "..", ".staging"))
        assert v.get_file("a/b/c.txt") == b"hello\n"
        assert v.get_file("a/b/c.txt", offset=1, length=3) == b"ell"
        assert v.stat("a/b").kind == FileKind.DIRECTORY
        assert [f.path for f in v.list_files("")] == ["a/b/c.txt"]
        n = served(port)
        assert n[0] >= before[0] + 3 and n[2] >= before[2] + 1
        # the statuses and messages of the in-process path
        assert status_of(lambda: v.get_file("a/nope")) == Status.NOT_FOUND
        assert status_of(lambda: v.get_file("a/b")) == Status.FAILED_PRECONDITION
        assert status_of(lambda: v.put_file("a/b", b"x")) == Status.FAILED_PRECONDITION
        assert status_of(lambda: v.put_file("a/b/c.txt/d", b"x")) == Status.FAILED_PRECONDITION
        assert status_of(lambda: v.remove_file("a")) == Status.FAILED_PRECONDITION
        n = served(port)
        assert status_of(lambda: v.get_file("../etc/passwd")) == Status.INVALID_ARGUMENT
        assert served(port) == n  # refused by warrend before any request
        assert not os.listdir(os.path.join(host, "..", ".staging"))
        # a large put through the temp file's fd, replaced atomically
        big = os.urandom(3 << 20)
        v.put_file("a/b/c.txt", big)
        assert v.get_file("a/b/c.txt") == big
        assert volume_fds(d.proc.pid, d.state_dir) == []
        v.remove_file("a/b/c.txt")
        assert status_of(lambda: v.stat("a/b/c.txt")) == Status.NOT_FOUND
        v.delete()
    assert not os.path.exists(os.path.join(d.state_dir, "volumes", "default", "vf"))


def test_dropped_serves_a_sandboxes_files(fresh_warrend, user, tmp_path):  # noqa: F811
    """A sandbox of the dropped warrend writes a 0600 file as its uid 1000
    and plants symlinks out of the volume; the dropped warrend reads,
    stats and lists the file through warren-priv, and the symlinks resolve
    inside the volume (nothing of the host read)."""
    port = free_port()
    d = fresh_warrend(extra_args=["--privsep", "--user", USER,
                                  "--admin-listen", "127.0.0.1:%d" % port])
    import_image(d, "busybox:latest")
    secret = tmp_path / "host-secret"
    secret.write_text("host\n")
    with wr.SandboxClient(d.unix_addr) as c:
        v = wr.Volume("sbvf", c, max_bytes=32 << 20)
        v.put_file("in/from-api", b"api\n")
        sb = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"],
                      volumes=[(v.name, "/data")])
        try:
            r = sb.exec("sh", "-c", "cat /data/in/from-api && mkdir -p /data/u && "
                        "echo mine > /data/u/secret && chown -R 1000:1000 /data/u && "
                        "chmod 700 /data/u && chmod 600 /data/u/secret && "
                        "ln -s / /data/root && ln -s %s /data/abs && "
                        "ln -s ../../../../../../../.. /data/up && sync" % secret,
                        timeout_secs=30)
            assert r.exit_code == 0, r.stderr_text
            assert r.stdout_text == "api\n"
        finally:
            sb.terminate()
        host = os.path.join(d.state_dir, "volumes", "default", "sbvf", "mnt", "data")
        st = os.stat(os.path.join(host, "u", "secret"))
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (1000, 0o600)
        assert v.get_file("u/secret") == b"mine\n"
        assert v.stat("u/secret").mode == 0o600
        assert [f.path for f in v.list_files("u")] == ["u/secret"]
        for p in ("abs", "root" + str(secret), "up" + str(secret)):
            assert status_of(lambda: v.get_file(p)) == Status.NOT_FOUND, p
        v.remove_file("u/secret")
        v.delete()
