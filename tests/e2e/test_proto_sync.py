"""The committed Python stubs match proto/ (regenerated into a temp dir)."""
import filecmp
import os
import pathlib
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _tree(d):
    out = {}
    for p in pathlib.Path(d).rglob("*"):
        if p.is_file() and "__pycache__" not in p.parts:
            out[str(p.relative_to(d))] = p.read_bytes()
    return out


def test_python_stubs_in_sync():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "_proto")
        subprocess.run([str(ROOT / "scripts/gen-python-proto.sh"), out], check=True)
        fresh = _tree(out)
        committed = _tree(ROOT / "python/warren/_proto")
        stale = sorted(k for k in fresh.keys() | committed.keys() if fresh.get(k) != committed.get(k))
        assert not stale, "python/warren/_proto is stale; run scripts/gen-python-proto.sh: %s" % stale
