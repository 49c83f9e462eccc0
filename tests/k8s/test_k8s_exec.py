"""The host class's exec tests (tests/e2e/test_exec.py, test_exec_sessions.py),
the same test code, on compute_class K8S: every exec goes through the Pod's
warren-relay and warrend's bridge (docs/k8s.md "Exec on Pods"). Only the
`sandbox` fixture differs: a busybox Pod instead of a host sandbox."""
import importlib.util
import pathlib

import pytest

import warren as wr
from conftest import BUSYBOX

E2E = pathlib.Path(__file__).resolve().parents[1] / "e2e"


def _load(name):
    spec = importlib.util.spec_from_file_location("k8s_" + name, E2E / (name + ".py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


_exec = _load("test_exec")
_sessions = _load("test_exec_sessions")


@pytest.fixture
def sandbox(client):
    sb = client.create(image=BUSYBOX, compute_class=wr.ComputeClass.K8S)
    yield sb
    sb.terminate(grace_period_seconds=1)


@pytest.fixture(scope="module")
def sandbox_daemon(d):
    return d


# tests/e2e/test_exec.py
test_exit_codes = _exec.test_exit_codes
test_death_by_signal_reported = _exec.test_death_by_signal_reported
test_missing_program_is_exit_127 = _exec.test_missing_program_is_exit_127
test_streams_separate_and_ordered = _exec.test_streams_separate_and_ordered
test_stdin_eof_delivered = _exec.test_stdin_eof_delivered
test_timeout_kills_process_group = _exec.test_timeout_kills_process_group
test_signal_to_running_process = _exec.test_signal_to_running_process
test_100_concurrent_execs = _exec.test_100_concurrent_execs

# tests/e2e/test_exec_sessions.py
test_kill9_client_reattach_100mb_byte_exact = _sessions.test_kill9_client_reattach_100mb_byte_exact
test_exec_ids_unique_and_listed = _sessions.test_exec_ids_unique_and_listed
test_detached_survives_client_and_takes_stdin_again = \
    _sessions.test_detached_survives_client_and_takes_stdin_again
test_not_detached_dies_with_its_client = _sessions.test_not_detached_dies_with_its_client
test_finished_exec_replays_tail_and_exit = _sessions.test_finished_exec_replays_tail_and_exit
test_second_attach_takes_over = _sessions.test_second_attach_takes_over
test_old_offset_reports_gap = _sessions.test_old_offset_reports_gap
test_nobody_reading_blocks_the_process = _sessions.test_nobody_reading_blocks_the_process
test_signal_by_name_and_number = _sessions.test_signal_by_name_and_number
test_bad_signal_names_rejected = _sessions.test_bad_signal_names_rejected
test_group_signal_kills_the_whole_tree = _sessions.test_group_signal_kills_the_whole_tree
test_plain_signal_spares_the_group = _sessions.test_plain_signal_spares_the_group
test_timeout_reported_within_100ms = _sessions.test_timeout_reported_within_100ms
test_pty_window_and_resize = _sessions.test_pty_window_and_resize


# tests/e2e/test_sdk.py: the seed README's examples (quick start, run and
# wait, streaming, interactive stdin, signals, options). Their client makes
# every sandbox a Pod: create() gets compute_class K8S and the cluster's
# busybox (the same busybox as the host class's image, see cluster.py).
_sdk = _load("test_sdk")


class _K8sClient:
    def __init__(self, c):
        self._c = c

    def create(self, *a, **kw):
        if kw.get("image") == _sdk.IMAGE:
            kw["image"] = BUSYBOX
        kw.setdefault("compute_class", wr.ComputeClass.K8S)
        return self._c.create(*a, **kw)

    def __getattr__(self, name):
        return getattr(self._c, name)


@pytest.fixture
def seed_client(client):
    return _K8sClient(client)


def test_quick_start(seed_client):
    _sdk.test_quick_start(seed_client)


test_run_and_wait = _sdk.test_run_and_wait
test_stream_output = _sdk.test_stream_output
test_interactive = _sdk.test_interactive
test_signals = _sdk.test_signals
test_options = _sdk.test_options
