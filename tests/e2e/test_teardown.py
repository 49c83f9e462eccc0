"""Teardown that cannot finish at once (issue 16, gap 0): the terminate
succeeds, the host cleanup is retried in the background, and the pending
cleanup is surfaced on the sandbox (status message) and in the metrics
until it is done."""
import os
import subprocess
import tempfile
import time
import urllib.request

import warren as wr
from conftest import free_port, import_image


def metric(port, name):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


def test_failed_teardown_is_retried_and_surfaced(fresh_warrend):
    port = free_port()
    d = fresh_warrend(extra_args=["--admin-listen", "127.0.0.1:%d" % port])
    import_image(d, "busybox:latest")
    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
        sdir = os.path.join(d.state_dir, "sandboxes", sb.id)
        # something mounted inside the sandbox's dir on the host side: the
        # remover never crosses into another mount, so the teardown fails
        blocker = os.path.join(sdir, "upper", "blocker")
        os.makedirs(blocker)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "warren-test", blocker],
                       check=True)
        try:
            sb.terminate()  # succeeds: the sandbox is gone, its dir is not
            # the host cleanup runs after the answer: wait for it to fail
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                info = c.get(id=sb.id).info
                if "host cleanup pending" in info.status_message:
                    break
                time.sleep(0.05)
            assert info.status == wr.SandboxStatus.TERMINATED
            assert "host cleanup pending" in info.status_message, info.status_message
            assert metric(port, "warren_sandbox_teardown_failures_total") == 1
            assert metric(port, "warren_sandbox_cleanup_pending") == 1
            assert os.path.isdir(sdir)
        finally:
            subprocess.run(["umount", blocker], check=True)
        deadline = time.monotonic() + 20
        while os.path.exists(sdir) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not os.path.exists(sdir)
        deadline = time.monotonic() + 5
        while metric(port, "warren_sandbox_cleanup_pending") != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert metric(port, "warren_sandbox_cleanup_pending") == 0
        assert "pending" not in c.get(id=sb.id).info.status_message


def test_deep_tree_terminates_cleanly(fresh_warrend):
    d = fresh_warrend()
    import_image(d, "busybox:latest")
    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create(image="busybox:latest", entrypoint=["sleep", "infinity"])
        r = sb.exec("sh", "-c", "i=0; while [ $i -lt 1200 ]; do mkdir d && cd d || exit 9; "
                    "i=$((i+1)); done; echo ok", timeout_secs=120)
        assert r.stdout_text.strip() == "ok", r.stderr_text
        sb.terminate()
        # the answer comes once every process is gone; the dir follows
        sdir = os.path.join(d.state_dir, "sandboxes", sb.id)
        deadline = time.monotonic() + 10
        while os.path.exists(sdir) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(sdir)
        assert "pending" not in c.get(id=sb.id).info.status_message
