"""WARREN_DROP=1 for test modules that need images: storing image layers
under --user is not built yet (docs/privsep.md, "Image layers under
--user: refused"), so the images are imported by a warrend that does not
drop, which is then stopped, and the dropped one starts on the same state
dir (as tests/e2e/test_privsep_drop.py's imported_first does). Without
WARREN_DROP the caller uses the ordinary fixtures."""
import contextlib
import os

from conftest import import_image


@contextlib.contextmanager
def imported_then_dropped(images):
    """A running dropped warrend (test_lifecycle.Restartable: unix_addr,
    state_dir, proc, stop) whose state dir holds images, a list of
    (name, rootfs_extra) imported before the drop."""
    from test_lifecycle import Restartable

    life = Restartable()
    os.chmod(life.tmp, 0o711)
    user = os.environ.pop("WARREN_USER", None)
    try:
        life.start(terminate_on_exit=True, extra=["--privsep"])
        for name, extra in images:
            import_image(life, name, extra)
        life.stop()
    finally:
        if user is not None:
            os.environ["WARREN_USER"] = user
    try:
        life.start(terminate_on_exit=True)
        yield life
    finally:
        life.destroy()


@contextlib.contextmanager
def module_daemon(images):
    """A test module's own warrend with images (as conftest's `d`): under
    WARREN_DROP imported before the drop (above), else a plain Daemon."""
    from conftest import DROP, Daemon

    if DROP:
        with imported_then_dropped(images) as life:
            yield life
        return
    dd = Daemon()
    try:
        for name, extra in images:
            import_image(dd, name, extra)
        yield dd
    finally:
        dd.stop()
