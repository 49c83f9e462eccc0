"""The bounded writable layer (issue 16, gap 0): every sandbox's writes
are bounded by default (warrend --default-disk, a sparse ext4 image per
sandbox), --default-disk 0 is unbounded, a sandbox may ask for more than
the default, snapshots and the change journal work on a bounded layer,
and teardown, the warm pool and crash recovery leave no loop device,
mount or image behind."""
import glob
import os
import signal
import time

import pytest

import warren as wr
from conftest import Daemon, import_image
from test_lifecycle import Restartable, leftovers, loop_devices, NOTHING

MiB = 1 << 20
DEFAULT = 64 * MiB


def allocated(path):
    """Bytes the host file system holds for the files under path."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in files + dirs:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def wait_gone(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while pred() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not pred()


@pytest.fixture(scope="module")
def d():
    dm = Daemon(extra_args=["--default-disk", "64Mi", "--warm-pool", "1"])
    try:
        import_image(dm, "busybox:latest")
        yield dm
    finally:
        dm.stop()
    # the pool's entry and every sandbox are gone with the daemon
    assert loop_devices(dm.state_dir) == []


def test_default_disk_bounds_a_sandbox_without_limit(d, client):
    sb = client.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
    sdir = os.path.join(d.state_dir, "sandboxes", sb.id)
    try:
        before = allocated(sdir)
        r = sb.exec("sh", "-c", "dd if=/dev/zero of=/big bs=1M count=200; echo rc=$?; "
                    "ls -l /big | awk '{print $5}'", timeout_secs=120)
        assert "No space left" in r.stderr_text, r
        lines = r.stdout_text.split()
        assert lines[0] != "rc=0", r
        assert int(lines[-1]) <= DEFAULT
        # the host holds no more than the bound for it
        grown = allocated(sdir) - before
        assert grown <= DEFAULT, grown
        assert os.path.getsize(os.path.join(sdir, "disk.img")) == DEFAULT
        # full is not broken: space freed is usable again
        r = sb.exec("sh", "-c", "rm /big && echo ok > /small && cat /small")
        assert r.stdout_text == "ok\n", r
        # /tmp is its own tmpfs, not the layer; the layer is not RAM: the
        # sandbox's memory use did not grow by what it wrote
        assert len(loop_devices(sdir)) == 1
    finally:
        sb.terminate(grace_period_seconds=0)
    assert wait_gone(lambda: os.path.exists(sdir))
    assert wait_gone(lambda: loop_devices(sdir)), loop_devices(sdir)


def test_a_sandbox_may_ask_for_more_than_the_default(d, client):
    sb = client.create(image="busybox:latest", entrypoint=["sleep", "infinity"],
                       disk="160Mi")
    sdir = os.path.join(d.state_dir, "sandboxes", sb.id)
    try:
        r = sb.exec("sh", "-c", "dd if=/dev/zero of=/big bs=1M count=100 && sync && echo ok",
                    timeout_secs=120)
        assert r.stdout_text.strip().endswith("ok"), r
        r = sb.exec("sh", "-c", "dd if=/dev/zero of=/big2 bs=1M count=100; echo rc=$?",
                    timeout_secs=120)
        assert "No space left" in r.stderr_text, r
        assert os.path.getsize(os.path.join(sdir, "disk.img")) == 160 * MiB
    finally:
        sb.terminate(grace_period_seconds=0)
    assert wait_gone(lambda: loop_devices(sdir)), loop_devices(sdir)


def test_disk_out_of_range_is_refused(d, client):
    with pytest.raises(wr.InvalidArgument) as ei:
        client.create(image="busybox:latest", disk="1Mi")
    assert "resources.disk" in str(ei.value) and "8Mi" in str(ei.value)
    with pytest.raises(wr.InvalidArgument) as ei:
        client.create(image="busybox:latest", disk="100Ti")
    assert "resources.disk" in str(ei.value) and "8Ti" in str(ei.value)


def test_only_the_default_size_has_a_template(d, client):
    """Layers of the default size are copies of one template; any other
    size is a mkfs of its own, so no client can fill the templates' dir."""
    sbs = [client.create(image="busybox:latest", entrypoint=["sleep", "infinity"],
                         disk=size) for size in ("24Mi", "40Mi")]
    try:
        tdir = os.path.join(d.state_dir, "disk-templates")
        assert os.listdir(tdir) == [".disk-%d.img" % DEFAULT], os.listdir(tdir)
        for sb, size in zip(sbs, (24, 40)):
            r = sb.exec("sh", "-c", "dd if=/dev/zero of=/f bs=1M count=64; echo rc=$?")
            assert "No space left" in r.stderr_text, r
            assert os.path.getsize(os.path.join(d.state_dir, "sandboxes", sb.id,
                                                "disk.img")) == size * MiB
    finally:
        for sb in sbs:
            sb.terminate(grace_period_seconds=0)


def test_snapshot_and_journal_on_a_bounded_layer(d, client):
    sb = client.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
    try:
        assert os.path.exists(os.path.join(d.state_dir, "sandboxes", sb.id, "disk.img"))
        sb.exec("sh", "-c", "echo hello > /etc/greeting")
        img = sb.snapshot(name="disk-snap:v1")
        child = client.create(image=img.id, entrypoint=["sleep", "infinity"])
        try:
            assert child.exec("cat", "/etc/greeting").stdout_text == "hello\n"
        finally:
            child.terminate(grace_period_seconds=0)
        r = sb.exec("sh", "-c", "echo changed > /etc/greeting; echo new > /root/new",
                    journal=True)
        changes = {c.path: c.kind for c in sb.changes(r.exec_id)}
        assert changes.get("/etc/greeting") == "modified", changes
        assert changes.get("/root/new") == "created", changes
        sb.rollback(r.exec_id)
        assert sb.exec("cat", "/etc/greeting").stdout_text == "hello\n"
        assert sb.exec("sh", "-c", "test -e /root/new; echo $?").stdout_text == "1\n"
    finally:
        sb.terminate(grace_period_seconds=0)


def test_default_disk_zero_is_unbounded(fresh_warrend):
    dz = fresh_warrend(extra_args=["--default-disk", "0"])
    import_image(dz, "busybox:latest")
    with wr.SandboxClient(dz.unix_addr) as c:
        sb = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
        try:
            sdir = os.path.join(dz.state_dir, "sandboxes", sb.id)
            assert not os.path.exists(os.path.join(sdir, "disk.img"))
            r = sb.exec("sh", "-c", "dd if=/dev/zero of=/big bs=1M count=80 && echo ok",
                        timeout_secs=120)
            assert r.stdout_text.strip().endswith("ok"), r
            # on the state dir's file system, in the upper dir
            assert os.path.getsize(os.path.join(sdir, "upper", "big")) == 80 * MiB
            assert loop_devices(dz.state_dir) == []
        finally:
            sb.terminate(grace_period_seconds=0)


def test_bad_default_disk_refused():
    with pytest.raises(RuntimeError) as ei:
        Daemon(extra_args=["--default-disk", "1M"])
    assert "--default-disk 1M" in str(ei.value)


def test_crash_recovery_reaps_layers(tmp_path):
    """kill -9 warrend: a sandbox still running is re-attached (its layer
    opened again for a snapshot), one that died meanwhile is cleaned up
    with its image and loop device, and nothing is left at the end."""
    life = Restartable()
    life.start(extra=["--default-disk", "64Mi", "--warm-pool", "2"])
    try:
        import_image(life, "busybox:latest")
        with wr.SandboxClient(life.unix_addr) as c:
            keep = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
            lose = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
            keep.exec("sh", "-c", "echo kept > /etc/kept")
            ids = [keep.id, lose.id]
        rows = {r[0]: r for r in life.rows()}
        assert all(i in rows for i in ids)
        life.kill9()
        # the lost one: its processes die while no warrend runs
        from test_lifecycle import sandbox_pids
        for pid in sandbox_pids([lose.id]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        life.start(extra=["--default-disk", "64Mi", "--warm-pool", "2"])
        lose_dir = os.path.join(life.state_dir, "sandboxes", lose.id)
        assert wait_gone(lambda: os.path.exists(lose_dir))
        assert wait_gone(lambda: loop_devices(lose_dir)), loop_devices(lose_dir)
        with wr.SandboxClient(life.unix_addr) as c:
            kept = c.get(id=keep.id)
            assert kept.exec("cat", "/etc/kept").stdout_text == "kept\n"
            # the host reaches its upper dir again (a new warrend)
            img = kept.snapshot(name="kept-snap:v1")
            child = c.create(image=img.id, entrypoint=["sleep", "infinity"])
            assert child.exec("cat", "/etc/kept").stdout_text == "kept\n"
            child.terminate(grace_period_seconds=0)
            kept.terminate(grace_period_seconds=0)
            ids += [child.id]
        life.stop()
        assert leftovers(life, ids) == NOTHING
        assert loop_devices(life.state_dir) == []
        # the layers' template (one per size) goes with the daemon too
        assert os.listdir(os.path.join(life.state_dir, "disk-templates")) == []
    finally:
        life.destroy()
