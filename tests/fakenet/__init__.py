"""Warren's fake internet test bed: see README.md.

    from fakenet import FakeNet            # with tests/ on sys.path
    from fakenet.fixtures import fakenet   # the session-scoped pytest fixture
"""
from .bed import Client, FakeNet, Mark, cleanup_stale  # noqa: F401
