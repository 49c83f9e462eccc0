"""The change journal through warren-upper (issue 16 phase 4b-2,
docs/privsep.md "Phase 4b-2, the journal through warren-upper, as built"):
with --privsep the journal's walks, the saves of file bytes and the
rollback's writes go through a warren-upper session (UPPER_SESSION,
counted by warren-priv) in the sandbox's user namespace, not through
warrend; the changes and the rollback are the same as without the flag
(0600 files and 0700 dirs of the sandbox's users, owners, modes, symlinks,
a deleted image dir recreated); a dropped warrend (--privsep --user
warren), which cannot read the upper dir at all, journals and rolls back;
a sandbox without a user namespace is refused with FAILED_PRECONDITION
naming --userns=off; a kill -9 of warren-priv while a journaled exec runs
loses nothing of its journal."""
import contextlib
import os
import signal
import threading
import time

import pytest

import warren as wr
from conftest import free_port, import_image
from test_privsep import metrics

SESSION = 'warren_priv_requests_total{type="UPPER_SESSION"}'
IMAGE = "busybox:latest"

SETUP = ("mkdir -p /w/bob && echo secret > /w/bob/f && chown -R 1234:1234 /w/bob && "
         "chmod 700 /w/bob && chmod 600 /w/bob/f && echo keep > /w/k && chmod 640 /w/k && "
         "ln -s /etc/passwd /w/link")
CHANGE = ("echo changed > /w/bob/f; chmod 644 /w/bob/f; chown 1234 /w/k; rm /w/link; "
          "ln -s /nowhere /w/link; echo new > /w/new; mkdir /w/d; rm /bin/vi; "
          "echo z > /etc/group; rm -rf /root; mkdir /root; echo x > /w/bob/g")
CHECK = ("cat /w/bob/f /w/k; stat -c '%u:%g %a' /w/bob /w/bob/f /w/k; readlink /w/link; "
         "ls /w; test -e /w/bob/g && echo g || echo no-g; readlink /bin/vi; cat /etc/group; "
         "stat -c %a /root")
WANT = ("secret\nkeep\n1234:1234 700\n1234:1234 600\n0:0 640\n/etc/passwd\nbob\nk\nlink\n"
        "no-g\nbusybox\nroot:x:0:\nnogroup:x:65534:\n700\n")


@contextlib.contextmanager
def own_flags():
    """These tests pick each daemon's flags themselves (the drop too):
    without WARREN_DROP's environment (WARREN_PRIVSEP, WARREN_USER), which
    would turn the in-process daemon they compare with into a dropped
    one."""
    saved = {k: os.environ.pop(k) for k in ("WARREN_PRIVSEP", "WARREN_USER") if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def sh(sb, cmd, **kw):
    r = sb.exec("sh", "-c", cmd, **kw)
    assert r.exit_code == 0, r.stderr_text
    return r


def journal_round(c):
    """A journaled exec's changes and its rollback in a fresh sandbox:
    (kinds, the tree after the rollback)."""
    sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"])
    try:
        sh(sb, SETUP)
        r = sh(sb, CHANGE, journal=True)
        ch = sb.changes(r.exec_id)
        assert not ch.running and ch.complete
        kinds = sorted((x.path, x.kind) for x in ch)
        undone = sb.rollback(r.exec_id)
        assert {x.path for x in undone} >= {"/w/bob/f", "/w/new", "/w/link"}
        return kinds, sh(sb, CHECK).stdout_text
    finally:
        sb.terminate()


WANT_KINDS = [("/bin/vi", "deleted"), ("/etc/group", "modified"), ("/root", "mode"),
              ("/w/bob/f", "mode"), ("/w/bob/f", "modified"), ("/w/bob/g", "created"),
              ("/w/d", "created"), ("/w/k", "mode"), ("/w/link", "modified"),
              ("/w/new", "created")]


def test_journal_same_with_and_without_privsep(fresh_warrend):
    for privsep in (False, True):
        port = free_port()
        args = ["--admin-listen", "127.0.0.1:%d" % port] + (["--privsep"] if privsep else [])
        with own_flags():
            d = fresh_warrend(extra_args=args)
        import_image(d, IMAGE)
        with wr.SandboxClient(d.unix_addr) as c:
            kinds, tree = journal_round(c)
        assert kinds == WANT_KINDS, (privsep, kinds)
        assert tree == WANT, (privsep, tree)
        n = metrics(port).get(SESSION)
        if privsep:
            # begin (kept for the walk after), changes answered from the
            # end walk, rollback: two sessions at least, each one request
            assert n is not None and n >= 2, n
        else:
            assert not n
        d.stop()


def test_journal_without_userns_refused(fresh_warrend):
    port = free_port()
    with own_flags():
        d = fresh_warrend(extra_args=["--privsep", "--userns", "off",
                                      "--admin-listen", "127.0.0.1:%d" % port])
    import_image(d, IMAGE)
    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"])
        try:
            with pytest.raises(wr.FailedPrecondition) as ei:
                sb.exec("true", journal=True)
            assert "--userns=off" in str(ei.value)
            assert metrics(port).get(SESSION, 0) == 0
        finally:
            sb.terminate()


def test_journal_dropped(tmp_path):
    """warrend --privsep --user warren: the upper dir is not readable by
    warrend (it is the sandbox's, 0700 dirs of its users inside), yet the
    journal works."""
    from test_lifecycle import Restartable
    from test_privsep_drop import USER, assert_dropped, started_dropped
    import pwd
    import subprocess
    from conftest import ROOT

    subprocess.run([str(ROOT / "scripts" / "warren-user.sh"), USER], check=True)
    pw = pwd.getpwnam(USER)
    life = Restartable()
    os.chmod(life.tmp, 0o711)
    port = free_port()
    try:
        started_dropped(life, port, 0, terminate_on_exit=True)
        assert_dropped(life.proc.pid, pw)
        with wr.SandboxClient(life.unix_addr) as c:
            kinds, tree = journal_round(c)
        assert kinds == WANT_KINDS, kinds
        assert tree == WANT, tree
        assert metrics(port).get(SESSION, 0) >= 2
        assert_dropped(life.proc.pid, pw)
        assert life.stop() in (0, -signal.SIGTERM)
    finally:
        life.destroy()


def test_journal_survives_kill_of_warren_priv(fresh_warrend):
    """kill -9 of warren-priv while a journaled exec runs: the session kept
    for the walk after it lost its warren-priv (its OPAQUE questions go
    nowhere); the walk after is made by a fresh session of the next
    warren-priv, and the changes and the rollback are whole."""
    from test_privsep import wait_for
    port = free_port()
    with own_flags():
        d = fresh_warrend(extra_args=["--privsep", "--admin-listen", "127.0.0.1:%d" % port])
    import_image(d, IMAGE)
    first = int(metrics(port)["warren_priv_pid"])
    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"])
        try:
            sh(sb, "mkdir -p /w/dir && echo old > /w/f")
            box = {}

            def run():
                box["r"] = sb.exec("sh", "-c", "sleep 2; echo new > /w/f; mkdir /w/dir/sub",
                                   journal=True)

            t = threading.Thread(target=run)
            t.start()
            time.sleep(0.8)
            os.kill(first, signal.SIGKILL)
            assert wait_for(lambda: int(metrics(port).get("warren_priv_pid", 0)) not in
                            (0, first))
            t.join(30)
            r = box["r"]
            assert r.exit_code == 0
            # the walk after the exec: the kept session failed, a fresh one
            # of the next warren-priv made it
            assert wait_for(lambda: "once more with a fresh session" in d.read_log())
            ch = sb.changes(r.exec_id)
            assert ch.complete
            assert sorted((x.path, x.kind) for x in ch) == [("/w/dir/sub", "created"),
                                                             ("/w/f", "modified")]
            sb.rollback(r.exec_id)
            assert sh(sb, "cat /w/f; ls /w/dir | wc -l").stdout_text == "old\n0\n"
        finally:
            sb.terminate()
