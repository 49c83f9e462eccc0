"""Warren's fake internet test bed: see README.md.

    from fakenet import FakeNet            # with tests/ on sys.path
    from fakenet.fixtures import fakenet   # the session-scoped pytest fixture

Names are loaded on first use, so importing the fixtures costs nothing
until a test asks for the bed.
"""
__all__ = ["Client", "FakeNet", "Mark", "cleanup_stale"]


def __getattr__(name):
    if name in __all__:
        from . import bed
        return getattr(bed, name)
    raise AttributeError(name)
