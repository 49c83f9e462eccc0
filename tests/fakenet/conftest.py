# The bed's own self-tests. pytest puts tests/ on sys.path (this package has
# an __init__.py, tests/ has none), so `fakenet` imports as a package.
from fakenet.fixtures import fakenet, fakenet_client, fakenet_mark  # noqa: F401
