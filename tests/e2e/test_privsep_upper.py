"""Privilege separation, phase 4b (issue 16, docs/privsep.md "Phase 4, the
upper-dir reader"): with --privsep a snapshot's upper dir is read by
warren-upper, started by warren-priv for each one in the sandbox's user
namespace (UPPER_PACK, counted by warren-priv), not by warrend; the
snapshot is the same as without the flag (same layer, opaque dirs,
whiteouts, owners, 0600 files of the sandbox's users); a sandbox without a
user namespace is refused with FAILED_PRECONDITION naming --userns=off."""
import os
import stat
import threading
import time

import pytest

import warren as wr
from conftest import free_port, import_image
from test_privsep import metrics, children

UPPER = 'warren_priv_requests_total{type="UPPER_PACK"}'
IMAGE = "busybox:latest"


def sh(sb, cmd):
    r = sb.exec("sh", "-c", cmd)
    assert r.exit_code == 0, r.stderr_text
    return r.stdout_text


TREE = ("mkdir -p /w/p && echo code > /w/p/main && chmod 600 /w/p/main && "
        "mkdir /w/bob && echo b > /w/bob/f && chown -R 1234:1234 /w/bob && "
        "chmod 700 /w/bob && chmod 600 /w/bob/f && rm /bin/vi && "
        "rm -rf /var/tmp && mkdir /var/tmp && echo new > /var/tmp/only && "
        "ln -s /etc/shadow /w/host-link")
CHECK = ("cat /w/p/main /w/bob/f; stat -c '%u %a' /w/bob /w/bob/f /w/p/main; ls /var/tmp; "
         "test -e /bin/vi && echo vi || echo no-vi; readlink /w/host-link")
WANT = "code\nb\n1234 700\n1234 600\n0 600\nonly\nno-vi\n/etc/shadow\n"


def tree(root):
    """What a layer dir holds but mtimes: (path, mode, uid, gid, data)."""
    out = []
    for dp, dns, fns in os.walk(root):
        for n in sorted(dns + fns):
            p = os.path.join(dp, n)
            st = os.lstat(p)
            data = None
            if stat.S_ISLNK(st.st_mode):
                data = os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    data = f.read()
            elif stat.S_ISCHR(st.st_mode):
                data = st.st_rdev
            out.append((os.path.relpath(p, root), st.st_mode, st.st_uid, st.st_gid, data))
    return sorted(out)


def layer_dirs(d):
    return set(os.listdir(os.path.join(d.state_dir, "layers", "sha256")))


def snapshot_layer(d, privsep):
    """A fresh daemon: the tree, a snapshot, a fork that checks it; the
    snapshot's last layer, warren-priv's UPPER_PACK count (None without)."""
    port = free_port()
    args = ["--admin-listen", "127.0.0.1:%d" % port]
    if privsep:
        args.append("--privsep")
    dd = d(extra_args=args)
    import_image(dd, IMAGE)
    with wr.SandboxClient(dd.unix_addr) as c:
        sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"])
        try:
            sh(sb, TREE)
            before = metrics(port).get(UPPER, 0)
            dirs = layer_dirs(dd)
            img = sb.snapshot()
            after = metrics(port).get(UPPER)
            new = layer_dirs(dd) - dirs
            assert len(new) == 1
            layer = tree(os.path.join(dd.state_dir, "layers", "sha256", new.pop()))
            assert layer
            f = c.create(image=img.id, entrypoint=["sleep", "infinity"])
            try:
                assert sh(f, CHECK) == WANT
            finally:
                f.terminate()
        finally:
            sb.terminate()
    return layer, (None if after is None else after - before)


def test_privsep_snapshot_by_warren_upper(fresh_warrend, monkeypatch):
    layer_priv, n = snapshot_layer(fresh_warrend, True)
    assert n == 1  # warren-priv packed it (warren-upper)
    monkeypatch.delenv("WARREN_PRIVSEP", raising=False)  # the suite may run with it
    monkeypatch.delenv("WARREN_USER", raising=False)  # (WARREN_DROP=1: --user needs --privsep)
    layer_plain, n0 = snapshot_layer(fresh_warrend, False)
    assert n0 is None  # no warren-priv: in process
    # the same tree gives the same layer either way (owners as the
    # sandbox sees them, the opaque dir and the whiteout), mtimes aside
    assert layer_priv == layer_plain


def test_privsep_snapshot_helper_confined(fresh_warrend):
    """warren-upper runs as the sandbox's root in its user namespace,
    chrooted, no_new_privs, under seccomp, and is gone after the snapshot;
    a paused sandbox stays paused."""
    port = free_port()
    d = fresh_warrend(extra_args=["--privsep", "--admin-listen", "127.0.0.1:%d" % port])
    import_image(d, IMAGE)
    priv = int(metrics(port)["warren_priv_pid"])
    seen = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            for pid, comm, uid in children(priv):
                if comm == "warren-upper":
                    try:
                        with open("/proc/%d/status" % pid) as f:
                            st = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
                        root = sorted(os.listdir("/proc/%d/root" % pid))
                        ns = os.readlink("/proc/%d/ns/user" % pid)
                        seen.append((uid, st, root, ns))
                    except OSError:
                        pass
            time.sleep(0.001)

    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"])
        try:
            # enough files that the pack takes a while
            sh(sb, "mkdir /many && cd /many && i=0; while [ $i -lt 3000 ]; do echo $i > f$i; "
                   "i=$((i+1)); done")
            t = threading.Thread(target=watch)
            t.start()
            try:
                sb.pause()
                sb.snapshot()
                assert sb.refresh().status == wr.SandboxStatus.PAUSED
                sb.resume()
            finally:
                stop.set()
                t.join()
            from test_privsep import init_pid
            ipid = init_pid(d, sb.id)
            sb_ns = os.readlink("/proc/%d/ns/user" % ipid)
        finally:
            sb.terminate()
    assert not [p for p in children(priv) if p[1] == "warren-upper"]
    if not seen:
        pytest.skip("the pack was too quick to watch warren-upper")
    # the last sighting is past its setup (setns, chroot, seccomp)
    done = [x for x in seen if x[1]["Seccomp"].strip() == "2"]
    assert done, [x[1]["Seccomp"] for x in seen]
    uid, st, root, ns = done[-1]
    assert uid != 0  # the sandbox's root: a host uid of its range
    assert st["NoNewPrivs"].strip() == "1"
    assert ns == sb_ns  # in the sandbox's user namespace
    # chrooted into the upper dir: its root holds what the sandbox wrote
    # (and no host /usr, /proc)
    assert "many" in root and "proc" not in root and "usr" not in root, root


def test_privsep_snapshot_without_userns_refused(fresh_warrend):
    port = free_port()
    d = fresh_warrend(extra_args=["--privsep", "--userns", "off",
                                  "--admin-listen", "127.0.0.1:%d" % port])
    import_image(d, IMAGE)
    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"])
        try:
            with pytest.raises(wr.FailedPrecondition) as ei:
                sb.snapshot()
            assert "--userns=off" in str(ei.value)
            assert metrics(port).get(UPPER, 0) == 0
            # nothing left frozen
            assert sh(sb, "echo alive") == "alive\n"
        finally:
            sb.terminate()


def test_privsep_build_by_warren_upper(fresh_warrend):
    """An image build's RUN steps commit their upper dirs through
    UPPER_PACK too (build.c snapshots each step's sandbox)."""
    port = free_port()
    d = fresh_warrend(extra_args=["--privsep", "--admin-listen", "127.0.0.1:%d" % port])
    import_image(d, IMAGE)
    with wr.SandboxClient(d.unix_addr) as c:
        before = metrics(port).get(UPPER, 0)
        img = (wr.Image.base(IMAGE)
               .run_commands("mkdir /b && echo one > /b/f && chmod 600 /b/f && rm /bin/vi",
                             "echo two >> /b/f"))
        info = c.build_image(img)
        assert metrics(port)[UPPER] - before == 2  # one per RUN step
        sb = c.create(image=info.id, entrypoint=["sleep", "infinity"])
        try:
            assert sh(sb, "cat /b/f; stat -c %a /b/f; test -e /bin/vi && echo vi || echo no") \
                == "one\ntwo\n600\nno\n"
        finally:
            sb.terminate()
