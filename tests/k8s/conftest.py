"""Fixtures of the K8S compute class suite: one real single-node cluster
for the session (tests/k8s/cluster.py), the RBAC of docs/k8s-rbac.yaml
applied as it is, and warrend daemons that reach the cluster with a token
of that ServiceAccount (so the suite also proves the RBAC is enough).

WARREN_BUILD points at the meson build dir (default: build/)."""
import os
import pathlib
import subprocess
import sys
import time

import pytest
import yaml

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests/e2e"))

import cluster as k8s_cluster  # noqa: E402


def _e2e():
    """tests/e2e/conftest.py (its Daemon), loaded under a name of its own."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("warren_e2e_conftest",
                                                  ROOT / "tests/e2e/conftest.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


_E2E = _e2e()
Daemon, build_path = _E2E.Daemon, _E2E.build_path

NAMESPACE = "warren"
# the relays' callback address (10.98.1.0/24: next to the Pod range, clear
# of everything else the suites use); each warrend gets a port of its own
CALLBACK_IP = "10.98.1.1"
_ports = iter(range(17443, 17543))
INIT_IMAGE = "localhost/warren/init:test"
BUSYBOX = k8s_cluster.BUSYBOX_IMAGE

_KINDS = {
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
}


def apply_rbac(c):
    docs = [d for d in yaml.safe_load_all((ROOT / "docs/k8s-rbac.yaml").read_text()) if d]
    for d in docs:
        path = _KINDS[d["kind"]].format(ns=d["metadata"]["namespace"])
        st, body = c.api("POST", path, d)
        assert st in (200, 201, 409), (d["kind"], st, body)


def sa_token(c, ns=NAMESPACE, name="warrend"):
    st, body = c.api("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (ns, name),
                     {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"expirationSeconds": 7200}})
    assert st in (200, 201), body
    return body["status"]["token"]


@pytest.fixture(scope="session")
def cluster():
    t0 = time.monotonic()
    c = k8s_cluster.Cluster()
    added_ip = False
    try:
        c.start()
        work = c.dir / "images"
        c.import_image(k8s_cluster._tar_dir_image(
            work, INIT_IMAGE, {"/warren-init": build_path("src/init/warren-init"),
                               "/warren-relay": build_path("src/k8s/warren-relay")},
            ["/warren-init"]))
        # where warrend listens for the Pods' warren-relay: an address of
        # this host that Pods reach through their ptp gateway (on lo, so
        # nothing leaves the machine), removed at teardown
        subprocess.run(["ip", "addr", "add", CALLBACK_IP + "/32", "dev", "lo"], check=False)
        added_ip = True
        c.create_namespace(NAMESPACE)
        apply_rbac(c)
        c.kubeconfig_warrend = c.write_kubeconfig(c.dir / "warrend.kubeconfig",
                                                  token=sa_token(c), namespace=NAMESPACE)
        sys.stderr.write("k8s cluster: apiserver ready %.1fs, node ready %.1fs, fixture %.1fs\n"
                         % (c.t_api, c.t_ready, time.monotonic() - t0))
        yield c
    finally:
        if added_ip:
            subprocess.run(["ip", "addr", "del", CALLBACK_IP + "/32", "dev", "lo"], check=False)
        c.stop()


def k8s_args(c, kubeconfig=None, port=None):
    return ["--k8s-kubeconfig", str(kubeconfig or c.kubeconfig_warrend),
            "--k8s-init-image", INIT_IMAGE,
            "--k8s-callback", "%s:%d" % (CALLBACK_IP, port or next(_ports))]


@pytest.fixture(scope="module")
def d(cluster):
    dd = Daemon(extra_args=k8s_args(cluster))
    try:
        yield dd
    finally:
        dd.stop()


@pytest.fixture
def client(d):
    import warren as wr
    with wr.SandboxClient(d.unix_addr) as c:
        yield c


# what the host class's exec tests (tests/e2e/test_exec*.py, run on Pods by
# test_k8s_exec.py) import from "conftest"
SANITIZED, WARREN_CLI, import_image = _E2E.SANITIZED, _E2E.WARREN_CLI, _E2E.import_image
