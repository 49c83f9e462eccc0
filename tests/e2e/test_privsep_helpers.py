"""Privilege separation, phase 3's helpers (issue 16, docs/privsep.md
"Phase 3, helpers, as built"): with --privsep, warren-priv starts
warren-egress, the warren-signers and warren-unpack (HELPER_START,
UNPACK_START) and is their parent; warrend watches them through the pidfds
it is sent. A kill -9 of warren-egress or of a signer restarts it through
warren-priv and the policy / the secrets work on; a kill -9 of warren-priv
leaves its helpers serving (connections stay decided by warren-egress at
every moment) and the next warren-priv starts the next ones."""
import os
import re
import shutil
import signal
import tempfile
import threading

import pytest

import warren as wr
from conftest import DROP, free_port, import_image
from test_privsep import children, metrics, priv_children, wait_for
from test_secrets_keeper import env_value, keeper_pid as signer_pid
from test_network import bed  # noqa: F401  (the fake internet, this module's own)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

IMAGE = "busybox:latest"
HELPER = 'warren_priv_requests_total{type="HELPER_START"}'
UNPACK = 'warren_priv_requests_total{type="UNPACK_START"}'
SECRET = "canary-privsep-helper-7d1f"


def ppid_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return None
    return int(st[st.rindex(")") + 2:].split()[1])


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rindex(")") + 2] != "Z"


def helpers_of(pid, comm):
    return sorted(p for p, c, _ in children(pid) if c == comm)


def egress_pid(d):
    pids = re.findall(r"warren-egress running \(pid (\d+)", d.read_log())
    assert pids, d.read_log()
    return int(pids[-1])


def the_priv(d):
    kids = wait_for(lambda: priv_children(d))
    assert len(kids) == 1, kids
    return kids[0][0]


def policy_holds(sb, bed):
    """The allowed host answers; a denied name and a denied address are
    refused with nothing reaching the bed."""
    r = sb.exec("sh", "-c", "timeout 8 wget -q -O - http://example.test/hello",
                timeout_secs=30)
    assert r.exit_code == 0 and "/hello" in r.stdout_text, r.stderr_text
    mark = bed.mark()
    r = sb.exec("sh", "-c", "timeout 8 wget -q -O - http://github.com/ 2>&1; echo rc=$?",
                timeout_secs=30)
    assert "rc=0" not in r.stdout_text, r.stdout_text
    r = sb.exec("sh", "-c", "echo x | nc -w 3 203.0.113.9 80", timeout_secs=30)
    assert r.stdout_text == "", r.stdout_text
    bed.assert_nothing_seen(mark)


def start(fresh_warrend, bed):
    port = free_port()
    d = fresh_warrend(extra_args=["--privsep", "--admin-listen", "127.0.0.1:%d" % port,
                                  "--upstream-dns", bed.dns])
    d.port = port
    import_image(d, IMAGE)
    return d


def test_privsep_helpers_are_warren_privs_children(fresh_warrend, bed):
    d = start(fresh_warrend, bed)
    priv = the_priv(d)
    eg = egress_pid(d)
    secrets = signer_pid(d, "secrets key")
    ca = signer_pid(d, "egress CA")
    ident = signer_pid(d, "identity key")  # --admin-listen: workload identity keys
    # warren-priv is their parent, not warrend
    for p in (eg, secrets, ca, ident):
        assert ppid_of(p) == priv, (p, priv)
    assert helpers_of(priv, "warren-egress") == [eg]
    assert sorted(helpers_of(priv, "warren-signer")) == sorted([secrets, ca, ident])
    assert not [c for c in children(d.proc.pid) if c[1] in ("warren-egress", "warren-signer",
                                                            "warren-unpack")]
    m = metrics(d.port)
    # warren-egress, its CA's signer, the secrets and identity keepers
    assert m[HELPER] == 4, m
    assert m[UNPACK] >= 1, m  # the import's layer
    assert m["warren_priv_refused_total"] == 0
    assert re.search(r"warren-priv: started warren-unpack \(pid \d+\)", d.read_log())
    with wr.SandboxClient(d.unix_addr) as c:
        c.set_secret("PRIVSEP_SECRET", SECRET)
        assert env_value(c, "PRIVSEP_SECRET") == SECRET
        sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"],
                      network_policy=wr.NetworkPolicy(allowed_hosts=["example.test"]))
        try:
            assert sb.info.egress_enforced
            policy_holds(sb, bed)
            # kill -9 of warren-egress: warren-priv starts the next one
            # (with a new CA signer), the registrations are sent again
            os.kill(eg, signal.SIGKILL)
            eg2 = wait_for(lambda: [p for p in helpers_of(priv, "warren-egress") if p != eg])
            assert eg2, d.read_log()
            wait_for(lambda: egress_pid(d) == eg2[0])
            assert egress_pid(d) == eg2[0]
            policy_holds(sb, bed)
            # kill -9 of the secrets keeper: the next request starts another
            os.kill(secrets, signal.SIGKILL)
            wait_for(lambda: not alive(secrets))
            assert env_value(c, "PRIVSEP_SECRET") == SECRET
            secrets2 = signer_pid(d, "secrets key")
            assert secrets2 != secrets and ppid_of(secrets2) == priv
        finally:
            sb.terminate()
    m = metrics(d.port)
    assert m[HELPER] == 7, m  # + warren-egress, its signer, the secrets keeper
    assert m["warren_priv_refused_total"] == 0 and m["warren_priv_lost_total"] == 0
    log = d.stop()
    assert "warren-priv: HELPER_START: done" in log


@pytest.mark.skipif(DROP, reason="a dropped warrend exits (status 3) when warren-priv dies: "
                    "test_privsep_drop.py::test_drop_warren_priv_killed")
def test_privsep_kill_of_warren_priv_leaves_helpers_serving(fresh_warrend, bed):
    d = start(fresh_warrend, bed)
    priv = the_priv(d)
    eg = egress_pid(d)
    secrets = signer_pid(d, "secrets key")
    with wr.SandboxClient(d.unix_addr) as c:
        c.set_secret("PRIVSEP_SECRET", SECRET)
        sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"],
                      network_policy=wr.NetworkPolicy(allowed_hosts=["example.test"]))
        try:
            os.kill(priv, signal.SIGKILL)
            # at once, before any restart: the helpers run on, orphaned
            # (not killed with their parent), and decide every connection
            assert alive(eg) and alive(secrets)
            policy_holds(sb, bed)
            assert env_value(c, "PRIVSEP_SECRET") == SECRET
            assert egress_pid(d) == eg and signer_pid(d, "secrets key") == secrets
            priv2 = wait_for(lambda: [p for p, _, _ in priv_children(d) if p != priv])
            assert priv2, d.read_log()
            priv2 = priv2[0]
            assert ppid_of(eg) != priv2  # still the first one's orphan
            # the next warren-egress is the new warren-priv's child
            os.kill(eg, signal.SIGKILL)
            eg2 = wait_for(lambda: helpers_of(priv2, "warren-egress"))
            assert eg2, d.read_log()
            wait_for(lambda: egress_pid(d) == eg2[0])
            policy_holds(sb, bed)
            os.kill(secrets, signal.SIGKILL)
            wait_for(lambda: not alive(secrets))
            assert env_value(c, "PRIVSEP_SECRET") == SECRET
            assert ppid_of(signer_pid(d, "secrets key")) == priv2
        finally:
            sb.terminate()
    d.stop()
    # no helper outlives warrend (they exit when their sockets close)
    for p in (eg, secrets):
        assert wait_for(lambda: not alive(p)), p


def test_privsep_pull_unpacks_by_warren_priv(fresh_warrend):
    """A registry pull: every layer is unpacked by a warren-unpack that
    warren-priv started (UNPACK_START), and the image runs."""
    from test_pull import R, pull
    if not R.available():
        pytest.skip("docker-registry and skopeo are needed (scripts/deps.sh)")
    reg = R.Registry()
    layout = R.Layout(tempfile.mkdtemp(prefix="warren-privsep-layout-"))
    try:
        # two layers large enough (uncompressed) that each warren-unpack
        # lives long enough to be seen in /proc
        md, _ = layout.image([R.layer_tar([("etc/privsep", "file", b"by warren-priv\n"),
                                           ("big1", "file", os.urandom(24 << 20))]),
                              R.layer_tar([("etc/second", "file", b"two\n"),
                                           ("big2", "file", os.urandom(24 << 20))])], {},
                             compress=False)
        layout.tag(md, "p")
        reg.push(layout.path, "p", "test/privsep:v1")
        port = free_port()
        d = fresh_warrend(extra_args=["--privsep", "--admin-listen", "127.0.0.1:%d" % port])
        before = metrics(port)[UNPACK]
        priv = the_priv(d)
        seen, stop = {}, threading.Event()

        def watch():  # every warren-unpack seen during the pull, and its parent
            while not stop.is_set():
                for p in os.listdir("/proc"):
                    if p.isdigit():
                        try:
                            with open("/proc/%s/comm" % p) as f:
                                if f.read().strip() != "warren-unpack":
                                    continue
                        except OSError:
                            continue
                        pp = ppid_of(int(p))
                        if pp:
                            seen[int(p)] = pp
        t = threading.Thread(target=watch)
        t.start()
        try:
            _, img = pull(d, "%s/test/privsep:v1" % reg.host)
        finally:
            stop.set()
            t.join()
        assert metrics(port)[UNPACK] == before + 2
        # of this warrend's (other daemons may unpack at the same time)
        mine = [pp for pp in seen.values() if pp in (priv, d.proc.pid)]
        assert mine and all(pp == priv for pp in mine), (seen, priv, d.proc.pid)
        log = d.read_log()
        assert len(re.findall(r"warren-priv: started warren-unpack", log)) >= 2, log
        assert "warren-priv: UNPACK_START: done" in d.stop()
    finally:
        reg.stop()
        shutil.rmtree(layout.path, ignore_errors=True)
