"""Fixtures for the warren-init tests; the harness itself is initctl.py."""
import os

import pytest

from initctl import INIT, Init


@pytest.fixture(params=["pid1", "subreaper", "seccomp"])
def init(request):
    if not os.path.exists(INIT):
        pytest.skip(f"{INIT} not built")
    if request.param == "pid1" and os.geteuid() != 0:
        pytest.skip("pid namespaces need root")
    if request.param == "seccomp" and os.uname().machine != "x86_64":
        pytest.skip("the test filter is x86_64 only")
    i = Init(request.param)
    yield i
    i.stop()


@pytest.fixture
def ctl(init):
    return init.connect()
