"""Snapshots and forks (issue 18 item 2): the writable layer of a running
sandbox becomes an image; forks see its files and are independent; the
original keeps running; a layer is stored once."""
import os

import pytest

import warren as wr

IMAGE = "busybox:latest"


def sh(sb, cmd):
    r = sb.exec("sh", "-c", cmd)
    assert r.exit_code == 0, r.stderr_text
    return r.stdout_text


def layer_dirs(d):
    root = os.path.join(d.state_dir, "layers", "sha256")
    return set(os.listdir(root)) if os.path.isdir(root) else set()


def test_snapshot_fork_three_times(client, d):
    orig = client.create(image=IMAGE, entrypoint=["sh", "-c", "while :; do sleep 1; done"])
    forks = []
    try:
        sh(orig, "mkdir -p /workspace/proj /tmp-on-disk && echo code > /workspace/proj/main.py && "
                 "echo data > /tmp-on-disk/f && ln -s main.py /workspace/proj/link && "
                 "rm /etc/passwd && mkdir -p /opaque && touch /opaque/x && chmod 600 /workspace/proj/main.py")
        before = layer_dirs(d)
        img = orig.snapshot(name="snap:one")
        assert img.id.startswith("sha256:") and "snap:one" in img.names
        base = client.get_image(IMAGE)
        assert img.layers[:-1] == base.layers and len(img.layers) == len(base.layers) + 1
        assert len(layer_dirs(d) - before) == 1
        # the original keeps running, unfrozen
        assert orig.refresh().status == wr.SandboxStatus.RUNNING
        assert sh(orig, "echo alive") == "alive\n"
        sh(orig, "echo after > /workspace/proj/late")
        # three forks: each sees the files, none sees the later change
        forks = orig.fork(count=3)
        assert len(forks) == 3 and len({f.id for f in forks}) == 3
        for f in forks:
            assert sh(f, "cat /workspace/proj/main.py /tmp-on-disk/f") == "code\ndata\n"
            assert sh(f, "readlink /workspace/proj/link") == "main.py\n"
            assert sh(f, "stat -c %a /workspace/proj/main.py") == "600\n"
            assert sh(f, "test -e /etc/passwd && echo yes || echo no") == "no\n"  # whiteout
            # a fork snapshots the sandbox as it is now
            assert sh(f, "cat /workspace/proj/late") == "after\n"
        # independent
        sh(forks[0], "echo mine > /workspace/proj/main.py")
        assert sh(forks[1], "cat /workspace/proj/main.py") == "code\n"
        assert sh(orig, "cat /workspace/proj/main.py") == "code\n"
        # no layer stored twice: the fork's snapshot differs by `late` only;
        # snapshotting an unchanged sandbox again adds nothing
        n = len(layer_dirs(d))
        again = forks[1].snapshot()
        again2 = forks[1].snapshot()
        assert again.id == again2.id
        assert len(layer_dirs(d)) == n + 1
        # a sandbox from the snapshot by name
        s2 = client.create(image="snap:one", entrypoint=["sleep", "infinity"])
        forks.append(s2)
        assert sh(s2, "cat /workspace/proj/main.py") == "code\n"
    finally:
        for f in forks:
            f.terminate()
        orig.terminate()


def test_snapshot_errors(client):
    with pytest.raises(wr.NotFound):
        s = wr.Sandbox()
        s._channel, s.id = client, "sb-0123456789abcdef"
        s.snapshot()
    # a disk limit is no obstacle: the layer is on the sandbox's image,
    # read from the host like any
    sb = client.create(image=IMAGE, entrypoint=["sleep", "infinity"], disk="64Mi")
    try:
        sb.exec("sh", "-c", "echo small > /etc/small")
        img = sb.snapshot()
        f = client.create(image=img.id, entrypoint=["sleep", "infinity"])
        try:
            assert f.exec("cat", "/etc/small").stdout_text == "small\n"
        finally:
            f.terminate()
    finally:
        sb.terminate()
    sb = client.create(image=IMAGE, entrypoint=["sleep", "infinity"])
    try:
        with pytest.raises(wr.InvalidArgument):
            sb.snapshot(name="Bad Name!")
        with pytest.raises(wr.InvalidArgument):
            sb.fork(count=17)
        # a paused sandbox stays paused across its snapshot
        sb.pause()
        sb.snapshot()
        assert sb.refresh().status == wr.SandboxStatus.PAUSED
        sb.resume()
    finally:
        sb.terminate()


def test_snapshot_of_a_hostile_tree(client):
    """FIFOs, symlinks to / and to host paths, a deep chain, a mode-000
    dir: the snapshot neither blocks nor follows anything, and the fork
    gets exactly the tree."""
    sb = client.create(image=IMAGE, entrypoint=["sleep", "infinity"])
    fork = None
    try:
        sh(sb, "mkfifo /fifo && ln -s / /root-link && ln -s /etc/shadow /host-link && "
               "mkdir -p /locked/in && echo s > /locked/in/f && chmod 000 /locked && "
               "i=0; cd /; while [ $i -lt 600 ]; do mkdir d && cd d || exit 9; i=$((i+1)); done; "
               "echo deep > leaf")
        fork = sb.fork()[0]
        out = sh(fork, "test -p /fifo && echo fifo; readlink /root-link; readlink /host-link; "
                       "cat /locked/in/f; find /d -name leaf | wc -l")
        assert out == "fifo\n/\n/etc/shadow\ns\n1\n", out
    finally:
        if fork:
            fork.terminate()
        sb.terminate()
