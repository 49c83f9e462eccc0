"""Privilege separation, phase 3's rest (issue 16, docs/privsep.md "Phase
3, volumes and spawn-beside, as built"): with --privsep warren-priv mounts
and unmounts the volumes (VOLUME_MOUNT, VOLUME_UNMOUNT: the loop device and
the ext4 mount are made by warren-priv, warrend only opens the mount's
root it answers), prepares a sandbox's ssh dir (SSH_DIR_PREPARE) and
starts its ssh-agent and ssh-add beside it (SANDBOX_SPAWN_BESIDE: their
parent is warren-priv), counted by warren-priv itself."""
import os
import subprocess
import sys
import time

import pytest

import warren as wr
from conftest import ROOT, free_port, import_image
from test_privsep import children, metrics, priv_children
from test_volumes import loops_under, mounts_under, wait_clean

sys.path.insert(0, str(ROOT / "tests"))


def req(t):
    return 'warren_priv_requests_total{type="%s"}' % t


MOUNT, UNMOUNT = req("VOLUME_MOUNT"), req("VOLUME_UNMOUNT")
SPAWN, SSHDIR = req("SANDBOX_SPAWN_BESIDE"), req("SSH_DIR_PREPARE")


def test_privsep_volumes_by_warren_priv(fresh_warrend):
    """A volume written in one sandbox is read back in a second one and
    through the volume files API; warren-priv mounted it (its counter; no
    mount at all before the first use), warrend holds no loop device, and
    the delete and the stop detach it through warren-priv, leaving no
    mount and no loop device."""
    port = free_port()
    d = fresh_warrend(extra_args=["--privsep", "--admin-listen", "127.0.0.1:%d" % port])
    import_image(d, "busybox:latest")
    vroot = os.path.join(d.state_dir, "volumes")
    assert not mounts_under(vroot)
    with wr.SandboxClient(d.unix_addr) as c:
        vol = c.create_volume("privvol", max_bytes=32 << 20)
        m = metrics(port)
        assert m[MOUNT] == 1  # the create reports its usage: mounted by warren-priv
        assert len(mounts_under(vroot)) == 1 and len(loops_under(vroot)) == 1
        # warrend itself has no loop device open
        fds = os.listdir("/proc/%d/fd" % d.proc.pid)
        links = []
        for f in fds:
            try:
                links.append(os.readlink("/proc/%d/fd/%s" % (d.proc.pid, f)))
            except OSError:
                pass
        assert not [l for l in links if l.startswith("/dev/loop")], links
        a = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"],
                     volumes=[(vol.name, "/shared")])
        r = a.exec("sh", "-c", "echo from-a > /shared/note && sync", timeout_secs=30)
        assert r.exit_code == 0, r.stderr_text
        b = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"],
                     volumes=[(vol.name, "/mnt/other", True)])
        r = b.exec("cat", "/mnt/other/note", timeout_secs=30)
        assert r.stdout_text == "from-a\n", r.stderr_text
        r = b.exec("sh", "-c", "echo x > /mnt/other/no 2>&1; echo rc=$?", timeout_secs=30)
        assert "rc=0" not in r.stdout_text  # read-only
        v = wr.Volume(vol.name, c)
        assert v.get_file("note") == b"from-a\n"
        v.put_file("from-api", b"hello\n")
        r = a.exec("cat", "/shared/from-api", timeout_secs=30)
        assert r.stdout_text == "hello\n"
        a.terminate()
        b.terminate()
        assert metrics(port)[MOUNT] == 1  # mounted once, shared
        before = metrics(port)[UNMOUNT]
        c.delete_volume(vol.name)
        assert metrics(port)[UNMOUNT] > before
        wait_clean(vroot)
        # a second volume, left mounted: the stop detaches it through warren-priv
        c.create_volume("privvol2", max_bytes=16 << 20)
        assert metrics(port)[MOUNT] == 2
        assert len(mounts_under(vroot)) == 1
    m = metrics(port)
    assert m["warren_priv_refused_total"] == 0
    log = d.stop()
    assert "warren-priv: VOLUME_MOUNT: done" in log
    assert "warren-priv: VOLUME_UNMOUNT: done" in log
    wait_clean(vroot)


def test_privsep_volumes_survive_restart():
    """Data written under --privsep is there after a restart without it
    (the same image, mounted in process), and again under --privsep
    after that; each stop leaves no mount and no loop device."""
    from test_lifecycle import Restartable
    w = Restartable()
    try:
        vroot = os.path.join(w.state_dir, "volumes")
        for i, args in enumerate((["--privsep"], [], ["--privsep"])):
            w.start(terminate_on_exit=True, extra=args)
            with wr.SandboxClient(w.unix_addr) as c:
                c.create_volume("keep", max_bytes=16 << 20)
                v = wr.Volume("keep", c)
                if i:
                    assert v.get_file("log") == b"x" * i
                v.put_file("log", b"x" * (i + 1))
            w.stop()
            wait_clean(vroot)
    finally:
        w.destroy()


# ---- managed ssh ----

@pytest.fixture(scope="module")
def bed():
    from fakenet.bed import FakeNet
    b = FakeNet(ssh=True)
    b.start()
    try:
        if b.ssh is None:
            pytest.skip("no sshd (openssh-server) on this host")
        yield b
    finally:
        b.stop()


def agent_procs():
    p = subprocess.run(["ps", "-eo", "pid=,ppid=,uid=,args="], capture_output=True, text=True)
    out = []
    for l in p.stdout.splitlines():
        f = l.split(None, 3)
        if len(f) == 4 and f[3].startswith("ssh-agent -D -a agent.sock"):
            out.append((int(f[0]), int(f[1]), int(f[2])))
    return out


def test_privsep_managed_ssh_by_warren_priv(fresh_warrend, bed):
    """--privsep: the sandbox's ssh dir is made by warren-priv, its
    ssh-agent and the ssh-add of its key run beside it as warren-priv's
    children (unprivileged: the host uid of the sandbox's root), and the
    sandbox reaches the fake internet's sshd and git server with the key;
    an unusable key is refused (ssh-add's exit status read through the
    pidfd); the agent ends with the sandbox."""
    from test_managed_ssh import IMAGE, import_base
    port = free_port()
    d = fresh_warrend(extra_args=["--privsep", "--admin-listen", "127.0.0.1:%d" % port,
                                  "--upstream-dns", bed.dns])
    import_base(d)
    (priv,) = priv_children(d)
    with wr.SandboxClient(d.unix_addr) as c:
        with open(bed.ssh.key) as f:
            c.set_secret("GITHUB_DEPLOY_KEY", f.read())
        c.set_secret("NOT_A_KEY", "-----BEGIN OPENSSH PRIVATE KEY-----\nnope\n"
                                  "-----END OPENSSH PRIVATE KEY-----\n")
        m0 = metrics(port)
        assert m0[SPAWN] == 0 and m0[SSHDIR] == 0
        before = {a[0] for a in agent_procs()}
        sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"],
                      managed_ssh={"github": wr.SshDest("github.com", "GITHUB_DEPLOY_KEY",
                                                        username="git")})
        mine = [a for a in agent_procs() if a[0] not in before]
        assert len(mine) == 1, mine
        pid, ppid, uid = mine[0]
        assert ppid == priv[0]  # warren-priv's child, not warrend's
        assert uid >= 1879048192  # the host uid of the sandbox's root
        m = metrics(port)
        assert m[SSHDIR] == 1 and m[SPAWN] == 2  # the agent, one ssh-add
        r = sb.exec("sh", "-c", "ssh github true && echo SSH-OK", timeout_secs=60)
        assert "SSH-OK" in r.stdout_text, r.stderr_text
        r = sb.exec("sh", "-c", "git clone -q github:example/repo.git /tmp/repo && ls /tmp/repo",
                    timeout_secs=60)
        assert r.exit_code == 0 and r.stdout_text.strip(), r.stderr_text
        r = sb.exec("ssh-add", "-l", timeout_secs=30)
        assert r.exit_code == 0 and "ED25519" in r.stdout_text
        # no zombie left under warren-priv (it reaps the ssh-add)
        assert not [ch for ch in children(priv[0]) if ch[1] == "ssh-add"]
        # an unusable key: refused, the status came through the pidfd
        with pytest.raises(wr.WarrenError) as ei:
            c.create(image=IMAGE, entrypoint=["sleep", "infinity"],
                     managed_ssh={"bad": wr.SshDest("github.com", "NOT_A_KEY")})
        assert ei.value.code == "FAILED_PRECONDITION", ei.value
        assert "not usable" in str(ei.value), ei.value
        sb.terminate()
        deadline = time.monotonic() + 10
        while pid in {a[0] for a in agent_procs()} and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pid not in {a[0] for a in agent_procs()}
    m = metrics(port)
    assert m["warren_priv_refused_total"] == 0
    log = d.stop()
    assert "warren-priv: SANDBOX_SPAWN_BESIDE: done" in log
