"""Credentials the sandbox never sees (docs/network.md "Interception"):
per-host request rules and add_credentials, enforced by warren-egress's
TLS interception with leaves from warren-signer, against the fake internet
(tests/fakenet). The bed's CA is what the intercepted upstreams are
verified against (--egress-upstream-ca); the sandbox trusts only warrend's
egress CA for the intercepted hosts (its bundle is mounted over the
image's).

The secret's value is asserted absent from the sandbox (env, files,
/proc) and from what the sandbox received, and present in what the bed's
server logged."""
import os
import re
import shutil
import socket
import ssl
import subprocess
import tarfile
import tempfile

import pytest

import warren as wr
from conftest import ROOT, WARREN_CLI, Daemon, import_image
from warren import NetworkPolicy, Secret

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

TOKEN = "tok-" + os.urandom(12).hex()
HOST = "internal-api.example.com"


@pytest.fixture(scope="module")
def bed():
    from fakenet.bed import FakeNet
    b = FakeNet(ssh=False)
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def cd(bed):
    d = Daemon(extra_args=["--upstream-dns", bed.dns, "--egress-upstream-ca", bed.ca_pem])
    try:
        import_image(d, "busybox:latest")
        yield d
    finally:
        if os.environ.get("WARREN_TEST_KEEP_LOG"):
            with open(os.environ["WARREN_TEST_KEEP_LOG"], "w") as f:
                f.write(d.read_log())
        d.stop()


@pytest.fixture(scope="module")
def client(cd):
    c = wr.SandboxClient(cd.unix_addr)
    c.set_secret("INTERNAL_API_TOKEN", TOKEN)
    c.set_secret("OPENAI_API_KEY", "sk-" + TOKEN)
    c.set_secret("EMPTY_SECRET", "")
    yield c
    c.close()


@pytest.fixture(scope="module")
def tools_tar():
    """The Debian base image plus curl, Python requests (copied from this
    host), as a tarball for `warren image import`."""
    p = subprocess.run(["bash", str(ROOT / "scripts/base-image.sh")], capture_output=True,
                       text=True, timeout=900)
    if p.returncode != 0:
        pytest.skip("no Debian base image: " + p.stderr[-300:])
    base = p.stdout.strip().splitlines()[-1]
    import requests, urllib3, idna, certifi, charset_normalizer  # noqa: E401
    tmp = tempfile.mkdtemp(prefix="warren-credtools-")
    try:
        tar = os.path.join(tmp, "t.tar")
        shutil.copyfile(base, tar)
        with tarfile.open(tar, "a") as t:
            t.add("/usr/bin/curl", "./usr/bin/curl")
            t.add(os.path.realpath("/lib/x86_64-linux-gnu/libcurl.so.4"),
                  "./usr/lib/x86_64-linux-gnu/libcurl.so.4")
            for m in (requests, urllib3, idna, certifi, charset_normalizer):
                d = os.path.dirname(m.__file__)
                t.add(d, "./usr/lib/python3/dist-packages/" + os.path.basename(d),
                      filter=lambda ti: None if "__pycache__" in ti.name else ti)
        yield tar
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def import_tools(d, tar):
    r = subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "image", "import",
                        "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        "credtools:latest", tar], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return "credtools:latest"


@pytest.fixture(scope="module")
def tools_image(cd, tools_tar):
    """tools_tar imported as credtools:latest."""
    return import_tools(cd, tools_tar)


def seed_policy(**extra):
    """The seed's per-host rule example (with warren's placeholder prefix)."""
    hosts = {HOST: [NetworkPolicy.Rule(
        match=NetworkPolicy.Match(path=NetworkPolicy.Matcher(starts_with="/v1/")),
        transforms=[NetworkPolicy.Transformer(
            headers={"Authorization": "Bearer __warren_secret_API_TOKEN"},
            headers_secrets={"__warren_secret_API_TOKEN": "INTERNAL_API_TOKEN"})],
        forward_url="https://internal-api.example.com")]}
    hosts.update(extra)
    return NetworkPolicy(allowed_hosts=hosts)


def sh(sb, script, timeout=60, env=None):
    return sb.exec("sh", "-c", script, timeout_secs=timeout, env=env)


def auth_of(bed, m, path_prefix):
    bed.settle()
    reqs = [r for r in bed.http_requests(since=m, host=HOST) if r["path"].startswith(path_prefix)]
    return reqs, [dict((k.lower(), v) for k, v in r["headers"]).get("authorization") for r in reqs]


def assert_token_absent_inside(sb, token=TOKEN):
    """The secret is nowhere in the sandbox: every process's environment
    and command line, every file. The search's own pattern is written with
    an empty group ("ab()cd"), so no command line of the search holds the
    secret itself."""
    r = sh(sb, "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; env")
    assert token not in r.stdout_text
    pat = token[:4] + "()" + token[4:]
    r = sh(sb, "grep -rlE '%s' / --exclude-dir=proc --exclude-dir=sys 2>/dev/null; "
               "grep -lE '%s' /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; true"
           % (pat, pat), timeout=120)
    assert r.stdout_text.strip() == "", r.stdout_text


def test_seed_rule_curl_requests_git(client, bed, tools_image):
    m = bed.mark()
    with client.create(image=tools_image, network_policy=seed_policy()) as sb:
        # the bundle: the CA is trusted with no help; the variables name it
        r = sh(sb, "echo $SSL_CERT_FILE $REQUESTS_CA_BUNDLE $CURL_CA_BUNDLE $GIT_SSL_CAINFO "
                   "$PIP_CERT $NODE_EXTRA_CA_CERTS; grep -c 'BEGIN CERT' $SSL_CERT_FILE; "
                   "touch /etc/ssl/certs/ca-certificates.crt 2>&1 || true")
        assert r.stdout_text.split()[:6] == ["/etc/ssl/certs/ca-certificates.crt"] * 6, r.stdout_text
        assert "Read-only" in r.stdout_text, r.stdout_text
        r = sh(sb, "curl -sS -i https://%s/v1/private/curl" % HOST)
        assert r.exit_code == 0, r.stderr_text
        assert "200" in r.stdout_text.splitlines()[0] and TOKEN not in r.stdout_text
        py = ("import requests; r = requests.get('https://%s/v1/private/requests'); "
              "print(r.status_code, r.text, dict(r.headers))" % HOST)
        r = sb.exec("python3", "-c", py, timeout_secs=60)
        assert r.exit_code == 0, r.stderr_text
        assert r.stdout_text.startswith("200") and TOKEN not in r.stdout_text
        r = sh(sb, "HOME=/tmp git clone -q %s /tmp/repo && git -C /tmp/repo rev-parse HEAD"
               % bed.git["v1_url"], timeout=120)
        assert r.exit_code == 0, r.stderr_text
        assert bed.git["head"] in r.stdout_text
        # a path no rule matches: upstream unchanged (no Authorization)
        r = sh(sb, "curl -sS -o /dev/null -w '%%{http_code}' https://%s/other/x" % HOST)
        assert r.stdout_text == "200", r.stdout_text + r.stderr_text
        # cleartext HTTP to the rule host: allowed, never substituted
        r = sh(sb, "curl -sS -o /dev/null -w '%%{http_code}' "
                   "-H 'Authorization: Bearer __warren_secret_API_TOKEN' http://%s/v1/private/plain"
               % HOST)
        assert r.stdout_text == "200", r.stdout_text + r.stderr_text
        assert_token_absent_inside(sb)
    reqs, auths = auth_of(bed, m, "/v1/private/")
    by_path = {r["path"]: a for r, a in zip(reqs, auths)}
    assert by_path["/v1/private/curl"] == "Bearer " + TOKEN
    assert by_path["/v1/private/requests"] == "Bearer " + TOKEN
    assert by_path["/v1/private/plain"] == "Bearer __warren_secret_API_TOKEN"  # http: verbatim
    git = [r for r in bed.http_requests(since=m, host=HOST) if r["path"].startswith("/v1/repo.git")]
    assert git and all(dict((k.lower(), v) for k, v in r["headers"])["authorization"] ==
                       "Bearer " + TOKEN for r in git)
    other = [r for r in bed.http_requests(since=m, host=HOST) if r["path"] == "/other/x"]
    assert other and "authorization" not in {k.lower() for k, _ in other[0]["headers"]}
    # the server saw the TLS from warren-egress with its own SNI
    assert all(r["sni"] == HOST and r["tls"] for r in reqs if r["path"] != "/v1/private/plain")


def run_busy(client, policy, script, **kw):
    with client.create(image="busybox:latest", network_policy=policy, **kw) as sb:
        return sh(sb, script)


# Placeholder semantics, end to end (rules.c is table-tested in test-rules.c):
# overlap (leftmost then longest), non-recursion, absent, empty secret,
# workload-supplied headers, never in Host/Content-Length/Connection.
PH_CASES = [
    # (header the workload sends, expected at the server)
    ("X-A: __warren_secret_API_TOKEN", "X-A: " + TOKEN),
    ("X-A: a__warren_secret_API_TOKENb", "X-A: a%sb" % TOKEN),
    ("X-A: __warren_secret_API_TOKEN_LONG", "X-A: long-one"),         # longest wins
    ("X-A: __warren_secret_API_TOKEN__warren_secret_E", "X-A: " + TOKEN),  # empty removes
    ("X-A: __warren_secret_NOPE", "X-A: __warren_secret_NOPE"),         # absent: no effect
    ("X-A: __warren_secret_api_token", "X-A: __warren_secret_api_token"),  # case-sensitive
]


def test_placeholder_table(client, bed, tools_image):
    client.set_secret("LONG_SECRET", "long-one")
    client.set_secret("RECURSE", "__warren_secret_API_TOKEN")
    pol = NetworkPolicy(allowed_hosts={HOST: [NetworkPolicy.Rule(
        match=NetworkPolicy.Match(path=NetworkPolicy.Matcher(starts_with="/v1/")),
        transforms=[NetworkPolicy.Transformer(
            headers={"X-Set": "__warren_secret_R"},
            headers_secrets={"__warren_secret_API_TOKEN": "INTERNAL_API_TOKEN",
                             "__warren_secret_API_TOKEN_LONG": "LONG_SECRET",
                             "__warren_secret_E": "EMPTY_SECRET",
                             "__warren_secret_R": "RECURSE"})])]})
    ca = open(bed.ca_pem).read()
    m = bed.mark()
    with client.create(image=tools_image, network_policy=pol) as sb:
        for i, (hdr, _) in enumerate(PH_CASES):
            r = sh(sb, "curl -sSf -o /dev/null -H '%s' https://%s/v1/private/ph%d" % (hdr, HOST, i))
            assert r.exit_code == 0, (hdr, r.stderr_text)
        # never in Host, Connection-named headers or hop-by-hop ones
        r = sh(sb, "curl -sSf -o /dev/null -H 'Connection: X-Hop' -H "
                   "'X-Hop: __warren_secret_API_TOKEN' https://%s/v1/private/hop" % HOST)
        assert r.exit_code == 0, r.stderr_text
        assert_token_absent_inside(sb)
    del ca
    bed.settle()
    got = {r["path"]: dict((k.lower(), v) for k, v in r["headers"])
           for r in bed.http_requests(since=m, host=HOST)}
    for i, (_, want) in enumerate(PH_CASES):
        k, v = want.split(": ", 1)
        assert got["/v1/private/ph%d" % i][k.lower()] == v, (i, got["/v1/private/ph%d" % i])
        # non-recursive: the literal header's value went in once
        assert got["/v1/private/ph%d" % i]["x-set"] == "__warren_secret_API_TOKEN"
    assert got["/v1/private/hop"].get("x-hop") in (None, "__warren_secret_API_TOKEN")


def test_wrong_host_gets_the_placeholder_verbatim(client, bed, tools_image):
    """A placeholder is substituted only for its own host: api.openai.com
    (allowed, no rules: an opaque tunnel) receives it verbatim."""
    m = bed.mark()
    pol = seed_policy(**{"api.openai.com": []})
    with client.create(image=tools_image, network_policy=pol) as sb:
        # an opaque tunnel: the bed's own certificate (not trusted here: -k)
        r = sh(sb, "curl -sSk -H 'Authorization: Bearer __warren_secret_API_TOKEN' "
                   "https://api.openai.com/v1/x")
        assert r.exit_code == 0, r.stderr_text
        assert TOKEN not in r.stdout_text
    bed.settle()
    req = [r for r in bed.http_requests(since=m) if r["hostname"] == "api.openai.com"]
    assert req and dict(req[0]["headers"])["Authorization"] == "Bearer __warren_secret_API_TOKEN"


SMUGGLE = [
    ("cl+te", "POST /v1/private/s HTTP/1.1\r\nHost: {h}\r\nContent-Length: 4\r\n"
              "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    ("dup-cl", "POST /v1/private/s HTTP/1.1\r\nHost: {h}\r\nContent-Length: 1\r\n"
               "Content-Length: 2\r\n\r\nab"),
    ("bad-cl", "POST /v1/private/s HTTP/1.1\r\nHost: {h}\r\nContent-Length: 1x\r\n\r\na"),
    ("obs-fold", "GET /v1/private/s HTTP/1.1\r\nHost: {h}\r\nX-A: a\r\n b\r\n\r\n"),
    ("bare-lf", "GET /v1/private/s HTTP/1.1\nHost: {h}\n\n"),
    ("absolute-other", "GET http://example.com/v1/private/s HTTP/1.1\r\nHost: example.com\r\n\r\n"),
    ("host-not-sni", "GET /v1/private/s HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"),
    ("pipelined-other", "GET /v1/private/first HTTP/1.1\r\nHost: {h}\r\n\r\n"
                        "GET /v1/private/s HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"),
    ("h2c", "GET /v1/private/s HTTP/1.1\r\nHost: {h}\r\nConnection: Upgrade, HTTP2-Settings\r\n"
            "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n"),
    ("trace", "TRACE /v1/private/s HTTP/1.1\r\nHost: {h}\r\n\r\n"),
    ("connect", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"),
    ("nul", "GET /v1/private/s HTTP/1.1\r\nHost: {h}\r\nX-A: a\x00b\r\n\r\n"),
]

SMUGGLE_PY = r'''
import socket, ssl, sys
ctx = ssl.create_default_context()
s = ctx.wrap_socket(socket.create_connection((sys.argv[1], 443), timeout=10), server_hostname=sys.argv[1])
import base64
s.sendall(base64.b64decode(sys.argv[2]))
out = b""
while True:
    try:
        b = s.recv(65536)
    except (ssl.SSLError, OSError):
        break
    if not b:
        break
    out += b
sys.stdout.write(out.decode("latin-1"))
'''


@pytest.mark.parametrize("name,req", SMUGGLE, ids=[s[0] for s in SMUGGLE])
def test_smuggling_is_refused(client, bed, tools_image, name, req):
    m = bed.mark()
    with client.create(image=tools_image, network_policy=seed_policy()) as sb:
        import base64
        r = sb.exec("python3", "-c", SMUGGLE_PY, HOST,
                    base64.b64encode(req.format(h=HOST).encode()).decode(), timeout_secs=60)
        assert r.exit_code == 0, r.stderr_text
        first = r.stdout_text.split("\r\n", 1)[0]
        assert re.match(r"HTTP/1.1 (400|421|405) ", first), (name, r.stdout_text)
        assert TOKEN not in r.stdout_text
        # one answer and the connection closed
        assert r.stdout_text.count("HTTP/1.1 4") == 1, r.stdout_text
    bed.settle()
    smuggled = [x for x in bed.http_requests(since=m) if x["path"] == "/v1/private/s"]
    assert smuggled == [], smuggled


def test_add_credentials(client, bed, tools_image):
    """add_credentials("api.openai.com", "OPENAI_API_KEY") with a policy,
    and the Secret.from_local_env form without one (outbound stays open)."""
    m = bed.mark()
    s = wr.Sandbox(image=tools_image, network_policy=NetworkPolicy(allowed_hosts=["example.com"]))
    s.add_credentials("api.openai.com", "OPENAI_API_KEY")
    with client.run(s) as sb:
        r = sh(sb, 'echo "$OPENAI_API_KEY"')
        ph = r.stdout_text.strip()
        assert re.fullmatch(r"__warren_secret_[0-9a-f]{24}", ph), ph
        r = sh(sb, 'curl -sS -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $OPENAI_API_KEY" '
                   'https://api.openai.com/v1/models')
        assert r.stdout_text == "200", r.stdout_text + r.stderr_text
        # another host gets the placeholder verbatim
        r = sh(sb, 'curl -sS -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $OPENAI_API_KEY" '
                   '-k https://example.com/creds')
        assert r.stdout_text == "200", r.stdout_text + r.stderr_text
        assert_token_absent_inside(sb, "sk-" + TOKEN)
    bed.settle()
    got = {r["path"]: dict(r["headers"]) for r in bed.http_requests(since=m)}
    assert got["/v1/models"]["Authorization"] == "Bearer sk-" + TOKEN
    assert got["/creds"]["Authorization"] == "Bearer " + ph


def state_files_holding(d, secret):
    """Files under the daemon's state dir (its store included) holding
    secret's bytes."""
    hits = []
    for root, _, files in os.walk(d.state_dir):
        for f in files:
            p = os.path.join(root, f)
            try:
                with open(p, "rb") as fh:
                    if secret.encode() in fh.read():
                        hits.append(p)
            except OSError:
                pass
    return hits


def test_add_credentials_local_env_without_policy(cd, client, bed, tools_image, monkeypatch):
    """The seed's [host, "*.domain"] + Secret.from_local_env form, no
    policy: outbound stays open, the credential's hosts are intercepted."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-" + TOKEN)
    m = bed.mark()
    s = wr.Sandbox(image=tools_image)
    s.add_credentials(["api.slack.com", "*.slack.com"],
                      Secret.from_local_env("SLACK_BOT_TOKEN"))
    with client.run(s) as sb:
        r = sh(sb, 'echo "$SLACK_BOT_TOKEN"')
        assert re.fullmatch(r"__warren_secret_[0-9a-f]{24}", r.stdout_text.strip()), r.stdout_text
        for h in ("api.slack.com", "hooks.slack.com"):
            r = sh(sb, 'curl -sS -o /dev/null -w "%%{http_code}" -H "Authorization: Bearer '
                       '$SLACK_BOT_TOKEN" https://%s/v1/private/slack' % h)
            assert r.stdout_text == "200", r.stdout_text + r.stderr_text
        # outbound stays open: another host, not intercepted
        r = sh(sb, 'curl -sS -k -o /dev/null -w "%{http_code}" https://example.test/open')
        assert r.stdout_text == "200", r.stdout_text + r.stderr_text
        assert_token_absent_inside(sb, "xoxb-" + TOKEN)
        # the inline value is not kept: not in the store, not in GetSandbox
        assert state_files_holding(cd, "xoxb-" + TOKEN) == []
        assert "xoxb-" + TOKEN not in repr(client.get(id=sb.id))
    bed.settle()
    got = [dict(r["headers"]).get("Authorization") for r in bed.http_requests(since=m)
           if r["path"] == "/v1/private/slack"]
    assert got == ["Bearer xoxb-" + TOKEN] * 2, got


def test_cli_credential(cd, client, bed, tools_image):
    """`warren sandbox create --credential HOSTS=SECRET` (with --host: a
    policy, to which the credential's hosts are added)."""
    def cli(*args):
        return subprocess.run([str(WARREN_CLI), "--addr", cd.unix_addr, *args],
                              capture_output=True, text=True, timeout=120)
    p = cli("sandbox", "create", "-i", tools_image, "--host", "example.com",
            "--credential", "api.openai.com,*.openai.com=OPENAI_API_KEY", "--", "sleep", "infinity")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.strip()
    m = bed.mark()
    try:
        sb = client.get(id=sid)
        r = sh(sb, 'curl -sS -o /dev/null -w "%{http_code}" -H "X-Key: $OPENAI_API_KEY" '
                   'https://api.openai.com/v1/cli')
        assert r.stdout_text == "200", r.stdout_text + r.stderr_text
        # a host in neither the policy nor the credential: refused
        r = sh(sb, 'curl -sS -k -o /dev/null -w "%{http_code}" https://github.com/')
        assert r.stdout_text != "200"
    finally:
        cli("sandbox", "rm", sid)
    bed.settle()
    got = [dict(r["headers"]).get("X-Key") for r in bed.http_requests(since=m)
           if r["path"] == "/v1/cli"]
    assert got == ["sk-" + TOKEN], got
    p = cli("sandbox", "create", "-i", tools_image, "--credential", "api.openai.com")
    assert p.returncode != 0 and "--credential" in p.stderr


M = NetworkPolicy


def _rule_policy(**rule):
    return NetworkPolicy(allowed_hosts={HOST: [M.Rule(**rule)]})


@pytest.mark.parametrize("policy,cls,words", [
    (_rule_policy(transforms=[M.Transformer(headers_secrets={"": "INTERNAL_API_TOKEN"})]),
     wr.InvalidArgument, "empty placeholder"),
    (_rule_policy(transforms=[M.Transformer(headers={"Content-Length": "1"})]),
     wr.InvalidArgument, "Content-Length"),
    (_rule_policy(transforms=[M.Transformer(headers={"Host": "evil.example"})]),
     wr.InvalidArgument, "Host"),
    (_rule_policy(forward_url="ftp://internal-api.example.com"), wr.InvalidArgument,
     "forward_url"),
    (_rule_policy(match=M.Match(path=M.Matcher(regex="(unclosed"))), wr.InvalidArgument,
     "regex"),
    (_rule_policy(transforms=[M.Transformer(headers_secrets={"__warren_secret_X": "NO_SUCH"})]),
     wr.NotFound, "NO_SUCH"),
    (NetworkPolicy(allowed_hosts={"*": [M.Rule(transforms=[M.Transformer(headers={"X": "1"})])]}),
     wr.InvalidArgument, "*"),
], ids=["empty-token", "framing-header", "host-header", "forward-scheme", "bad-regex",
        "missing-secret", "star-host"])
def test_create_time_checks(client, policy, cls, words):
    with pytest.raises(cls) as ei:
        client.create(image="busybox:latest", network_policy=policy)
    assert words in ei.value.message, ei.value.message


def test_credential_star_host_refused(client):
    s = wr.Sandbox(image="busybox:latest")
    s.add_credentials("*", "OPENAI_API_KEY")
    with pytest.raises(wr.InvalidArgument) as ei:
        client.run(s)
    assert "credentials" in ei.value.message and "*" in ei.value.message


def test_signer_restart_and_leaf_cache(cd, client, bed, tools_image):
    """warren-signer killed: warren-egress goes with it, both come back,
    interception works again (a fresh process: its leaf cache starts
    empty). Leaves are cached per host: the second connection of a sandbox
    to the same host mints nothing."""
    log = cd.read_log()
    pid = int(re.findall(r"warren-signer: ready \(pid (\d+)\), keeping the egress CA", log)[-1])
    n_running = log.count("warren-egress running")
    os.kill(pid, 9)
    import time
    deadline = time.time() + 15
    while cd.read_log().count("warren-egress running") == n_running:
        assert time.time() < deadline, cd.read_log()[-3000:]
        time.sleep(0.1)
    m = bed.mark()
    with client.create(image=tools_image, network_policy=seed_policy()) as sb:
        for i in range(3):
            r = sh(sb, "curl -sS -o /dev/null -w '%%{http_code}' https://%s/v1/private/again%d"
                   % (HOST, i))
            assert r.stdout_text == "200", r.stdout_text + r.stderr_text
    _, auths = auth_of(bed, m, "/v1/private/again")
    assert auths == ["Bearer " + TOKEN] * 3
    after = cd.read_log()[len(log):]
    minted = re.findall(r"leaf certificate for (\S+) minted \(leaf cache: (\d+) hits, (\d+) misses\)",
                        after)
    assert [h for h, _, _ in minted] == [HOST], minted  # once, then from the cache


def test_busybox_wget_without_signature_algorithms(client, bed):
    """busybox wget's TLS 1.2 ClientHello has no signature_algorithms
    extension (RFC 5246 default: SHA-1): the sandbox-facing side accepts
    it (security level 0 there only)."""
    m = bed.mark()
    with client.create(image="busybox:latest", network_policy=seed_policy()) as sb:
        r = sh(sb, "wget -q -O - https://%s/v1/private/busybox" % HOST)
        assert r.exit_code == 0, r.stderr_text
        assert TOKEN not in r.stdout_text
    _, auths = auth_of(bed, m, "/v1/private/busybox")
    assert auths == ["Bearer " + TOKEN]


def test_forward_url_to_another_host(client, bed, tools_image):
    """forward_url naming another host: dialed address, SNI and Host are
    the forward host's, its path prefixes the original path and query; a
    forward host the built-in deny list refuses answers 502 and nothing
    leaves."""
    pol = NetworkPolicy(allowed_hosts={
        HOST: [M.Rule(match=M.Match(path=M.Matcher(starts_with="/fwd/")),
                      transforms=[M.Transformer(
                          headers={"Authorization": "Bearer __warren_secret_T"},
                          headers_secrets={"__warren_secret_T": "INTERNAL_API_TOKEN"})],
                      forward_url="https://api.openai.com/base"),
               M.Rule(match=M.Match(path=M.Matcher(starts_with="/meta/")),
                      forward_url="https://metadata.example.test")]})
    m = bed.mark()
    with client.create(image=tools_image, network_policy=pol) as sb:
        r = sh(sb, "curl -sS -o /dev/null -w '%%{http_code}' 'https://%s/fwd/x?q=1'" % HOST)
        assert r.stdout_text == "200", r.stdout_text + r.stderr_text
        r = sh(sb, "curl -sS -w '%%{http_code}' https://%s/meta/latest" % HOST)
        assert r.stdout_text.endswith("502") and TOKEN not in r.stdout_text, r.stdout_text
    bed.settle()
    got = [x for x in bed.http_requests(since=m) if x["path"].startswith("/base/")]
    assert len(got) == 1, got
    g = got[0]
    assert (g["hostname"], g["sni"], g["target"]) == ("api.openai.com", "api.openai.com",
                                                      "/base/fwd/x?q=1"), g
    assert dict(g["headers"])["Authorization"] == "Bearer " + TOKEN
    assert not [x for x in bed.http_requests(since=m) if "meta" in x["path"]]


def test_websocket_upgrade_passes_other_upgrades_refused(client, bed, tools_image):
    """A WebSocket upgrade request is matched and rewritten like any
    request, then the stream is opaque; h2c is refused (in the smuggling
    table)."""
    m = bed.mark()
    with client.create(image=tools_image, network_policy=seed_policy()) as sb:
        r = sh(sb, "curl -sS -o /dev/null -w '%%{http_code}' -H 'Connection: Upgrade' "
                   "-H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' "
                   "-H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' https://%s/v1/private/ws"
               % HOST)
        assert r.exit_code == 0, r.stderr_text
        r = sh(sb, "curl -sS -o /dev/null -w '%%{http_code}' -H 'Connection: Upgrade' "
                   "-H 'Upgrade: foo/1' https://%s/v1/private/foo" % HOST)
        assert r.stdout_text == "400", r.stdout_text
    _, auths = auth_of(bed, m, "/v1/private/ws")
    assert auths == ["Bearer " + TOKEN]
    assert not [x for x in bed.http_requests(since=m) if x["path"] == "/v1/private/foo"]


PR_SCRIPT = r'''
import json, sys, urllib.request
for title in sys.argv[1:]:
    req = urllib.request.Request("https://api.github.com/repos/example/repo/pulls",
                                 data=json.dumps({"title": title, "head": "b", "base": "main"}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req) as r:
            print(r.status, json.load(r)["html_url"])
    except urllib.error.HTTPError as e:
        print(e.code)
'''


def test_resource_detection_github_pull_requests(cd, client, bed, tools_image):
    """resource_detectors=[GITHUB_PULL_REQUESTS], no policy given: one that
    allows only api.github.com is made; two PRs opened (one answered
    chunked, with chunk boundaries inside the JSON), a failed POST (422)
    records nothing; sandbox.resources() and `warren sandbox get` list
    both URLs."""
    with client.create(image=tools_image,
                       resource_detectors=[wr.ResourceDetector.GITHUB_PULL_REQUESTS]) as sb:
        r = sb.exec("python3", "-c", PR_SCRIPT, "first", "fail", "second chunked", timeout_secs=60)
        assert r.exit_code == 0, r.stderr_text
        lines = r.stdout_text.split("\n")
        assert lines[0].startswith("201 https://github.com/example/repo/pull/") and lines[1] == "422"
        urls = [lines[0].split()[1], lines[2].split()[1]]
        got = sb.resources()
        assert [(x.kind, x.id) for x in got] == [("github_pull_request", u) for u in urls], got
        out = subprocess.run([str(WARREN_CLI), "--addr", cd.unix_addr, "sandbox", "get", sb.id],
                             capture_output=True, text=True).stdout
        assert all("Detected:    " + u in out for u in urls), out
        # only api.github.com is allowed (the seed rule)
        r = sh(sb, "curl -sS -k -o /dev/null -w '%{http_code}' https://example.com/ 2>&1")
        assert r.stdout_text != "200", r.stdout_text


def test_resource_detection_from_the_cli_makes_the_policy(cd, client, bed, tools_image):
    """`warren sandbox create --resource-detection github-pull-requests`
    without a policy: warrend makes one allowing only api.github.com."""
    def cli(*args):
        return subprocess.run([str(WARREN_CLI), "--addr", cd.unix_addr, *args],
                              capture_output=True, text=True, timeout=120)
    p = cli("sandbox", "create", "-i", tools_image, "--resource-detection", "github-pull-requests",
            "--", "sleep", "infinity")
    assert p.returncode == 0, p.stderr
    sid = p.stdout.strip()
    try:
        sb = client.get(id=sid)
        r = sb.exec("python3", "-c", PR_SCRIPT, "from the cli", timeout_secs=60)
        assert r.exit_code == 0 and r.stdout_text.startswith("201 "), r.stdout_text + r.stderr_text
        url = r.stdout_text.split()[1]
        assert [x.id for x in sb.resources()] == [url]
        r = sh(sb, "curl -sS -k -o /dev/null -w '%{http_code}' https://example.com/ 2>&1")
        assert r.stdout_text != "200", r.stdout_text
        assert "Egress:      policy enforced" in cli("sandbox", "get", sid).stdout
    finally:
        cli("sandbox", "rm", sid)


def test_warm_pool_claim_gets_the_bundle_and_interception(bed):
    """A sandbox claimed from the warm pool (its root mounted while parked)
    gets the CA bundle mounts and the variables at the claim like a plain
    create."""
    d = Daemon(extra_args=["--upstream-dns", bed.dns, "--egress-upstream-ca", bed.ca_pem,
                           "--warm-pool", "1"])
    try:
        import_image(d, "busybox:latest")
        c = wr.SandboxClient(d.unix_addr)
        c.set_secret("INTERNAL_API_TOKEN", TOKEN)
        import time
        # the pool builds roots for an image once a create asked for it:
        # one create, then wait for the refill, then the claim under test
        c.create(image="busybox:latest").terminate(grace_period_seconds=0)
        time.sleep(2.0)
        m = bed.mark()
        with c.create(image="busybox:latest", network_policy=seed_policy()) as sb:
            r = sh(sb, "echo $SSL_CERT_FILE; grep -c 'BEGIN CERTIFICATE' $SSL_CERT_FILE; "
                       "wget -q -O - https://%s/v1/private/pool" % HOST)
            assert r.exit_code == 0, r.stderr_text
            assert r.stdout_text.split()[0] == "/etc/ssl/certs/ca-certificates.crt"
        _, auths = auth_of(bed, m, "/v1/private/pool")
        assert auths == ["Bearer " + TOKEN]
        assert re.search(r"sandbox %s: create .* runtime \(pool\)" % sb.id, d.read_log()), \
            "the sandbox was not claimed from the pool"
        c.close()
    finally:
        d.stop()


def test_rotate_egress_ca(cd, client, bed, tools_image):
    """`warrend --rotate-egress-ca` beside a running warrend: sandboxes
    created after it trust the new and the previous certificate; once the
    signer restarts (here: killed) it signs with the new key, and such a
    sandbox's curl verifies it."""
    from conftest import WARREND
    p = subprocess.run([WARREND, "--state-dir", cd.state_dir, "--rotate-egress-ca"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    new_ca = open(os.path.join(cd.state_dir, "egress-ca.crt")).read()
    old_ca = open(os.path.join(cd.state_dir, "egress-ca.crt.old")).read()
    assert new_ca != old_ca
    log = cd.read_log()
    pid = int(re.findall(r"warren-signer: ready \(pid (\d+)\), keeping the egress CA", log)[-1])
    n_running = log.count("warren-egress running")
    os.kill(pid, 9)
    import time
    deadline = time.time() + 15
    while cd.read_log().count("warren-egress running") == n_running:
        assert time.time() < deadline
        time.sleep(0.1)
    m = bed.mark()
    with client.create(image=tools_image, network_policy=seed_policy()) as sb:
        r = sh(sb, "cat $SSL_CERT_FILE")
        assert new_ca.strip() in r.stdout_text and old_ca.strip() in r.stdout_text
        r = sh(sb, "curl -sS -o /dev/null -w '%%{http_code}' https://%s/v1/private/rotated" % HOST)
        assert r.stdout_text == "200", r.stdout_text + r.stderr_text
        # the leaf now comes from the new CA
        py = ("import ssl, socket; c = ssl.create_default_context(); "
              "s = c.wrap_socket(socket.create_connection(('%s', 443)), server_hostname='%s'); "
              "print(dict(x[0] for x in s.getpeercert()['issuer'])['commonName'])" % (HOST, HOST))
        r = sb.exec("python3", "-c", py, timeout_secs=30)
        assert r.exit_code == 0, r.stderr_text
        subj = subprocess.run(["openssl", "x509", "-noout", "-subject"], input=new_ca,
                              capture_output=True, text=True).stdout
        assert r.stdout_text.strip() in subj, (r.stdout_text, subj)
    _, auths = auth_of(bed, m, "/v1/private/rotated")
    assert auths == ["Bearer " + TOKEN]


def test_alpn_offers_http11_only(client, tools_image):
    """A client offering h2 first gets http/1.1 (the proxy parses HTTP/1.1
    only); one offering h2 alone gets no ALPN and speaks HTTP/1.1."""
    py = r"""
import socket, ssl, sys
for protos in (["h2", "http/1.1"], ["h2"]):
    c = ssl.create_default_context()
    c.set_alpn_protocols(protos)
    s = c.wrap_socket(socket.create_connection((sys.argv[1], 443)), server_hostname=sys.argv[1])
    print(s.selected_alpn_protocol())
    s.close()
"""
    with client.create(image=tools_image, network_policy=seed_policy()) as sb:
        r = sb.exec("python3", "-c", py, HOST, timeout_secs=30)
        assert r.exit_code == 0, r.stderr_text
        assert r.stdout_text.split() == ["http/1.1", "None"], r.stdout_text


@pytest.mark.parametrize("name", ["wrongname.example.test", "badcert.example.test",
                                  "expired.example.test"])
def test_unverified_upstream_gets_no_request(client, bed, tools_image, name):
    """An intercepted host whose certificate does not verify (wrong name,
    untrusted CA, expired): 502, and the upstream never sees a request
    (the secret never leaves for it)."""
    pol = NetworkPolicy(allowed_hosts={name: [M.Rule(transforms=[M.Transformer(
        headers={"Authorization": "Bearer __warren_secret_T"},
        headers_secrets={"__warren_secret_T": "INTERNAL_API_TOKEN"})])]})
    m = bed.mark()
    with client.create(image=tools_image, network_policy=pol) as sb:
        r = sh(sb, "curl -sS -w '%%{http_code}' https://%s/v1/private/x" % name)
        assert r.stdout_text.endswith("502"), r.stdout_text + r.stderr_text
        assert TOKEN not in r.stdout_text
    bed.settle()
    assert [x for x in bed.http_requests(since=m) if x["hostname"] == name] == []


def test_http10_client(client, bed, tools_image):
    """An HTTP/1.0 request keeps its version upstream (the server closes
    after the response, which the client waits for): answered at once,
    with the secret."""
    m = bed.mark()
    with client.create(image=tools_image, network_policy=seed_policy()) as sb:
        r = sh(sb, "timeout 20 curl --http1.0 -sS -o /dev/null -w '%%{http_code}' "
                   "https://%s/v1/private/one-oh" % HOST, timeout=30)
        assert r.stdout_text == "200", r.stdout_text + r.stderr_text
    reqs, auths = auth_of(bed, m, "/v1/private/one-oh")
    assert auths == ["Bearer " + TOKEN]
    assert reqs[0]["version"] == "HTTP/1.0", reqs[0]


# UDP to the bed's echo server and back, then an ICMP echo (raw socket),
# from inside a sandbox: prints "udp <reply>" or "udp-fail", "icmp ok" or
# "icmp-fail" (the images' busybox nc has no -u)
UDP_ICMP = r"""
import os, socket, struct, sys
ip, tag = sys.argv[1], sys.argv[2]
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(3)
u.sendto(tag.encode(), (ip, 9000))
try:
    print("udp", u.recvfrom(200)[0].decode())
except OSError as e:
    print("udp-fail", e)
def csum(b):
    b += b"\0" * (len(b) % 2)
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    return ~(s + (s >> 16)) & 0xffff
# an unprivileged ICMP socket (the sandbox has no CAP_NET_RAW; warren-init
# opens ping_group_range): the kernel sets the id and checks replies
pkt = struct.pack("!BBHHH", 8, 0, 0, 0, 1) + tag.encode()
pkt = pkt[:2] + struct.pack("!H", csum(pkt)) + pkt[4:]
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
r.settimeout(3)
r.sendto(pkt, (ip, 0))
try:
    d, a = r.recvfrom(2000)
    print("icmp ok" if a[0] == ip and d[0] == 0 else "icmp-odd %r" % d[:8])
except OSError as e:
    print("icmp-fail", e)
"""


def udp_icmp(sb, ip, tag):
    r = sb.exec("python3", "-c", UDP_ICMP, ip, tag, timeout_secs=30)
    return r.stdout_text + r.stderr_text


def test_credentials_without_policy_keep_udp_and_icmp(client, bed, tools_image):
    """Credentials without a policy: the sandbox behaves as with no policy
    (UDP that is not DNS and ICMP reach the internet and come back) except
    that its TCP goes through the proxy, which substitutes in requests to
    the credentials' hosts."""
    ip = bed.addr("example.test")
    tag = "udp-" + os.urandom(6).hex()
    m = bed.mark()
    s = wr.Sandbox(image=tools_image)
    s.add_credentials(HOST, "INTERNAL_API_TOKEN")
    with client.run(s) as sb:
        out = udp_icmp(sb, ip, tag)
        assert "udp " + tag in out and "icmp ok" in out, out
        r = sh(sb, 'curl -sS -o /dev/null -w "%%{http_code}" -H "Authorization: Bearer '
                   '$INTERNAL_API_TOKEN" https://%s/v1/private/passudp' % HOST)
        assert r.stdout_text == "200", r.stdout_text + r.stderr_text
        assert_token_absent_inside(sb)
    bed.settle()
    assert [e["head"] for e in bed.connections("udp_echo", m)] == [tag]
    pk = bed.packets_since(m)
    if pk is not None:
        assert pk["icmp"] >= 1, pk
    _, auths = auth_of(bed, m, "/v1/private/passudp")
    assert auths == ["Bearer " + TOKEN]


def test_policy_with_credentials_still_drops_udp_and_icmp(client, bed, tools_image):
    """With a policy, credentials change nothing for other protocols: UDP
    and ICMP are dropped, to allowed hosts and others alike (the check
    itself is proved by the test above: the same script gets through
    without a policy)."""
    s = wr.Sandbox(image=tools_image,
                   network_policy=NetworkPolicy(allowed_hosts=["example.test"]))
    s.add_credentials(HOST, "INTERNAL_API_TOKEN")
    with client.run(s) as sb:
        m = bed.mark()
        for name in ("example.test", "pypi.org"):
            out = udp_icmp(sb, bed.addr(name), "x")
            assert "udp-fail" in out and "icmp-fail" in out, out
        bed.assert_nothing_seen(m, servers=["udp_echo", "tcp_echo"])
        # while TCP to the credential's host is intercepted
        m = bed.mark()
        r = sh(sb, 'curl -sS -o /dev/null -w "%%{http_code}" -H "Authorization: Bearer '
                   '$INTERNAL_API_TOKEN" https://%s/v1/private/policyudp' % HOST)
        assert r.stdout_text == "200", r.stdout_text + r.stderr_text
    _, auths = auth_of(bed, m, "/v1/private/policyudp")
    assert auths == ["Bearer " + TOKEN]


def test_rules_and_credentials_survive_warrend_kill9(bed, tools_tar, monkeypatch):
    """kill -9 of warrend, then a restart: a live sandbox's per-host rules
    and credentials (stored ones and Secret.from_local_env values) are
    registered again with warren-egress (sealed in its dir with the
    secrets key, never in the clear on disk): substitution still happens,
    the secret still never appears inside, a credentials-only sandbox
    keeps its UDP."""
    from test_lifecycle import Restartable
    life = Restartable()
    args = ["--upstream-dns", bed.dns, "--egress-upstream-ca", bed.ca_pem]
    local = "loc-" + os.urandom(10).hex()
    monkeypatch.setenv("LOCAL_API_TOKEN", local)
    try:
        life.start(extra=args)
        import_image(life, "busybox:latest")
        tools = import_tools(life, tools_tar)
        with wr.SandboxClient(life.unix_addr) as c:
            c.set_secret("INTERNAL_API_TOKEN", TOKEN)
            c.set_secret("OPENAI_API_KEY", "sk-" + TOKEN)
            p = wr.Sandbox(image="busybox:latest", network_policy=seed_policy())
            p.add_credentials("api.openai.com", "OPENAI_API_KEY")
            policed = c.run(p)
            o = wr.Sandbox(image=tools)
            o.add_credentials(["api.slack.com", "*.slack.com"],
                              Secret.from_local_env("LOCAL_API_TOKEN"))
            opened = c.run(o)
        for secret in (TOKEN, local):
            assert state_files_holding(life, secret) == []
        life.kill9()
        life.start(extra=args)
        log = life.read_log()
        assert "re-attached" in log[log.rfind("=== start 1 ==="):]
        m = bed.mark()
        with wr.SandboxClient(life.unix_addr) as c:
            sb = c.get(id=policed.id)
            r = sh(sb, "wget -q -O - https://%s/v1/private/after-restart" % HOST)
            assert r.exit_code == 0, r.stderr_text
            r = sh(sb, 'wget -q -O /dev/null --header "Authorization: Bearer $OPENAI_API_KEY" '
                       'https://api.openai.com/v1/after-restart')
            assert r.exit_code == 0, r.stderr_text
            assert_token_absent_inside(sb)
            assert_token_absent_inside(sb, "sk-" + TOKEN)
            sb2 = c.get(id=opened.id)
            r = sh(sb2, 'curl -sS -o /dev/null -w "%{http_code}" -H "Authorization: Bearer '
                        '$LOCAL_API_TOKEN" https://hooks.slack.com/v1/private/after-restart')
            assert r.stdout_text == "200", r.stdout_text + r.stderr_text
            tag = "udp-" + os.urandom(6).hex()
            out = udp_icmp(sb2, bed.addr("example.test"), tag)
            assert "udp " + tag in out and "icmp ok" in out, out
            assert_token_absent_inside(sb2, local)
            # a policy still holds: pypi.org is not allowed
            r = sh(sb, "wget -q -O /dev/null http://pypi.org/ 2>&1; echo rc=$?")
            assert "rc=0" not in r.stdout_text
            for s in (sb, sb2):
                s.terminate()
        bed.settle()
        got = {(r["hostname"], r["path"]): dict((k.lower(), v) for k, v in r["headers"])
               .get("authorization") for r in bed.http_requests(since=m)}
        assert got[(HOST, "/v1/private/after-restart")] == "Bearer " + TOKEN
        assert got[("api.openai.com", "/v1/after-restart")] == "Bearer sk-" + TOKEN
        assert got[("hooks.slack.com", "/v1/private/after-restart")] == "Bearer " + local
        assert not any(h == "pypi.org" for h, _ in got)
    finally:
        life.destroy()
