"""User namespaces (issue 16 item 5) through warrend: each sandbox's root is
an unprivileged host uid of a range of its own (65,536 ids), recorded in the
store and re-learned after a restart; what it writes is owned by its range
on the host; the file API and snapshots show ids as the sandbox sees them;
--userns=off runs sandboxes as before."""
import json
import os
import sqlite3
import uuid

import pytest

import warren as wr
from conftest import Daemon, import_image

IMAGE = "busybox:latest"
BASE = 1879048192  # src/sandbox/uids.h: SBX_UIDS_BASE
COUNT = 65536


def sh(sb, script):
    r = sb.exec("/bin/sh", "-c", script)
    assert r.exit_code == 0, r.stderr_text
    return r.stdout_text


def uid_map(sb):
    inside, host, n = sh(sb, "cat /proc/self/uid_map").split()
    assert sh(sb, "cat /proc/self/gid_map").split() == [inside, host, n]
    return int(inside), int(host), int(n)


def host_uids(pid):
    with open(f"/proc/{pid}/status") as f:
        line = next(x for x in f if x.startswith("Uid:"))
    return [int(v) for v in line.split()[1:]]


def row_uid_base(d, sid):
    db = sqlite3.connect(os.path.join(d.state_dir, "warren.db"), timeout=10)
    try:
        return db.execute("SELECT uid_base, init_pid FROM sandboxes WHERE id = ?",
                          (sid,)).fetchone()
    finally:
        db.close()


def test_root_inside_is_an_unprivileged_host_uid(d, client):
    sb = client.create(image=IMAGE, entrypoint=["sleep", "infinity"])
    try:
        inside, host, n = uid_map(sb)
        assert (inside, n) == (0, COUNT)
        assert host >= BASE and (host - BASE) % COUNT == 0
        assert sh(sb, "id -u; id -g").split() == ["0", "0"]
        base, pid = row_uid_base(d, sb.id)
        assert base == host
        # init and everything it runs are the range's first uid on the host
        assert host_uids(pid) == [host] * 4
    finally:
        sb.terminate()


def sandbox_pid(sb):
    """A host pid of a process in the sandbox's cgroup (its init)."""
    for pid in sorted(os.listdir("/proc"), key=lambda p: int(p) if p.isdigit() else 0):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % pid) as f:
                if "/warren/" + sb.id + "\n" in f.read():
                    return int(pid)
        except OSError:
            pass
    raise AssertionError("no process of " + sb.id)


def test_files_written_inside_are_owned_by_the_range(d, client):
    sb = client.create(image=IMAGE, entrypoint=["sleep", "infinity"])
    try:
        _, base, _ = uid_map(sb)
        sh(sb, "echo hi > /made; mkdir -p /home/u; echo x > /home/u/f; "
               "chown 1000:2000 /home/u/f; chown 1000:1000 /home/u; echo y >> /etc/passwd")
        # the writable layer is the sandbox's own ext4 image (docs/runtime.md
        # "The writable layer"), attached in its mount namespace: the host
        # sees it through a sandbox process's root
        upper = "/proc/%d/root" % sandbox_pid(sb)
        st = os.lstat(os.path.join(upper, "made"))
        assert (st.st_uid, st.st_gid) == (base, base)
        st = os.lstat(os.path.join(upper, "home/u/f"))
        assert (st.st_uid, st.st_gid) == (base + 1000, base + 2000)
        st = os.lstat(os.path.join(upper, "etc/passwd"))  # copied up from the image
        assert (st.st_uid, st.st_gid) == (base, base)
        # the file API shows and takes ids as the sandbox sees them
        assert sb.files.stat("/home/u/f").uid == 1000
        assert sb.files.stat("/home/u/f").gid == 2000
        assert sb.files.stat("/made").uid == 0
        sb.files.write("/home/u/g", b"z", user="1000:1000")
        st = os.lstat(os.path.join(upper, "home/u/g"))
        assert (st.st_uid, st.st_gid) == (base + 1000, base + 1000)
        assert sh(sb, "stat -c '%u:%g' /home/u/g").strip() == "1000:1000"
        # a file written by the API with no owner is the sandbox user's (root)
        sb.files.write("/api-made", b"z")
        assert os.lstat(os.path.join(upper, "api-made")).st_uid == base
        assert sh(sb, "stat -c '%u' /api-made").strip() == "0"
    finally:
        sb.terminate()


def test_two_sandboxes_never_share_a_range(d, client):
    sbs = [client.create(image=IMAGE, entrypoint=["sleep", "infinity"]) for _ in range(4)]
    try:
        ranges = [uid_map(sb)[1] for sb in sbs]
        assert len(set(ranges)) == len(ranges)
        for a in ranges:
            for b in ranges:
                assert a == b or abs(a - b) >= COUNT
        # one sandbox cannot see or signal another's processes as its own
        # uid: they are different host uids
        pids = [row_uid_base(d, sb.id)[1] for sb in sbs]
        assert len({host_uids(p)[0] for p in pids}) == len(pids)
    finally:
        for sb in sbs:
            sb.terminate()


def test_the_sandbox_cannot_change_its_mapping_or_setns(client):
    sb = client.create(image=IMAGE, entrypoint=["sleep", "infinity"])
    try:
        out = sh(sb, "echo '0 0 1' > /proc/self/uid_map 2>/dev/null || echo uid-refused; "
                     "echo '0 0 1' > /proc/1/uid_map 2>/dev/null || echo init-refused; "
                     "echo deny > /proc/self/setgroups 2>/dev/null || echo setgroups-refused; "
                     "nsenter -t 1 -U true 2>/dev/null || echo setns-refused; "
                     "unshare -U true 2>/dev/null || echo unshare-refused")
        assert out.split() == ["uid-refused", "init-refused", "setgroups-refused",
                               "setns-refused", "unshare-refused"]
    finally:
        sb.terminate()


def test_exec_as_users_ptys_and_volumes(client):
    vol = wr.Volume("userns-" + uuid.uuid4().hex[:6], client)
    vol.create()
    sb = client.run(wr.Sandbox(image=IMAGE).mount_volume(vol.name, "/data"))
    try:
        r = sb.exec("id", "-u", user="nobody")
        assert r.stdout_text.strip() == "65534"
        sh(sb, "echo v > /data/v; mkdir /data/d; chown 1000:1000 /data/d")
        # the volume keeps the ids the sandbox gave (its mount is idmapped)
        assert sh(sb, "stat -c '%u:%g' /data/v /data/d").split() == ["0:0", "1000:1000"]
        assert "idmapped" in sh(sb, "grep ' /data ' /proc/self/mountinfo")
        p = sb.exec_start("sh", "-c", "tty; stat -c %u $(tty); exit 3", pty=True,
                          window=(80, 24))
        events = list(p.output())
        out = "".join(ev.stdout or "" for ev in events)
        assert "/dev/pts/" in out and events[-1].exit_code == 3, out
    finally:
        sb.terminate()
    # another sandbox (another range) sees the same ids in the volume
    sb = client.run(wr.Sandbox(image=IMAGE).mount_volume(vol.name, "/data"))
    try:
        assert sh(sb, "stat -c '%u:%g' /data/v /data/d").split() == ["0:0", "1000:1000"]
        sh(sb, "echo w >> /data/v")
    finally:
        sb.terminate()
        vol.delete()


def test_snapshot_layer_has_the_ids_inside(client):
    sb = client.create(image=IMAGE, entrypoint=["sleep", "infinity"])
    name = "userns-snap-" + uuid.uuid4().hex[:6]
    try:
        sh(sb, "mkdir -p /srv; echo s > /srv/s; chown 1000:1000 /srv/s")
        img = sb.snapshot(name)
    finally:
        sb.terminate()
    sb = client.create(image=name, entrypoint=["sleep", "infinity"])
    try:
        assert sh(sb, "stat -c '%u:%g' /srv/s /srv").split() == ["1000:1000", "0:0"]
    finally:
        sb.terminate()
    assert img


def test_ranges_are_relearned_after_a_restart():
    from test_lifecycle import Restartable
    life = Restartable()
    try:
        life.start()
        import_image(life, IMAGE)
        with wr.SandboxClient(life.unix_addr) as c:
            kept = c.create(image=IMAGE, entrypoint=["sleep", "infinity"])
            kept_base = uid_map(kept)[1]
        life.kill9()
        life.start()
        with wr.SandboxClient(life.unix_addr) as c:
            h = c.get(id=kept.id)
            assert uid_map(h)[1] == kept_base
            # new sandboxes never get the surviving one's range
            news = [c.create(image=IMAGE, entrypoint=["sleep", "infinity"]) for _ in range(3)]
            try:
                assert kept_base not in [uid_map(s)[1] for s in news]
            finally:
                for s in news:
                    s.terminate()
            h.terminate()
    finally:
        life.destroy()


def test_userns_off_runs_sandbox_root_as_host_root():
    dd = Daemon(extra_args=["--userns=off"])
    try:
        import_image(dd, IMAGE)
        with wr.SandboxClient(dd.unix_addr) as c:
            sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"])
            try:
                assert uid_map(sb) == (0, 0, 4294967295)
                assert row_uid_base(dd, sb.id)[0] == 0
            finally:
                sb.terminate()
    finally:
        dd.stop()


def test_warm_pool_entries_have_ranges_of_their_own():
    dd = Daemon(extra_args=["--warm-pool", "2"])
    try:
        import_image(dd, IMAGE)
        with wr.SandboxClient(dd.unix_addr) as c:
            sbs = [c.create(image=IMAGE, entrypoint=["sleep", "infinity"]) for _ in range(5)]
            try:
                ranges = [uid_map(sb)[1] for sb in sbs]
                assert len(set(ranges)) == len(ranges)
                assert all(r >= BASE and (r - BASE) % COUNT == 0 for r in ranges)
                # each recorded, as the host sees its init
                for sb, r in zip(sbs, ranges):
                    base, pid = row_uid_base(dd, sb.id)
                    assert base == r and host_uids(pid) == [r] * 4
            finally:
                for sb in sbs:
                    sb.terminate()
    finally:
        dd.stop()


def test_two_warrends_on_one_host_never_share_a_range(d, client):
    """Ranges are locked host-wide (/run/warren/uid-ranges): a second
    warrend skips those the first one uses."""
    mine = [client.create(image=IMAGE, entrypoint=["sleep", "infinity"]) for _ in range(2)]
    dd = Daemon()
    try:
        import_image(dd, IMAGE)
        with wr.SandboxClient(dd.unix_addr) as c:
            theirs = [c.create(image=IMAGE, entrypoint=["sleep", "infinity"])
                      for _ in range(2)]
            try:
                ranges = [uid_map(sb)[1] for sb in mine + theirs]
                assert len(set(ranges)) == len(ranges), ranges
            finally:
                for sb in theirs:
                    sb.terminate()
    finally:
        dd.stop()
        for sb in mine:
            sb.terminate()


def test_a_long_run_of_ranges_held_elsewhere_is_skipped():
    """Every warrend starts its search at the first range: one that meets
    more ranges held by other warrends than it used to give up after (64)
    still finds a free one past them."""
    import fcntl
    held = []
    os.makedirs("/run/warren/uid-ranges", exist_ok=True)
    dd = None
    try:
        ours = set()
        for slot in range(200):
            fd = os.open("/run/warren/uid-ranges/%d" % slot, os.O_RDWR | os.O_CREAT, 0o600)
            held.append(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                ours.add(slot)
            except BlockingIOError:
                pass  # another warrend on the host holds it: as busy
        assert len(ours) >= 100
        dd = Daemon()
        import_image(dd, IMAGE)
        with wr.SandboxClient(dd.unix_addr) as c:
            sb = c.create(image=IMAGE)
            try:
                # the create found a range (it used to fail with "all 4094
                # uid ranges are in use") and not one of ours
                slot = (uid_map(sb)[1] - BASE) // COUNT
                assert slot not in ours, slot
            finally:
                sb.terminate()
    finally:
        if dd:
            dd.stop()
        for fd in held:
            os.close(fd)
