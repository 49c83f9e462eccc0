"""`make run` (scripts/run.sh) keeps a dropped warrend running: when
warren-priv dies, the dropped warrend exits 3 (it cannot start another,
docs/privsep.md) and run.sh starts it again, dropped again, and the new one
recovers the sandboxes that ran on."""
import os
import signal
import subprocess
from pathlib import Path

import pytest

import warren as wr
from conftest import WARREND, import_image, started
from test_fetch import children
from test_lifecycle import Restartable, sandbox_pids, wait_for

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(WARREND).resolve().parents[2]


def owner(pid):
    try:
        return os.stat("/proc/%d" % pid).st_uid
    except FileNotFoundError:
        return None


def has_user(name):
    return subprocess.run(["id", name], capture_output=True).returncode == 0


@pytest.mark.skipif(not has_user("warren"), reason="no user warren (scripts/warren-user.sh)")
def test_make_run_starts_a_dropped_warrend_again_when_warren_priv_is_lost():
    life = Restartable()
    os.chmod(life.tmp, 0o711)  # run.sh drops only when the user reaches the state dir
    run = None
    sb_id = None
    try:
        # the image run.sh looks for, imported by a warrend of our own first
        life.start(terminate_on_exit=False)
        import_image(life, "sandbox:latest")
        life.stop()

        log_path = os.path.join(life.tmp, "run.log")
        out = open(log_path, "wb")
        env = dict(os.environ, WARREN_TERMINATE_ON_EXIT="1", WARREND_ARGS="--warm-pool 1")
        env.pop("WARREN_RUN_AS_ROOT", None)
        run = started(subprocess.Popen(
            ["bash", str(ROOT / "scripts/run.sh"), str(BUILD), life.state_dir, life.unix_addr],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        out.close()

        def log():
            with open(log_path, "rb") as f:
                return f.read().decode(errors="replace")

        wait_for(lambda: "run: warrend is up" in log() or run.poll() is not None, 60,
                 "run.sh's 'warrend is up'")
        assert run.poll() is None, log()
        assert "WARNING" not in log(), log()
        (first,) = children(run.pid, "warrend")
        wait_for(lambda: owner(first) not in (0, None), 30, "the first warrend's drop")
        (priv,) = children(first, "warren-priv")
        assert owner(priv) == 0

        with wr.SandboxClient(life.unix_addr) as c:
            sb = c.create(image="sandbox:latest", entrypoint=["sleep", "infinity"])
            sb_id = sb.id
            assert sb.exec("echo", "before").stdout_text == "before\n"

        os.kill(priv, signal.SIGKILL)
        (again,) = wait_for(lambda: [p for p in children(run.pid, "warrend") if p != first], 30,
                            "a second warrend")
        assert "warrend exited 3 (warren-priv was lost); starting it again" in log(), log()
        assert sandbox_pids({sb_id}), "the sandbox did not outlive its warrend"
        # started as root (warren-priv and the listeners first), then dropped
        wait_for(lambda: owner(again) not in (0, None), 30, "the second warrend's drop")
        assert run.poll() is None, log()

        # the new warrend serves the recovered sandbox
        def serves():
            try:
                with wr.SandboxClient(life.unix_addr) as c:
                    return c.get(sb_id).exec("echo", "after").stdout_text == "after\n"
            except wr.WarrenError:
                return False
        wait_for(serves, 30, "the recovered sandbox's exec")
        with wr.SandboxClient(life.unix_addr) as c:
            c.get(sb_id).terminate()
        sb_id = None
    finally:
        if run is not None and run.poll() is None:
            os.kill(run.pid, signal.SIGTERM)  # run.sh's trap stops its warrend
            try:
                run.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait()
        life.destroy()  # terminates what is left (sb_id after a failure)
