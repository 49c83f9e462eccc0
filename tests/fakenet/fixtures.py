"""pytest fixtures of the fake internet. In a conftest.py:

    import sys, pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/
    from fakenet.fixtures import fakenet, fakenet_client, fakenet_mark  # noqa: F401
"""
import os
import shutil

import pytest

_MISSING = [t for t in ("ip", "nsenter", "setpriv", "unshare", "git", "curl") if not shutil.which(t)]


@pytest.fixture(scope="session")
def fakenet():
    """One bed for the whole session (started ~1 s, stopped at the end)."""
    if os.geteuid() != 0:
        pytest.skip("the fake internet needs root (network namespaces)")
    if _MISSING:
        pytest.skip(f"the fake internet needs {', '.join(_MISSING)} (scripts/deps.sh installs them)")
    from .bed import FakeNet   # imported here: a conftest importing the fixtures stays light

    bed = FakeNet()
    bed.start()
    try:
        yield bed
    finally:
        bed.stop()


@pytest.fixture
def fakenet_client(fakenet):
    """The bed's default client netns (fakenet.Client)."""
    return fakenet.client


@pytest.fixture
def fakenet_mark(fakenet):
    """A log Mark taken at the start of the test."""
    return fakenet.mark()
