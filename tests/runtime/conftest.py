"""Fixtures for the runtime tests: drive tests/tools/wr-sandbox (real
namespaces, overlayfs, cgroups, seccomp) against a busybox rootfs.

WARREN_BUILD selects the meson build dir (default build/). Needs root; the
whole directory is skipped otherwise.
"""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("WARREN_BUILD", ROOT / "build"))
WR_SANDBOX = BUILD / "tests/tools/wr-sandbox"
PROBE = BUILD / "tests/probe/warren-probe"
# Sandboxes run in a user namespace (as warrend's do by default), each
# run of this suite on a range of its own below warrend's;
# WARREN_TEST_USERNS=0 runs them without one.
USERNS = int(os.environ.get("WARREN_TEST_USERNS",
                            0x60000000 + (os.getpid() % 4096) * 65536))
SANITIZED = os.environ.get("WARREN_SANITIZED") == "1"


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="runtime tests need root")
        for item in items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tool():
    if not WR_SANDBOX.exists():
        pytest.fail(f"{WR_SANDBOX} is not built")
    return str(WR_SANDBOX)


@pytest.fixture(scope="session")
def workdir():
    d = tempfile.mkdtemp(prefix="wr-rt-test-")
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def rootfs(workdir):
    d = workdir / "rootfs"
    subprocess.run([str(ROOT / "tests/images/busybox-rootfs.sh"), str(d)], check=True)
    return d


@pytest.fixture(scope="session")
def probe_layer(workdir):
    """A layer holding /bin/warren-probe (stacked above the rootfs)."""
    if not PROBE.exists():
        pytest.fail(f"{PROBE} is not built")
    d = workdir / "probe-layer"
    (d / "bin").mkdir(parents=True)
    shutil.copy(PROBE, d / "bin/warren-probe")
    return d


class Runner:
    def __init__(self, tool, rootfs):
        self.tool = tool
        self.rootfs = rootfs

    def argv(self, cmd, layers=(), opts=()):
        a = [self.tool, "run", "--rootfs", str(self.rootfs)]
        if USERNS and not any(str(o).startswith("--userns") for o in opts):
            a += ["--userns", str(USERNS)]
        for layer in layers:
            a += ["--layer", str(layer)]
        a += list(opts)
        return a + ["--"] + list(cmd)

    def run(self, cmd, layers=(), opts=(), input=None, timeout=60):
        return subprocess.run(self.argv(cmd, layers, opts), input=input,
                              capture_output=True, timeout=timeout)

    def sh(self, script, **kw):
        return self.run(["/bin/sh", "-c", script], **kw)

    def probe(self, layers, opts=()):
        r = self.run(["/bin/warren-probe"], layers=[*layers], opts=opts)
        assert r.returncode == 0, r.stderr.decode()
        return json.loads(r.stdout)


@pytest.fixture
def sandbox(tool, rootfs):
    return Runner(tool, rootfs)


def tree_digest(path):
    """Hash of every name, type, mode and content under path (no following)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            h.update(f"{os.path.relpath(p, path)}\0{st.st_mode}\0{st.st_uid}\0".encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def host_state():
    """What wr-sandbox runs could leave behind on the host. Only objects
    named after wr-sandbox ("wrs-<pid>-<n>" ids, "wr-sandbox.*" dirs) are
    counted, so that other tests running in parallel do not interfere."""
    procs = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                if "/warren/wrs-" in f.read():
                    procs.append(int(pid))
        except OSError:
            pass
    cg = []
    for base in ("/sys/fs/cgroup/warren", "/sys/fs/cgroup/unified/warren",
                 "/sys/fs/cgroup/pids/warren", "/sys/fs/cgroup/memory/warren",
                 "/sys/fs/cgroup/cpu/warren", "/sys/fs/cgroup/freezer/warren",
                 "/sys/fs/cgroup/cpuacct/warren"):
        if os.path.isdir(base):
            cg += [os.path.join(base, d) for d in os.listdir(base)
                   if d.startswith("wrs-") and os.path.isdir(os.path.join(base, d))]
    with open("/proc/self/mountinfo") as f:
        mounts = [line for line in f if "wr-sandbox." in line]
    tmp = [d for d in os.listdir("/tmp") if d.startswith("wr-sandbox.")]
    return {"procs": sorted(procs), "cgroups": sorted(cg), "mounts": mounts,
            "tmp_dirs": sorted(tmp)}
