"""Managed SSH under a network policy (SECURITY.md decision 10; the seed's
rule): the destination's name resolves inside the sandbox although
allowed_hosts does not list it, and its resolved address on its port is
reachable even inside denied_routes; nothing else is opened by it (other
ports of that address, other addresses on port 22 stay as the policy
says). Against the fake internet's sshd."""
import os

import pytest

import warren as wr
from conftest import Daemon
from warren import NetworkPolicy, SshDest
from test_managed_ssh import IMAGE, import_base

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


@pytest.fixture(scope="module")
def bed():
    from fakenet.bed import FakeNet
    b = FakeNet(ssh=True)
    b.start()
    try:
        if b.ssh is None:
            pytest.skip("no sshd (openssh-server) on this host")
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def client(bed):
    d = Daemon(extra_args=["--upstream-dns", bed.dns])
    try:
        import_base(d)
        c = wr.SandboxClient(d.unix_addr)
        with open(bed.ssh.key) as f:
            c.set_secret("GITHUB_DEPLOY_KEY", f.read())
        yield c
        c.close()
    finally:
        d.stop()


def sh(sb, cmd, timeout=60):
    return sb.exec("sh", "-c", cmd, timeout_secs=timeout)


def poke(sb, ip, port):
    """Connect and send a line (the proxy accepts every connection first
    and decides on what it reads or after a quiet second: only the bed's
    logs say whether anything got through)."""
    sh(sb, "timeout 5 bash -c 'exec 3<>/dev/tcp/%s/%d; echo hello >&3; cat <&3' "
           ">/dev/null 2>&1; true" % (ip, port))


def assert_nothing_reached(bed, m):
    bed.assert_nothing_seen(m, servers=["web", "ssh", "tcp_echo"])


def test_destination_reachable_inside_denied_routes(client, bed):
    bed_net = bed.ranges[0]
    policy = NetworkPolicy(allowed_hosts=["example.test"],
                           denied_routes=[NetworkPolicy.Route(bed_net)])
    m = bed.mark()
    with client.create(image=IMAGE, entrypoint=["sleep", "infinity"], network_policy=policy,
                       managed_ssh={"github": SshDest("github.com", "GITHUB_DEPLOY_KEY",
                                                      username="git")}) as sb:
        # the name resolves although allowed_hosts does not list it
        r = sh(sb, "getent ahostsv4 github.com")
        assert bed.addr("github.com") in r.stdout_text, r.stdout_text + r.stderr_text
        r = sh(sb, "ssh github true && echo SSH-OK")
        assert "SSH-OK" in r.stdout_text, r.stderr_text
        r = sh(sb, "git clone -q github:example/repo.git /tmp/repo && ls /tmp/repo")
        assert r.exit_code == 0 and r.stdout_text.strip(), r.stderr_text
        # nothing else is opened: another port of that address, port 22 of
        # another bed address, the allowed host inside the denied route
        m2 = bed.mark()
        poke(sb, bed.addr("github.com"), 443)
        poke(sb, bed.addr("github.com"), 80)
        poke(sb, bed.addr("example.test"), 22)
        r = sh(sb, "ssh -o BatchMode=yes -o StrictHostKeyChecking=no -p 22 git@%s true"
               % bed.addr("example.test"))
        assert r.exit_code != 0
        assert_nothing_reached(bed, m2)
        evs = sb.network_events()
        assert any(e.verdict == "allow" and e.rule == "managed_ssh" and
                   e.original_dst == "%s:22" % bed.addr("github.com") for e in evs), evs
    bed.settle()
    conns = [c for c in bed.connections("ssh", since=m)]
    assert conns, "sshd saw no connection"


def test_an_address_destination_and_another_port(client, bed):
    """A destination given as an address, on a port of its own: only that
    address and port are exempt."""
    ip = bed.addr("github.com")
    policy = NetworkPolicy(allowed_hosts=[], denied_routes=[NetworkPolicy.Route(ip + "/32")])
    with client.create(image=IMAGE, entrypoint=["sleep", "infinity"], network_policy=policy,
                       managed_ssh={"gh": SshDest(ip, "GITHUB_DEPLOY_KEY", username="git")}) as sb:
        r = sh(sb, "ssh gh true && echo SSH-OK")
        assert "SSH-OK" in r.stdout_text, r.stderr_text
        m = bed.mark()
        poke(sb, ip, 80)
        poke(sb, bed.addr("example.test"), 22)
        assert_nothing_reached(bed, m)


def test_exemption_survives_a_warrend_restart(bed):
    """kill -9 of warrend: the new one registers the sandbox's policy and
    its managed SSH destinations again (<dir>/egress-rules.sealed, the
    sandbox's rules sealed with the secrets key), so ssh inside the denied
    route still works."""
    from test_lifecycle import Restartable
    life = Restartable()
    try:
        life.start(extra=["--upstream-dns", bed.dns])
        import_base(life)
        with wr.SandboxClient(life.unix_addr) as c:
            with open(bed.ssh.key) as f:
                c.set_secret("GITHUB_DEPLOY_KEY", f.read())
            sb = c.create(image=IMAGE, entrypoint=["sleep", "infinity"],
                          network_policy=NetworkPolicy(
                              allowed_hosts=[], denied_routes=[NetworkPolicy.Route(bed.ranges[0])]),
                          managed_ssh={"github": SshDest("github.com", "GITHUB_DEPLOY_KEY",
                                                         username="git")})
            r = sh(sb, "ssh github true && echo SSH-OK")
            assert "SSH-OK" in r.stdout_text, r.stderr_text
            rules = os.path.join(life.state_dir, "sandboxes", sb.id, "egress-rules.sealed")
            assert os.path.exists(rules)
            with open(rules, "rb") as f:
                assert b"github.com" not in f.read()  # sealed, not in the clear
        life.kill9()
        life.start(extra=["--upstream-dns", bed.dns])
        with wr.SandboxClient(life.unix_addr) as c:
            h = c.get(id=sb.id)
            r = sh(h, "ssh github true && echo SSH-OK")
            assert "SSH-OK" in r.stdout_text, r.stderr_text
            m = bed.mark()
            poke(h, bed.addr("github.com"), 80)
            assert_nothing_reached(bed, m)
            h.terminate(grace_period_seconds=0)
    finally:
        life.destroy()
