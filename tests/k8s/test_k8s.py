"""The K8S compute class against a real single-node cluster (conftest.py):
sandboxes as Pods (create/get/list/terminate, resources, env, labels,
lifetimes), the Kubernetes reason when a Pod cannot start, features the
class refuses, a warrend without a cluster, and recovery after kill -9
(re-attach by label, orphans deleted, vanished Pods ended)."""
import base64
import glob
import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest

import warren as wr
from conftest import (BUSYBOX, CALLBACK_IP, INIT_IMAGE, NAMESPACE, Daemon, k8s_args, _E2E,
                      _ports)

K8S = wr.ComputeClass.K8S


def pod_of(cluster, sid):
    pods = cluster.pods(NAMESPACE, "warren.dev/sandbox=" + sid)
    return pods[0] if pods else None


def secret_of(cluster, name):
    st, body = cluster.api("GET", "/api/v1/namespaces/%s/secrets/%s" % (NAMESPACE, name))
    return body if st == 200 else None


def wait_for(pred, timeout=30.0, step=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("timed out waiting for " + what)


def pod_gone(cluster, sid, timeout=40):
    wait_for(lambda: pod_of(cluster, sid) is None, timeout, 0.2, "Pod of %s to go" % sid)


def test_create_get_list_terminate(cluster, client):
    t0 = time.monotonic()
    sb = client.create(image=BUSYBOX, compute_class=K8S, name="k8s-one", cpu="250m",
                       memory="96Mi", env={"GREETING": "hello", "EQ": "a=b"},
                       tags={"team": "ml", "note": "two words"}, lifetime="10m")
    created = time.monotonic() - t0
    info = sb.refresh()
    assert info.status == wr.SandboxStatus.RUNNING, info
    assert info.name == "k8s-one"
    assert info.tags == {"team": "ml", "note": "two words"}
    pod = pod_of(cluster, sb.id)
    assert pod is not None
    assert pod["metadata"]["name"] == "warren-" + sb.id
    labels = pod["metadata"]["labels"]
    assert labels["warren.dev/managed"] == "true"
    assert labels["warren.dev/environment"] == "default"
    assert labels["tag.warren.dev/team"] == "ml"
    assert "tag.warren.dev/note" not in labels  # not a label value: an annotation
    assert pod["metadata"]["annotations"]["tag.warren.dev/note"] == "two words"
    spec = pod["spec"]
    assert 595 <= spec["activeDeadlineSeconds"] <= 600
    main = spec["containers"][0]
    assert main["image"] == BUSYBOX
    assert main["command"][0] == "/.warren/warren-init"
    assert spec["initContainers"][0]["image"] == INIT_IMAGE
    assert main["resources"]["limits"] == {"cpu": "250m", "memory": str(96 << 20)}
    assert main["resources"]["requests"] == {"cpu": "250m", "memory": str(96 << 20)}
    # the env is in a Secret owned by the Pod, never in the Pod spec
    env = {e["name"]: e["value"] for e in main["env"]}
    assert env == {"WARREN_SANDBOX_ID": sb.id}
    secret_name = "warren-%s-env" % sb.id
    assert main["envFrom"] == [{"secretRef": {"name": secret_name}}]
    secret = secret_of(cluster, secret_name)
    assert secret["type"] == "Opaque"
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == \
        {"GREETING": "hello", "EQ": "a=b"}
    owners = wait_for(lambda: secret_of(cluster, secret_name)["metadata"].get("ownerReferences"),
                      10, 0.1, "the Secret's owner")
    assert owners[0]["kind"] == "Pod" and owners[0]["uid"] == pod["metadata"]["uid"]
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["qosClass"] == "Guaranteed"
    # enforced by the kernel: the main container's cgroup has the limits
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("://")[-1]
    uid = pod["metadata"]["uid"]
    mem = glob.glob("/sys/fs/cgroup/memory%s/kubepods*/**/pod%s/%s/memory.limit_in_bytes"
                    % (cluster.cgroup_root, uid, cid), recursive=True) or \
        glob.glob("/sys/fs/cgroup/memory%s/kubepods/pod%s/%s/memory.limit_in_bytes"
                  % (cluster.cgroup_root, uid, cid))
    assert mem, "no memory cgroup for container %s" % cid
    assert int(open(mem[0]).read()) == 96 << 20
    cpu = mem[0].replace("/memory/", "/cpu,cpuacct/").replace("memory.limit_in_bytes",
                                                              "cpu.cfs_quota_us")
    if not os.path.exists(cpu):
        cpu = mem[0].replace("/memory/", "/cpu/").replace("memory.limit_in_bytes",
                                                          "cpu.cfs_quota_us")
    assert int(open(cpu).read()) == 25000  # 250m of a 100 ms period
    # warren-init is PID 1 of the main container and stays up
    cs = pod["status"]["containerStatuses"][0]
    assert cs["name"] == "sandbox" and "running" in cs["state"], cs
    ids = [s.id for s in client.list()]
    assert sb.id in ids
    assert client.get(name="k8s-one").id == sb.id
    print("create -> RUNNING: %.2fs" % created)
    t1 = time.monotonic()
    info = sb.terminate(grace_period_seconds=2)
    assert info.status == wr.SandboxStatus.TERMINATED, info
    assert time.monotonic() - t1 < 30
    assert pod_of(cluster, sb.id) is None
    wait_for(lambda: secret_of(cluster, secret_name) is None, 30, 0.2, "the Secret to go")
    assert client.get(id=sb.id).status == wr.SandboxStatus.TERMINATED
    # idempotent
    assert sb.terminate().status == wr.SandboxStatus.TERMINATED


def test_stored_secret_becomes_a_kubernetes_secret(cluster, client):
    client.set_secret("K8S_TOK", "s3cret-value")
    sb = client.create(image=BUSYBOX, compute_class=K8S,
                       env={"API_TOKEN": wr.Secret.from_name("K8S_TOK"), "PLAIN": "p"})
    name = "warren-%s-env" % sb.id
    pod = pod_of(cluster, sb.id)
    assert "s3cret-value" not in str(pod)
    data = {k: base64.b64decode(v).decode() for k, v in secret_of(cluster, name)["data"].items()}
    assert data == {"API_TOKEN": "s3cret-value", "PLAIN": "p"}
    sb.terminate(grace_period_seconds=1)
    wait_for(lambda: secret_of(cluster, name) is None, 30, 0.2, "the Secret to go")


def test_no_env_no_secret(cluster, client):
    sb = client.create(image=BUSYBOX, compute_class=K8S)
    try:
        assert secret_of(cluster, "warren-%s-env" % sb.id) is None
        assert "envFrom" not in pod_of(cluster, sb.id)["spec"]["containers"][0]
    finally:
        sb.terminate(grace_period_seconds=1)


def test_name_taken(cluster, client):
    sb = client.create(image=BUSYBOX, compute_class=K8S, name="k8s-dup")
    try:
        with pytest.raises(wr.AlreadyExists):
            client.create(image=BUSYBOX, compute_class=K8S, name="k8s-dup")
    finally:
        sb.terminate(grace_period_seconds=1)
    pod_gone(cluster, sb.id)


@pytest.mark.parametrize("opts,feature", [
    (dict(network_policy=wr.NetworkPolicy(allowed_hosts=["example.com"])), "network_policy"),
    (dict(managed_ssh={"gh": wr.SshDest("github.com", "key")}), "managed_ssh"),
    (dict(resource_detectors=[wr.ResourceDetector.GITHUB_PULL_REQUESTS]), "resource_detectors"),
    (dict(block_network=True), "block_network"),
    (dict(journal_execs=True), "journal_execs"),
    (dict(pids=10), "resources.pids"),
    (dict(entrypoint=["sleep", "infinity"]), "entrypoint"),
])
def test_unsupported_features_refused(cluster, client, opts, feature):
    before = len(cluster.pods(NAMESPACE))
    with pytest.raises((wr.InvalidArgument, wr.Unimplemented)) as ei:
        client.create(image=BUSYBOX, compute_class=K8S, **opts)
    msg = ei.value.message if hasattr(ei.value, "message") else str(ei.value)
    assert feature in msg and "K8S" in msg, msg
    assert len(cluster.pods(NAMESPACE)) == before


def test_default_image_refused(cluster, client):
    with pytest.raises(wr.InvalidArgument) as ei:
        client.create(compute_class=K8S)
    assert "image" in str(ei.value) and "K8S" in str(ei.value)


def test_local_image_refused(cluster, d, client):
    _E2E.import_image(d, "k8s-local:1")
    with pytest.raises(wr.FailedPrecondition) as ei:
        client.create(image="k8s-local:1", compute_class=K8S)
    assert "imported" in str(ei.value) and "registry" in str(ei.value), str(ei.value)


def test_image_pull_failure_reports_kubernetes_reason(cluster, client):
    # a loopback registry port nobody listens on: the pull fails at once
    with pytest.raises(wr.FailedPrecondition) as ei:
        client.create(image="127.0.0.1:9/warren/none:1", compute_class=K8S, name="k8s-nopull")
    msg = str(ei.value)
    assert "ErrImagePull" in msg or "ImagePullBackOff" in msg, msg
    rows = [s for s in client.list(name="k8s-nopull")]
    assert rows and rows[0].status == wr.SandboxStatus.FAILED
    assert "ErrImagePull" in rows[0].status_message or "ImagePullBackOff" in rows[0].status_message
    pod_gone(cluster, rows[0].id)


def test_unschedulable_reports_kubernetes_reason(cluster, client):
    with pytest.raises(wr.FailedPrecondition) as ei:
        client.create(image=BUSYBOX, compute_class=K8S, cpu="64", name="k8s-huge")
    assert "Unschedulable" in str(ei.value), str(ei.value)
    rows = client.list(name="k8s-huge")
    assert rows[0].status == wr.SandboxStatus.FAILED
    assert "Unschedulable" in rows[0].status_message and "cpu" in rows[0].status_message
    pod_gone(cluster, rows[0].id)


def test_lifetime_expiry(cluster, client):
    sb = client.create(image=BUSYBOX, compute_class=K8S, lifetime="6s")
    assert sb.refresh().status == wr.SandboxStatus.RUNNING
    info = wait_for(lambda: (lambda i: i if i.status == wr.SandboxStatus.TERMINATED else None)(
        sb.refresh()), 30, 0.2, "lifetime")
    assert "lifetime expired" in info.status_message, info
    pod_gone(cluster, sb.id)


def test_pod_deleted_behind_warrends_back(cluster, client):
    sb = client.create(image=BUSYBOX, compute_class=K8S)
    st, _ = cluster.api("DELETE", "/api/v1/namespaces/%s/pods/warren-%s?gracePeriodSeconds=0"
                        % (NAMESPACE, sb.id))
    assert st == 200
    info = wait_for(lambda: (lambda i: i if i.status == wr.SandboxStatus.TERMINATED else None)(
        sb.refresh()), 30, 0.2, "TERMINATED")
    assert "deleted" in info.status_message or "ended" in info.status_message, info


def test_exec_stdio_and_exit_codes(cluster, client):
    """Exec on a Pod goes through warren-relay (no kubelet exec API):
    stdout, stderr, stdin and exit codes as on the host class."""
    sb = client.create(image=BUSYBOX, compute_class=K8S)
    try:
        r = sb.exec("echo", "hi")
        assert (r.exit_code, r.stdout_text) == (0, "hi\n"), r
        r = sb.exec("sh", "-c", "echo out; echo err >&2; exit 7")
        assert (r.exit_code, r.stdout_text, r.stderr_text) == (7, "out\n", "err\n"), r
        # a numeric user (names are looked up on the host class only)
        r = sb.exec("id", "-u", user="1234")
        assert (r.exit_code, r.stdout_text) == (0, "1234\n"), r
        with pytest.raises(wr.InvalidArgument) as ei:
            sb.exec("id", user="root")
        assert "numeric" in str(ei.value)
        p = sb.exec_start("cat")
        p.write_stdin("from stdin\n")
        p.close_stdin()
        r = p.wait()
        assert (r.exit_code, r.stdout_text) == (0, "from stdin\n"), r
        # more than a window's worth (flow control), both ways
        big = "x" * (1 << 20)
        p = sb.exec_start("sh", "-c", "cat; head -c 600000 /dev/zero | tr '\\0' y")
        for i in range(0, len(big), 65536):
            p.write_stdin(big[i:i + 65536])
        p.close_stdin()
        r = p.wait()
        assert r.exit_code == 0 and r.stdout_text == big + "y" * 600000, \
            (r.exit_code, len(r.stdout_text))
    finally:
        sb.terminate(grace_period_seconds=1)


def test_without_cluster_failed_precondition(cluster):
    dd = Daemon()
    try:
        with wr.SandboxClient(dd.unix_addr) as c:
            with pytest.raises(wr.FailedPrecondition) as ei:
                c.create(image=BUSYBOX, compute_class=K8S)
            assert "--k8s-kubeconfig" in str(ei.value)
    finally:
        dd.stop()


def test_bad_kubeconfig_refused_at_start(cluster, tmp_path):
    bad = tmp_path / "kc"
    bad.write_text("apiVersion: v1\nkind: Config\n")
    p = subprocess.run([_E2E.WARREND, "--state-dir", str(tmp_path / "s"), "--listen",
                        "unix:" + str(tmp_path / "s.sock"), "--k8s-kubeconfig", str(bad)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    out = p.stderr + p.stdout
    assert "--k8s-kubeconfig" in out and "no current-context" in out, out
    bad.write_text("current-context: c\ncontexts: [{name: c, context: {cluster: k}\n")
    p = subprocess.run([_E2E.WARREND, "--state-dir", str(tmp_path / "s"), "--listen",
                        "unix:" + str(tmp_path / "s.sock"), "--k8s-kubeconfig", str(bad)],
                       capture_output=True, text=True, timeout=30)
    out = p.stderr + p.stdout
    assert p.returncode != 0 and "YAML line" in out, out


def test_rbac_too_narrow_is_named_at_start(cluster, tmp_path):
    # a ServiceAccount without the Role: warrend refuses to start, naming it
    st, _ = cluster.api("POST", "/api/v1/namespaces/%s/serviceaccounts" % NAMESPACE,
                        {"apiVersion": "v1", "kind": "ServiceAccount",
                         "metadata": {"name": "nobody"}})
    assert st in (201, 409)
    from conftest import sa_token
    kc = cluster.write_kubeconfig(tmp_path / "kc", token=sa_token(cluster, name="nobody"),
                                  namespace=NAMESPACE)
    p = subprocess.run([_E2E.WARREND, "--state-dir", str(tmp_path / "s"), "--listen",
                        "unix:" + str(tmp_path / "s.sock"), "--k8s-kubeconfig", str(kc)],
                       capture_output=True, text=True, timeout=30)
    out = p.stderr + p.stdout
    assert p.returncode != 0 and "403" in out and "RBAC" in out, out


class Restartable:
    """A warrend whose state dir survives kill -9 and restarts."""

    def __init__(self, cluster):
        self.tmp = tempfile.mkdtemp(prefix="warren-k8s-life-")
        self.state = os.path.join(self.tmp, "state")
        self.sock = os.path.join(self.tmp, "w.sock")
        self.cluster = cluster
        self.proc = None
        self.log = os.path.join(self.tmp, "warrend.log")
        self.port = next(_ports)  # the relays' callback: the same across restarts

    def start(self):
        env = dict(os.environ, WARREN_TERMINATE_ON_EXIT="0", WARREN_PULL_LOOPBACK_ONLY="1")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [_E2E.WARREND, "--state-dir", self.state, "--listen", "unix:" + self.sock,
                 "--log-level", "debug"] + k8s_args(self.cluster, port=self.port),
                stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, open(self.log).read()
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.sock)
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("warrend did not start:\n" + open(self.log).read())

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
        import shutil
        shutil.rmtree(self.tmp, ignore_errors=True)


def test_kill9_restart_reattaches_and_cleans_orphans(cluster):
    w = Restartable(cluster)
    try:
        w.start()
        addr = "unix:" + w.sock
        with wr.SandboxClient(addr) as c:
            keep = c.create(image=BUSYBOX, compute_class=K8S, name="k8s-survivor", lifetime="1h")
            lost = c.create(image=BUSYBOX, compute_class=K8S, name="k8s-lost")
        w.kill9()
        owner = open(os.path.join(w.state, "k8s-owner")).read().strip()
        # while warrend is down: one Pod vanishes, one orphan appears
        st, _ = cluster.api("DELETE", "/api/v1/namespaces/%s/pods/warren-%s?gracePeriodSeconds=0"
                            % (NAMESPACE, lost.id))
        assert st == 200
        pod_gone(cluster, lost.id)
        orphan = {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "warren-sb-00000000deadbeef",
                               "labels": {"warren.dev/managed": "true",
                                          "warren.dev/owner": owner,
                                          "warren.dev/sandbox": "sb-00000000deadbeef"}},
                  "spec": {"containers": [{"name": "sandbox", "image": BUSYBOX,
                                           "command": ["sleep", "3600"]}],
                           "terminationGracePeriodSeconds": 0}}
        st, body = cluster.api("POST", "/api/v1/namespaces/%s/pods" % NAMESPACE, orphan)
        assert st == 201, body
        st, body = cluster.api("POST", "/api/v1/namespaces/%s/secrets" % NAMESPACE, {
            "apiVersion": "v1", "kind": "Secret", "metadata": {
                "name": "warren-sb-00000000deadbeef-env", "labels": orphan["metadata"]["labels"]},
            "data": {"X": "eA=="}})
        assert st == 201, body
        w.start()
        with wr.SandboxClient(addr) as c:
            info = c.get(id=keep.id).refresh()
            assert info.status == wr.SandboxStatus.RUNNING, info
            gone = c.get(id=lost.id).refresh()
            assert gone.status == wr.SandboxStatus.TERMINATED, gone
            assert "Pod" in gone.status_message
            pod_gone(cluster, "sb-00000000deadbeef")
            wait_for(lambda: secret_of(cluster, "warren-sb-00000000deadbeef-env") is None, 30,
                     0.2, "the orphan Secret to go")
            # the re-attached sandbox is driven as before
            t = c.get(id=keep.id).terminate(grace_period_seconds=1)
            assert t.status == wr.SandboxStatus.TERMINATED
            pod_gone(cluster, keep.id)
    finally:
        w.stop()


def test_kill9_restart_exec_sessions_resume(cluster):
    """warrend kill -9 while execs run on a Pod: the relay redials the
    restarted warrend with its token, the held execs are taken back (TAKE)
    and their output, stdin and exits carry on; a PTY session too."""
    w = Restartable(cluster)
    try:
        w.start()
        addr = "unix:" + w.sock
        with wr.SandboxClient(addr) as c:
            sb = c.create(image=BUSYBOX, compute_class=K8S, lifetime="1h")
            p = sb.exec_start("sh", "-c", "for i in $(seq 1 30); do echo line $i; sleep 0.1; done; "
                              "read x; echo got $x; exit 3", detach=True)
            t = sb.exec_start("sh", "-c", "read y; echo pty $y; exit 4", pty=True, detach=True)
            first = p.exec_id
            tty = t.exec_id
            time.sleep(0.5)
        w.kill9()
        time.sleep(1.0)
        w.start()
        with wr.SandboxClient(addr) as c:
            sb = c.get(id=sb.id)
            # the relay redials (it backs off up to 1 s)
            try:
                q = wait_for(lambda: _try_attach(sb, first), 20, 0.2, "the exec to be attachable")
            except AssertionError:
                raise AssertionError("not attachable:\n" + open(w.log).read()[-5000:])
            q.write_stdin("after\n")
            r = q.wait()
            assert r.exit_code == 3, r
            lines = r.stdout_text.splitlines()
            # what was in flight between the relay and the killed warrend
            # (read from the Pod's pipe, not yet in warrend's spool) is
            # lost: at most the lines around the kill (docs/k8s.md)
            assert lines[-1] == "got after" and lines[-2] == "line 30", r.stdout_text
            nums = [int(x.split()[1]) for x in lines[:-1]]
            assert nums == sorted(set(nums)) and len(nums) >= 27, r.stdout_text
            u = sb.attach(tty)
            u.write_stdin("hello\n")
            r = u.wait()
            assert r.exit_code == 4 and "pty hello" in r.stdout_text, r
            # new execs work too
            assert sb.exec("echo", "again").stdout_text == "again\n"
            sb.terminate(grace_period_seconds=1)
    finally:
        w.stop()


def _try_attach(sb, exec_id):
    try:
        return sb.attach(exec_id)
    except wr.WarrenError:
        return None


def test_client_certificate_kubeconfig_and_terminate_on_exit(cluster):
    # the admin's kubeconfig (a client certificate, no namespace in it);
    # test daemons run with WARREN_TERMINATE_ON_EXIT=1: their Pods and
    # Secrets are deleted when they stop
    dd = Daemon(extra_args=["--k8s-kubeconfig", str(cluster.kubeconfig), "--k8s-namespace",
                            NAMESPACE, "--k8s-init-image", INIT_IMAGE,
                            "--k8s-callback", "%s:%d" % (CALLBACK_IP, next(_ports))])
    try:
        with wr.SandboxClient(dd.unix_addr) as c:
            sb = c.create(image=BUSYBOX, compute_class=K8S, env={"X": "1"})
            assert sb.refresh().status == wr.SandboxStatus.RUNNING
            assert pod_of(cluster, sb.id) is not None
    finally:
        log = dd.stop()
    assert "deleted (warrend shut down)" in log, log[-2000:]
    pod_gone(cluster, sb.id)
    assert secret_of(cluster, "warren-%s-env" % sb.id) is None
    assert secret_of(cluster, "warren-%s-relay" % sb.id) is None


def test_quota_refusal_is_resource_exhausted(cluster):
    ns = "warren-quota"
    cluster.create_namespace(ns)
    st, body = cluster.api("POST", "/api/v1/namespaces/%s/resourcequotas" % ns, {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-pods"},
        "spec": {"hard": {"pods": "0"}}})
    assert st in (201, 409), body
    # the quota controller must have counted the namespace first
    wait_for(lambda: cluster.api("GET", "/api/v1/namespaces/%s/resourcequotas/no-pods" % ns)[1]
             .get("status", {}).get("hard"), 30, 0.2, "the quota's status")
    dd = Daemon(extra_args=["--k8s-kubeconfig", str(cluster.kubeconfig), "--k8s-namespace", ns,
                            "--k8s-init-image", INIT_IMAGE,
                            "--k8s-callback", "%s:%d" % (CALLBACK_IP, next(_ports))])
    try:
        with wr.SandboxClient(dd.unix_addr) as c:
            with pytest.raises(wr.ResourceExhausted) as ei:
                c.create(image=BUSYBOX, compute_class=K8S, name="k8s-quota")
            assert "exceeded quota" in str(ei.value), str(ei.value)
            row = c.list(name="k8s-quota")[0]
            assert row.status == wr.SandboxStatus.FAILED
            assert "exceeded quota" in row.status_message
    finally:
        dd.stop()
