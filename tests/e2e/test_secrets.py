"""Secrets and environment, the seed's full surface (issue 13 item 3):
stored secrets, integrations (named groups of key/values), values read
client-side (local env, dotenv file), `env=` and `secrets=` together,
literal-only places, and no secret value anywhere but inside the sandbox:
not in the state dir, warrend's log (debug level), any API response, or
`warren sandbox get`."""
import json
import os
import subprocess

import grpc
import pytest

import warren as wr
from conftest import WARREN_CLI
from warren import Image, Sandbox, SandboxClient, Secret
from warren._proto.warren.v1 import images_pb2, sandboxes_pb2, sandboxes_pb2_grpc, \
    secrets_pb2, secrets_pb2_grpc

IMAGE = "busybox:latest"

# every value below is a canary: none may be found outside the sandbox
OPENAI = "sk-canary-openai-6a1f0c"
PG_PASSWORD = "canary-pg-password-93bd"
PG_USER = "canary-pg-user-2e77"
MY_SECRET = "canary-my-secret-51c0"
LOCAL = "canary-local-env-8d2a"
FILE_A = "canary-dotenv-a-0b3f"
FILE_B = "canary-dotenv-b-77e1"
CANARIES = [OPENAI, PG_PASSWORD, PG_USER, MY_SECRET, LOCAL, FILE_A, FILE_B]


@pytest.fixture(scope="module", autouse=True)
def stored(d):
    with SandboxClient(d.unix_addr) as c:
        c.set_secret("OPENAI_API_KEY", OPENAI)
        c.set_secret("prod_postgres", values={"PGUSER": PG_USER, "PGPASSWORD": PG_PASSWORD})
        c.set_secret("MY_SECRET", MY_SECRET)


def cli(d, *args, input=None, check=True):
    p = subprocess.run([WARREN_CLI, "--addr", d.unix_addr] + list(args), input=input,
                       capture_output=True, timeout=60)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def env_of(sb):
    r = sb.exec("env")
    assert r.exit_code == 0
    return dict(line.split("=", 1) for line in r.stdout_text.splitlines() if "=" in line)


def test_seed_env_and_secrets_example(d, monkeypatch):
    """configuring-sandboxes.md, with the project's names."""
    monkeypatch.setenv("WARREN_ADDR", d.unix_addr)
    sb = Sandbox(
        image=IMAGE,
        name="api-client",
        env={"LOG_LEVEL": "INFO"},
        secrets=[
            Secret.from_name("OPENAI_API_KEY"),
            Secret.from_integration("prod_postgres"),
        ],
    ).run()
    try:
        e = env_of(sb)
        assert e["LOG_LEVEL"] == "INFO"
        assert e["OPENAI_API_KEY"] == OPENAI
        assert e["PGUSER"] == PG_USER and e["PGPASSWORD"] == PG_PASSWORD
    finally:
        sb.terminate()


def test_sdk_readme_env_mapping(client):
    """sdk-readme.md: env accepts strings and Secret references together."""
    sb = client.create(image=IMAGE, env={
        "GIT_AUTHOR_NAME": "Elliot Marx",
        "SUPER_SECRET_VALUE": Secret.from_name("MY_SECRET"),
    })
    try:
        e = env_of(sb)
        assert e["GIT_AUTHOR_NAME"] == "Elliot Marx"
        assert e["SUPER_SECRET_VALUE"] == MY_SECRET
    finally:
        sb.terminate()


def test_local_env_integration_key_and_env_file(client, tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_VAR", LOCAL)
    f = tmp_path / "creds.env"
    f.write_text(f"# comment\nexport FILE_A={FILE_A}\nFILE_B='{FILE_B}'\n")
    sb = client.create(
        image=IMAGE,
        env={"FROM_LOCAL": Secret.from_local_env("LOCAL_VAR"),
             "DB_PASSWORD": Secret.from_integration("prod_postgres", keys=["PGPASSWORD"])},
        secrets=[Secret.from_local_env_file(str(f)),
                 Secret.from_integration("prod_postgres", keys=["PGUSER"])])
    try:
        e = env_of(sb)
        assert e["FROM_LOCAL"] == LOCAL
        assert e["DB_PASSWORD"] == PG_PASSWORD
        assert e["FILE_A"] == FILE_A and e["FILE_B"] == FILE_B
        assert e["PGUSER"] == PG_USER
        assert "PGPASSWORD" not in e  # keys= selects
    finally:
        sb.terminate()


def test_env_wins_over_secrets_and_later_secrets_win(client, monkeypatch):
    monkeypatch.setenv("LOCAL_VAR", LOCAL)
    sb = client.create(image=IMAGE, env={"OPENAI_API_KEY": "literal"},
                       secrets=[Secret.from_name("OPENAI_API_KEY")])
    try:
        assert env_of(sb)["OPENAI_API_KEY"] == "literal"
    finally:
        sb.terminate()


def test_errors_name_the_field(client, monkeypatch):
    with pytest.raises(wr.NotFound) as ei:
        client.create(image=IMAGE, secrets=[Secret.from_name("NO_SUCH_SECRET")])
    assert "NO_SUCH_SECRET" in str(ei.value)
    with pytest.raises(wr.NotFound) as ei:
        client.create(image=IMAGE, env={"X": Secret.from_name("NOPE")})
    assert "NOPE" in str(ei.value) and "env" in str(ei.value)
    # an integration in env= needs exactly one key
    with pytest.raises(wr.InvalidArgument) as ei:
        client.create(image=IMAGE, env={"X": Secret.from_integration("prod_postgres")})
    assert "env" in str(ei.value) and "key" in str(ei.value)
    with pytest.raises(wr.InvalidArgument):
        client.create(image=IMAGE, env={"X": Secret.from_integration(
            "prod_postgres", keys=["PGUSER", "PGPASSWORD"])})
    with pytest.raises((wr.InvalidArgument, wr.NotFound)) as ei:
        client.create(image=IMAGE, secrets=[Secret.from_integration("prod_postgres",
                                                                    keys=["NO_KEY"])])
    assert "NO_KEY" in str(ei.value)
    monkeypatch.delenv("UNSET_VAR_FOR_TEST", raising=False)
    with pytest.raises(ValueError) as ei:
        client.create(image=IMAGE, env={"X": Secret.from_local_env("UNSET_VAR_FOR_TEST")})
    assert "UNSET_VAR_FOR_TEST" in str(ei.value)


def test_literal_only_places(client):
    with pytest.raises(TypeError) as ei:
        Image.debian_slim().env({"K": Secret.from_name("MY_SECRET")})
    assert "literal" in str(ei.value)
    sb = client.create(image=IMAGE)
    try:
        with pytest.raises(TypeError) as ei:
            sb.exec("true", env={"K": Secret.from_name("MY_SECRET")})
        assert "literal" in str(ei.value)
    finally:
        sb.terminate()


def test_cli_secret_set_ls_rm_integration(d, tmp_path):
    a = cli(d, "secret", "set", "CLI_ONE", input=b"cli-one-value\n")
    assert a.stdout == b"CLI_ONE\n"
    cli(d, "secret", "set", "CLI_INT", "--integration", "USER=bob", "PASSWORD=hunter2-cli")
    f = tmp_path / "int.env"
    f.write_text("K1=v1\nK2=v2\n")
    cli(d, "secret", "set", "CLI_FILE", "--from-env-file", str(f))
    j = {s["name"]: s for s in json.loads(cli(d, "secret", "ls", "--json").stdout)}
    assert j["CLI_INT"]["keys"] == ["PASSWORD", "USER"]
    assert j["CLI_FILE"]["keys"] == ["K1", "K2"]
    assert j["CLI_ONE"]["version"] == 1 and j["CLI_ONE"]["updated_at_unix"]
    cli(d, "secret", "set", "CLI_ONE", input=b"cli-one-value-2\n")
    j = {s["name"]: s for s in json.loads(cli(d, "secret", "ls", "--json").stdout)}
    assert j["CLI_ONE"]["version"] == 2
    out = cli(d, "secret", "ls").stdout.decode()
    assert "CLI_INT" in out and "hunter2" not in out and "cli-one-value" not in out
    p = cli(d, "secret", "set", "CLI_BAD", "--integration", "NOEQUALS", check=False)
    assert p.returncode != 0 and b"KEY=VALUE" in p.stderr
    with SandboxClient(d.unix_addr) as c:
        sb = c.create(image=IMAGE, secrets=[Secret.from_integration("CLI_INT")])
        try:
            assert env_of(sb)["PASSWORD"] == "hunter2-cli"
        finally:
            sb.terminate()
    cli(d, "secret", "rm", "CLI_ONE", "CLI_INT", "CLI_FILE")


def test_no_value_outside_the_sandbox(d, monkeypatch, tmp_path):
    """Every response, the CLI's view, the log and the state dir: no canary."""
    monkeypatch.setenv("LOCAL_VAR", LOCAL)
    f = tmp_path / "creds.env"
    f.write_text(f"FILE_A={FILE_A}\nFILE_B={FILE_B}\n")
    seen = []
    with grpc.insecure_channel(d.unix_addr) as ch:
        sbs = sandboxes_pb2_grpc.SandboxesStub(ch)
        secs = secrets_pb2_grpc.SecretsStub(ch)
        with SandboxClient(d.unix_addr) as c:
            sb = Sandbox(image=IMAGE, name="canary",
                         env={"A": Secret.from_name("MY_SECRET"),
                              "B": Secret.from_local_env("LOCAL_VAR"),
                              "C": Secret.from_integration("prod_postgres", keys=["PGPASSWORD"])},
                         secrets=[Secret.from_name("OPENAI_API_KEY"),
                                  Secret.from_integration("prod_postgres"),
                                  Secret.from_local_env_file(str(f))])
            created = c._unary(c._sandboxes.CreateSandbox, sb._request())
            seen.append(created.SerializeToString())
            try:
                seen.append(sbs.GetSandbox(sandboxes_pb2.GetSandboxRequest(id=created.id))
                            .SerializeToString())
                seen.append(sbs.ListSandboxes(sandboxes_pb2.ListSandboxesRequest())
                            .SerializeToString())
                seen.append(secs.ListSecrets(secrets_pb2.ListSecretsRequest())
                            .SerializeToString())
                for args in (["sandbox", "get", created.id], ["sandbox", "get", created.id,
                                                              "--json"],
                             ["sandbox", "ls", "--json"], ["secret", "ls", "--json"]):
                    p = cli(d, *args)
                    seen.append(p.stdout + p.stderr)
                # the values did arrive, so the canaries are meaningful
                h = c.get(id=created.id)
                e = env_of(h)
                assert e["A"] == MY_SECRET and e["B"] == LOCAL and e["C"] == PG_PASSWORD
                assert e["OPENAI_API_KEY"] == OPENAI and e["FILE_A"] == FILE_A
            finally:
                r = sbs.TerminateSandbox(sandboxes_pb2.TerminateSandboxRequest(id=created.id))
                seen.append(r.SerializeToString())
        # a failed create's error names the field, never a value
        with pytest.raises(grpc.RpcError) as ei:
            bad = sandboxes_pb2.CreateSandboxRequest(image=images_pb2.ImageSpec(ref=IMAGE))
            bad.env["X"].secret.inline_value = LOCAL.encode()
            bad.env["Y"].secret.name = "NO_SUCH"
            sbs.CreateSandbox(bad)
        seen.append(ei.value.details().encode())
    blob = b"\n".join(seen) + d.read_log().encode()
    for c in CANARIES:
        assert c.encode() not in blob, c
    for root, _, files in os.walk(d.state_dir):
        for name in files:
            p = os.path.join(root, name)
            if not os.path.isfile(p) or os.path.islink(p):
                continue
            try:
                with open(p, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            for c in CANARIES:
                assert c.encode() not in data, (c, p)
