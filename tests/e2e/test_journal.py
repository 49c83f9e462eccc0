"""The per-exec change journal and rollback (issue 18 item 3): what an exec
created, modified, deleted or chmod'ed in the writable layer, and putting
it back."""
import json
import os
import subprocess
import time

import pytest

import warren as wr

IMAGE = "busybox:latest"


def sh(sb, cmd, **kw):
    r = sb.exec("sh", "-c", cmd, **kw)
    assert r.exit_code == 0, r.stderr_text
    return r


def kinds(ch):
    return sorted((c.path, c.kind) for c in ch)


@pytest.fixture
def sb(client):
    s = client.create(image=IMAGE)
    try:
        sh(s, "mkdir -p /work && cd /work && echo old > old && printf 'kept\\n' > kept && "
              "chmod 644 kept")
        yield s
    finally:
        s.terminate()


def test_four_changes_reported_exactly(sb):
    r = sh(sb, "cd /work; echo a > new; rm old; chmod 600 kept; echo b >> kept", journal=True)
    ch = sb.changes(r.exec_id)
    assert not ch.running and ch.complete
    assert kinds(ch) == [("/work/kept", "mode"), ("/work/kept", "modified"),
                         ("/work/new", "created"), ("/work/old", "deleted")]
    mode = {c.kind: c for c in ch if c.path == "/work/kept"}["mode"]
    assert mode.old_mode & 0o7777 == 0o644 and mode.new_mode & 0o7777 == 0o600


def test_rollback_restores_bytes_and_modes(sb):
    r = sh(sb, "cd /work; echo a > new; rm old; chmod 600 kept; echo b >> kept", journal=True)
    undone = sb.rollback(r.exec_id)
    assert {c.path for c in undone} == {"/work/new", "/work/old", "/work/kept"}
    out = sh(sb, "cd /work; ls; cat old kept; stat -c %a kept").stdout_text.split()
    assert out == ["kept", "old", "old", "kept", "644"]
    # once only
    with pytest.raises(wr.FailedPrecondition, match="already rolled back"):
        sb.rollback(r.exec_id)


def test_conflicting_later_exec_refuses_rollback(sb):
    r1 = sh(sb, "echo one >> /work/kept", journal=True)
    sh(sb, "echo two >> /work/kept", journal=True)
    with pytest.raises(wr.FailedPrecondition, match="/work/kept"):
        sb.rollback(r1.exec_id)
    # a non-journaled change counts too
    r3 = sh(sb, "echo three > /work/other", journal=True)
    sh(sb, "echo four >> /work/other")
    with pytest.raises(wr.FailedPrecondition, match="changed again"):
        sb.rollback(r3.exec_id)
    # force overwrites
    sb.rollback(r3.exec_id, force=True)
    assert sh(sb, "ls /work").stdout_text.split() == ["kept", "old"]


def test_image_files_modified_and_deleted_come_back(sb):
    before = sh(sb, "md5sum /bin/busybox; cat /etc/group | md5sum").stdout_text
    r = sh(sb, "rm /etc/group; echo x >> /etc/passwd; chmod 700 /etc/hosts.allow 2>/dev/null; "
               "mkdir -p /opt/new/deep && echo y > /opt/new/deep/f && ln -s /etc/passwd /opt/l",
           journal=True)
    ch = kinds(sb.changes(r.exec_id))
    assert ("/etc/group", "deleted") in ch and ("/etc/passwd", "modified") in ch
    assert ("/opt/new", "created") in ch and ("/opt/new/deep/f", "created") in ch
    assert ("/opt/l", "created") in ch
    sb.rollback(r.exec_id)
    assert sh(sb, "md5sum /bin/busybox; cat /etc/group | md5sum").stdout_text == before
    assert "x" not in sh(sb, "tail -n1 /etc/passwd").stdout_text.split()
    assert sh(sb, "[ -e /opt/new ] || [ -L /opt/l ] || echo gone").stdout_text == "gone\n"


def test_replaced_dir_and_symlink_retarget(sb):
    sh(sb, "mkdir -p /work/d && echo 1 > /work/d/f && ln -s kept /work/ln")
    r = sh(sb, "rm -r /work/d && echo file > /work/d && ln -sfn old /work/ln", journal=True)
    ch = kinds(sb.changes(r.exec_id))
    assert ("/work/d", "modified") in ch and ("/work/d/f", "deleted") in ch
    assert ("/work/ln", "modified") in ch
    sb.rollback(r.exec_id)
    assert sh(sb, "cat /work/d/f; readlink /work/ln").stdout_text.split() == ["1", "kept"]


def test_running_exec_reports_changes_so_far(sb):
    p = sb.exec_start("sh", "-c", "echo x > /work/live; read line; echo y > /work/later",
                      journal=True)
    deadline = time.time() + 10
    while True:
        ch = p.changes()
        if ("/work/live", "created") in kinds(ch):
            break
        assert time.time() < deadline
        time.sleep(0.05)
    assert ch.running
    with pytest.raises(wr.FailedPrecondition, match="still running"):
        p.rollback()
    p.write_stdin("go\n")
    p.close_stdin()
    assert p.wait().exit_code == 0
    ch = p.changes()
    assert not ch.running and kinds(ch) == [("/work/later", "created"), ("/work/live", "created")]
    p.rollback()
    assert sh(sb, "ls /work").stdout_text.split() == ["kept", "old"]


def test_sandbox_wide_journal_and_errors(client):
    s = client.create(image=IMAGE, journal_execs=True)
    try:
        r = sh(s, "echo z > /root/z")
        assert kinds(s.changes(r.exec_id)) == [("/root/z", "created")]
        plain = client.create(image=IMAGE)
        try:
            r2 = sh(plain, "true")
            with pytest.raises(wr.NotFound, match="journal=True"):
                plain.changes(r2.exec_id)
        finally:
            plain.terminate()
        with pytest.raises(wr.NotFound):
            s.changes("ex-999")
        with pytest.raises(wr.InvalidArgument, match="exec_id"):
            s.changes("")
    finally:
        s.terminate()


def test_disk_limited_sandbox_journals(client):
    # the writable layer on the sandbox's own image: journaled like any
    s = client.create(image=IMAGE, disk="64Mi")
    try:
        r = sh(s, "mkdir -p /work && echo a > /work/new", journal=True)
        assert kinds(s.changes(r.exec_id)) == [("/work", "created"), ("/work/new", "created")]
        s.rollback(r.exec_id)
        assert sh(s, "test -e /work; echo $?").stdout_text == "1\n"
    finally:
        s.terminate()


def test_hostile_tree_neither_followed_nor_escaped(sb, d):
    # a symlink to the host's paths and a FIFO: the journal reads neither,
    # and rollback writes only inside the sandbox
    r = sh(sb, "ln -s /proc/1/root /work/esc; mkfifo /work/fifo; "
               "mkdir -p /work/deep && cd /work/deep && i=0; while [ $i -lt 300 ]; do "
               "mkdir d; cd d; i=$((i+1)); done; echo bottom > f", journal=True)
    full = sb.changes(r.exec_id)
    ch = kinds(full)
    assert ("/work/esc", "created") in ch and ("/work/fifo", "created") in ch
    assert not full.complete  # deeper than the walk goes: said so
    sb.rollback(r.exec_id)
    assert sh(sb, "ls /work").stdout_text.split() == ["kept", "old"]


def test_exec_stdin_while_journal_walk_runs(sb):
    # requests sent right after start wait for the walk before it
    p = sb.exec_start("cat", journal=True)
    p.write_stdin("hello\n")
    p.close_stdin()
    res = p.wait()
    assert res.stdout_text == "hello\n"


def cli(d, *args, check=0):
    from conftest import WARREN_CLI
    p = subprocess.run([WARREN_CLI, "--addr", d.unix_addr] + list(args), capture_output=True,
                       text=True, timeout=120)
    if check is not None:
        assert p.returncode == check, (args, p.stdout, p.stderr)
    return p


def test_cli_changes_and_rollback(d):
    sid = cli(d, "sandbox", "create", "-i", IMAGE, "--", "sleep", "infinity").stdout.strip()
    try:
        cli(d, "exec", sid, "--", "sh", "-c", "echo 1 > /root/keep")
        p = cli(d, "exec", "--changes", sid, "--", "sh", "-c",
                "echo hi; echo 2 > /root/new; chmod 600 /root/keep; rm /etc/group")
        assert p.stdout == "hi\n"
        lines = [l.split() for l in p.stderr.splitlines()]
        assert ["created", "file", "/root/new"] in lines
        assert ["deleted", "file", "/etc/group"] in lines
        assert ["mode", "file", "/root/keep", "(0644", "->", "0600)"] in lines
        p = cli(d, "exec", "--journal", sid, "--", "touch", "/root/t")
        exec_id = p.stderr.split("journaled exec ")[1].split()[0]
        out = json.loads(cli(d, "sandbox", "changes", sid, exec_id, "--json").stdout)
        assert [c["path"] for c in out["changes"]] == ["/root/t"]
        assert "created" in cli(d, "sandbox", "rollback", sid, exec_id).stdout
        p = cli(d, "sandbox", "rollback", sid, exec_id, check=None)
        assert p.returncode != 0 and "already rolled back" in p.stderr
        assert cli(d, "exec", sid, "--", "ls", "/root").stdout.split() == ["keep", "new"]
        # sandbox-wide
        sid2 = cli(d, "sandbox", "create", "-i", IMAGE, "--journal", "--", "sleep",
                   "infinity").stdout.strip()
        try:
            p = cli(d, "exec", "--changes", sid2, "--", "mkdir", "/srv2")
            assert p.stderr.split() == ["created", "dir", "/srv2"]
        finally:
            cli(d, "sandbox", "rm", sid2)
    finally:
        cli(d, "sandbox", "rm", sid)
