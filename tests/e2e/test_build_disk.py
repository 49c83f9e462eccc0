"""A build step that fills the disk (issue 14, hostile inputs): warrend's
disk guard stops it once the state dir's file system has less than
--build-min-free left, the build fails naming why, and nothing of the
step is kept (no layer, image, sandbox, mount, cgroup or sandbox dir)."""
import os
import tempfile
import time

import pytest

import warren as wr
from warren import Image

from conftest import Daemon, import_image
from test_build import IMAGE
from test_build_dockerfile import layer_dirs, nothing_left

MiB = 1 << 20


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


@pytest.fixture(scope="module")
def d():
    tmp = tempfile.gettempdir()  # where Daemon puts its state dir
    # the guard trips once the step has written ~256 MiB more than now
    # (other writers on the machine only make it trip sooner)
    floor = free_bytes(tmp) - 256 * MiB
    if floor <= 0:
        pytest.skip("less than 256 MiB free under %s" % tmp)
    dm = Daemon(extra_args=["--build-min-free", str(floor)])
    try:
        import_image(dm, IMAGE)
        yield dm
    finally:
        dm.stop()


def test_step_filling_the_disk_is_stopped(client, d):
    layers, n_images = layer_dirs(d), len(client.list_images())
    before = free_bytes(d.state_dir)
    t = time.perf_counter()
    with pytest.raises(wr.WarrenError) as ei:
        # 8 GiB: far past the guard, and less than the disk holds (the
        # test checks that much is free first)
        if before < 16 * 1024 * MiB:
            pytest.skip("needs 16 GiB free")
        client.build_image(Image.base(IMAGE).run_commands(
            "echo writing; dd if=/dev/zero of=/fill bs=1M count=8192"), step_timeout=300)
    msg = str(ei.value)
    assert "filling the disk" in msg and "--build-min-free" in msg, msg
    assert time.perf_counter() - t < 120
    assert not any(nothing_left(d, client, layers, n_images).values())
    # the space came back
    assert free_bytes(d.state_dir) > before - 64 * MiB


def test_guard_lets_small_steps_build(client):
    # above the floor the guard stays out of the way
    info = client.build_image(Image.base(IMAGE).run_commands("echo small > /small"))
    assert info.id.startswith("sha256:")
