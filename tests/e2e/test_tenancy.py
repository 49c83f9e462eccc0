"""Tenancy (issue 17 items 1 and 5): API tokens scope every RPC to their
environment. Two environments with their own tokens, over TCP+TLS as the
seed's "Connecting" example: every RPC of warren.v1 that names an object
of the other environment answers NOT_FOUND (or, for a name it would take,
ALREADY_EXISTS), no listing shows it, and the owner's objects are intact
afterwards. Plus: wrong/expired/revoked tokens, roles, non-root unix
peers, WARREN_ENVIRONMENT, the audit log and the CLI."""
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time

import grpc
import pytest

import warren as wr
from conftest import WARREN_CLI, Daemon, ROOT, import_image
from warren._proto.grpc.health.v1 import health_pb2, health_pb2_grpc
from warren._proto.warren.v1 import files_pb2, files_pb2_grpc
from warren._proto.warren.v1 import (identity_pb2, identity_pb2_grpc, images_pb2,
                                     images_pb2_grpc, sandboxes_pb2, sandboxes_pb2_grpc,
                                     secrets_pb2, secrets_pb2_grpc, system_pb2, system_pb2_grpc,
                                     volumes_pb2, volumes_pb2_grpc)

IMAGE = "busybox:latest"
NF = grpc.StatusCode.NOT_FOUND


@pytest.fixture(scope="module")
def d():
    # an issuer: sandboxes of this daemon can have identity tokens
    dd = Daemon(tls=True, extra_args=["--issuer", "https://warren.test"])
    try:
        import_image(dd, IMAGE)
        yield dd
    finally:
        dd.stop()


@pytest.fixture(scope="module")
def root(d):
    with wr.SandboxClient(d.unix_addr) as c:
        yield c


@pytest.fixture(scope="module")
def tokens(root):
    return {
        "a": root.create_token("alpha", role="admin", description="alpha admin").token,
        "b": root.create_token("beta", role="admin", description="beta admin").token,
        "b_user": root.create_token("beta", role="user").token,
    }


def tls_client(d, token, **kw):
    # the seed's "Connecting": SandboxClient(addr, use_tls=True, token=...)
    return wr.SandboxClient(d.tcp_addr, use_tls=True, ca_file=d.ca_file, token=token, **kw)


class Stubs:
    def __init__(self, d, token=None):
        creds = grpc.ssl_channel_credentials(root_certificates=open(d.ca_file, "rb").read())
        self.ch = grpc.secure_channel(d.tcp_addr, creds,
                                      options=[("grpc.ssl_target_name_override", "localhost")])
        self.md = [("authorization", "Bearer " + token)] if token else []
        self.sandboxes = sandboxes_pb2_grpc.SandboxesStub(self.ch)
        self.images = images_pb2_grpc.ImagesStub(self.ch)
        self.volumes = volumes_pb2_grpc.VolumesStub(self.ch)
        self.secrets = secrets_pb2_grpc.SecretsStub(self.ch)
        self.identity = identity_pb2_grpc.IdentityStub(self.ch)
        self.system = system_pb2_grpc.SystemStub(self.ch)
        self.files = files_pb2_grpc.FilesStub(self.ch)
        self.health = health_pb2_grpc.HealthStub(self.ch)

    def close(self):
        self.ch.close()


def code_of(fn):
    try:
        r = fn()
        if hasattr(r, "__iter__") and not hasattr(r, "DESCRIPTOR"):
            list(r)
    except grpc.RpcError as e:
        return e.code(), e.details()
    return grpc.StatusCode.OK, ""


def wait_port(sb, port):
    for _ in range(200):
        r = sb.exec("sh", "-c", f"netstat -ltn | grep -q ':{port} ' && echo up")
        if r.stdout_text.strip() == "up":
            return
        time.sleep(0.05)
    raise AssertionError("nothing listens on %d" % port)


@pytest.fixture(scope="module")
def alpha(d, tokens):
    """Alpha's objects, made with alpha's token over TLS: a named sandbox
    listening on 9000 with a detached exec, a volume with a file, a secret,
    an image (a snapshot named alpha-img:1)."""
    with tls_client(d, tokens["a"]) as a:
        sb = a.create(image=IMAGE, name="shared-name", block_network=True,
                      entrypoint=["nc", "-ll", "-p", "9000", "-e", "cat"])
        wait_port(sb, 9000)
        p = sb.exec_start("sh", "-c", "echo alpha-exec; sleep 600", detach=True, journal=True)
        exec_id = p.exec_id
        p.detach()
        vol = a._unary(a._volumes.CreateVolume, volumes_pb2.CreateVolumeRequest(name="vol"))
        a._unary(a._volumes.PutFile, iter([
            volumes_pb2.PutFileRequest(meta=volumes_pb2.PutFileMeta(volume="vol", path=b"f.txt")),
            volumes_pb2.PutFileRequest(data=b"alpha-data")]))
        a._unary(a._secrets.SetSecret, secrets_pb2.SetSecretRequest(name="sec", value=b"alpha-secret"))
        img = a._unary(a._sandboxes.SnapshotSandbox,
                       sandboxes_pb2.SnapshotSandboxRequest(id=sb.id, image_name="alpha-img:1"))
        objs = {"sandbox": sb.id, "name": "shared-name", "exec_id": exec_id, "volume": "vol",
                "secret": "sec", "image_id": img.id, "image_name": "alpha-img:1"}
        assert vol.name == "vol"
        yield objs
        sb.terminate()


def one(msg):
    return iter([msg])


# Every RPC of warren.v1 (but Diag, the test service): how beta's admin
# token tries alpha's object, and what it must get.
def table(o):
    S, I, V, X, ID, F = (sandboxes_pb2, images_pb2, volumes_pb2, secrets_pb2, identity_pb2,
                         files_pb2)
    sid, name = o["sandbox"], o["name"]
    return [
        # Sandboxes
        ("Sandboxes/CreateSandbox", "alpha's image",
         lambda s: s.sandboxes.CreateSandbox(S.CreateSandboxRequest(
             image=I.ImageSpec(ref=o["image_name"])), metadata=s.md), NF),
        ("Sandboxes/CreateSandbox", "alpha's image by id",
         lambda s: s.sandboxes.CreateSandbox(S.CreateSandboxRequest(
             image=I.ImageSpec(ref=o["image_id"])), metadata=s.md), NF),
        ("Sandboxes/CreateSandbox", "alpha's volume",
         lambda s: s.sandboxes.CreateSandbox(S.CreateSandboxRequest(
             image=I.ImageSpec(ref=IMAGE), volumes=[S.VolumeMount(volume=o["volume"], path="/mnt")]),
             metadata=s.md), NF),
        ("Sandboxes/CreateSandbox", "alpha's secret",
         lambda s: s.sandboxes.CreateSandbox(S.CreateSandboxRequest(
             image=I.ImageSpec(ref=IMAGE), secrets=[X.SecretRef(name=o["secret"])]),
             metadata=s.md), NF),
        ("Sandboxes/GetSandbox", "by id",
         lambda s: s.sandboxes.GetSandbox(S.GetSandboxRequest(id=sid), metadata=s.md), NF),
        ("Sandboxes/GetSandbox", "by name",
         lambda s: s.sandboxes.GetSandbox(S.GetSandboxRequest(name=name), metadata=s.md), NF),
        ("Sandboxes/TerminateSandbox", "",
         lambda s: s.sandboxes.TerminateSandbox(S.TerminateSandboxRequest(id=sid), metadata=s.md), NF),
        ("Sandboxes/PauseSandbox", "",
         lambda s: s.sandboxes.PauseSandbox(S.PauseSandboxRequest(id=sid), metadata=s.md), NF),
        ("Sandboxes/ResumeSandbox", "",
         lambda s: s.sandboxes.ResumeSandbox(S.ResumeSandboxRequest(name=name), metadata=s.md), NF),
        ("Sandboxes/SnapshotSandbox", "",
         lambda s: s.sandboxes.SnapshotSandbox(S.SnapshotSandboxRequest(id=sid), metadata=s.md), NF),
        ("Sandboxes/SnapshotSandbox", "taking alpha's image name",
         lambda s: s.sandboxes.SnapshotSandbox(S.SnapshotSandboxRequest(
             id=sid, image_name=o["image_name"]), metadata=s.md), grpc.StatusCode.ALREADY_EXISTS),
        ("Sandboxes/ForkSandbox", "",
         lambda s: s.sandboxes.ForkSandbox(S.ForkSandboxRequest(name=name), metadata=s.md), NF),
        ("Sandboxes/Exec", "start",
         lambda s: s.sandboxes.Exec(one(S.ExecRequest(start=S.ExecStart(
             sandbox=sid, argv=["echo", "x"]))), metadata=s.md), NF),
        ("Sandboxes/Exec", "attach by exec id",
         lambda s: s.sandboxes.Exec(one(S.ExecRequest(attach=S.ExecAttach(
             sandbox=sid, exec_id=o["exec_id"]))), metadata=s.md), NF),
        ("Sandboxes/Exec", "attach by exec id, sandbox by name",
         lambda s: s.sandboxes.Exec(one(S.ExecRequest(attach=S.ExecAttach(
             sandbox=name, exec_id=o["exec_id"]))), metadata=s.md), NF),
        ("Sandboxes/ListProcesses", "",
         lambda s: s.sandboxes.ListProcesses(S.ListProcessesRequest(sandbox=sid), metadata=s.md), NF),
        ("Sandboxes/ListNetworkEvents", "",
         lambda s: s.sandboxes.ListNetworkEvents(S.ListNetworkEventsRequest(sandbox=sid),
                                                 metadata=s.md), NF),
        ("Sandboxes/GetExecChanges", "alpha's journaled exec",
         lambda s: s.sandboxes.GetExecChanges(S.GetExecChangesRequest(
             sandbox=sid, exec_id=o["exec_id"]), metadata=s.md), NF),
        ("Sandboxes/RollbackExec", "alpha's journaled exec",
         lambda s: s.sandboxes.RollbackExec(S.RollbackExecRequest(
             sandbox=name, exec_id=o["exec_id"]), metadata=s.md), NF),
        # Files (of a running sandbox)
        ("Files/ReadFile", "",
         lambda s: s.files.ReadFile(F.ReadFileRequest(sandbox=sid, path=b"/etc/hostname"),
                                    metadata=s.md), NF),
        ("Files/WriteFile", "",
         lambda s: s.files.WriteFile(iter([F.WriteFileRequest(meta=F.WriteFileMeta(
             sandbox=sid, path=b"/tmp/beta")), F.WriteFileRequest(data=b"beta")]),
             metadata=s.md), NF),
        ("Files/ListDir", "",
         lambda s: s.files.ListDir(F.ListDirRequest(sandbox=name, path=b"/"), metadata=s.md), NF),
        ("Files/Stat", "",
         lambda s: s.files.Stat(F.StatFileRequest(sandbox=sid, path=b"/"), metadata=s.md), NF),
        ("Files/Remove", "",
         lambda s: s.files.Remove(F.RemovePathRequest(sandbox=sid, path=b"/tmp/x"), metadata=s.md), NF),
        ("Files/MakeDir", "",
         lambda s: s.files.MakeDir(F.MakeDirRequest(sandbox=sid, path=b"/tmp/d"), metadata=s.md), NF),
        ("Files/Rename", "",
         lambda s: s.files.Rename(F.RenamePathRequest(sandbox=sid, **{"from": b"/tmp/a"},
                                                      to=b"/tmp/b"), metadata=s.md), NF),
        ("Files/Watch", "",
         lambda s: s.files.Watch(F.WatchRequest(sandbox=sid, path=b"/tmp"), metadata=s.md), NF),
        ("Sandboxes/Tunnel", "",
         lambda s: s.sandboxes.Tunnel(one(S.TunnelRequest(sandbox=sid, port=9000)), metadata=s.md), NF),
        # Images
        ("Images/GetImage", "by name",
         lambda s: s.images.GetImage(I.GetImageRequest(image=o["image_name"]), metadata=s.md), NF),
        ("Images/GetImage", "by id",
         lambda s: s.images.GetImage(I.GetImageRequest(image=o["image_id"]), metadata=s.md), NF),
        ("Images/DeleteImage", "",
         lambda s: s.images.DeleteImage(I.DeleteImageRequest(image=o["image_name"]), metadata=s.md), NF),
        ("Images/ImportImage", "taking alpha's image name",
         lambda s: s.images.ImportImage(one(I.ImportImageRequest(
             meta=I.ImportImageMeta(name=o["image_name"]))), metadata=s.md),
         grpc.StatusCode.ALREADY_EXISTS),
        ("Images/PullImage", "taking alpha's image name",
         lambda s: s.images.PullImage(I.PullImageRequest(ref=o["image_name"]), metadata=s.md),
         grpc.StatusCode.ALREADY_EXISTS),
        ("Images/PruneImages", "every environment's unused images",
         lambda s: s.images.PruneImages(I.PruneImagesRequest(), metadata=s.md),
         grpc.StatusCode.PERMISSION_DENIED),
        ("Images/BuildImage", "on alpha's image",
         lambda s: s.images.BuildImage(I.BuildImageRequest(build=I.ImageBuild(
             base_image=o["image_name"])), metadata=s.md), NF),
        # Volumes
        ("Volumes/GetVolume", "",
         lambda s: s.volumes.GetVolume(V.GetVolumeRequest(name=o["volume"]), metadata=s.md), NF),
        ("Volumes/DeleteVolume", "",
         lambda s: s.volumes.DeleteVolume(V.DeleteVolumeRequest(name=o["volume"]), metadata=s.md), NF),
        ("Volumes/PutFile", "",
         lambda s: s.volumes.PutFile(iter([V.PutFileRequest(meta=V.PutFileMeta(
             volume=o["volume"], path=b"f.txt")), V.PutFileRequest(data=b"beta")]),
             metadata=s.md), NF),
        ("Volumes/GetFile", "",
         lambda s: s.volumes.GetFile(V.GetFileRequest(volume=o["volume"], path=b"f.txt"),
                                     metadata=s.md), NF),
        ("Volumes/ListFiles", "",
         lambda s: s.volumes.ListFiles(V.ListFilesRequest(volume=o["volume"]), metadata=s.md), NF),
        ("Volumes/RemoveFile", "",
         lambda s: s.volumes.RemoveFile(V.RemoveFileRequest(volume=o["volume"], path=b"f.txt"),
                                        metadata=s.md), NF),
        ("Volumes/Stat", "",
         lambda s: s.volumes.Stat(V.StatRequest(volume=o["volume"], path=b"f.txt"), metadata=s.md), NF),
        # Secrets
        ("Secrets/DeleteSecret", "",
         lambda s: s.secrets.DeleteSecret(X.DeleteSecretRequest(name=o["secret"]), metadata=s.md), NF),
        # Identity: alpha's tokens, audit and quota are not beta's admin's
        ("Identity/ListTokens", "alpha's",
         lambda s: s.identity.ListTokens(ID.ListTokensRequest(environment="alpha"), metadata=s.md),
         grpc.StatusCode.PERMISSION_DENIED),
        ("Identity/RevokeToken", "alpha's",
         lambda s: s.identity.RevokeToken(ID.RevokeTokenRequest(id=o["a_token_id"]), metadata=s.md), NF),
        ("Identity/CreateToken", "for alpha",
         lambda s: s.identity.CreateToken(ID.CreateTokenRequest(environment="alpha"), metadata=s.md),
         grpc.StatusCode.PERMISSION_DENIED),
        ("Identity/ListAuditEvents", "alpha's",
         lambda s: s.identity.ListAuditEvents(ID.ListAuditEventsRequest(environment="alpha"),
                                              metadata=s.md), grpc.StatusCode.PERMISSION_DENIED),
        ("Identity/GetQuota", "alpha's",
         lambda s: s.identity.GetQuota(ID.GetQuotaRequest(environment="alpha"), metadata=s.md),
         grpc.StatusCode.PERMISSION_DENIED),
        ("Identity/SetQuota", "alpha's",
         lambda s: s.identity.SetQuota(ID.SetQuotaRequest(quota=ID.Quota(
             environment="alpha", max_sandboxes=100)), metadata=s.md),
         grpc.StatusCode.PERMISSION_DENIED),
    ]


# RPCs with no object of another environment to name, each with what the
# test below checks instead.
NOT_OBJECT_SCOPED = {
    "Sandboxes/ListSandboxes": "listing: test_lists_show_only_own",
    "Images/ListImages": "listing: test_lists_show_only_own",
    "Volumes/ListVolumes": "listing: test_lists_show_only_own",
    "Volumes/CreateVolume": "same name, own namespace: test_same_names_are_separate",
    "Secrets/ListSecrets": "listing: test_lists_show_only_own",
    "Secrets/SetSecret": "same name, own namespace: test_same_names_are_separate",
    "System/GetVersion": "public: test_tls_needs_a_token",
    "Identity/WhoAmI": "the caller only: test_whoami_and_environment",
    "Identity/GetWorkloadIdentityToken": "the caller's own environment: test_workload_identity_federation",
    # build contexts travel by digest into one content-addressed store: a
    # tenant learns at most that some build uploaded the same bytes
    "Images/MissingBlobs": "content addressed, no names",
    "Images/UploadBlob": "content addressed, no names (the digest is checked)",
}


def all_methods():
    out = []
    for mod in (sandboxes_pb2, images_pb2, volumes_pb2, secrets_pb2, identity_pb2, system_pb2,
                files_pb2):
        for svc in mod.DESCRIPTOR.services_by_name.values():
            for m in svc.methods:
                out.append("%s/%s" % (svc.name, m.name))
    return out


def test_table_covers_every_rpc(alpha):
    covered = {row[0] for row in table(dict(alpha, a_token_id=""))} | set(NOT_OBJECT_SCOPED)
    missing = [m for m in all_methods() if m not in covered]
    assert not missing, "RPCs without a tenancy row: %s" % missing


def test_other_environment_is_not_found_in_every_rpc(d, root, tokens, alpha):
    a_tok = [t for t in root.list_tokens("alpha") if t.description == "alpha admin"][0]
    o = dict(alpha, a_token_id=a_tok.id)
    s = Stubs(d, tokens["b"])
    try:
        results = []
        for method, what, fn, want in table(o):
            code, details = code_of(lambda: fn(s))
            results.append((method, what, code, want, details))
        wrong = [r for r in results if r[2] != r[3]]
        assert not wrong, "\n".join("%s (%s): got %s want %s: %s" % r for r in wrong)
        # NOT_FOUND of another environment's object reads like a missing one
        for method, what, code, want, details in results:
            if code == NF:
                assert "alpha" not in details.replace(o["image_name"], ""), (method, details)
    finally:
        s.close()
    # alpha's objects are intact and alpha still reaches every one of them
    with tls_client(d, tokens["a"]) as a:
        sb = a.get(id=alpha["sandbox"])
        assert sb.exec("echo", "ok").stdout_text == "ok\n"
        q = sb.attach(alpha["exec_id"], offset=0)
        got = ""
        for ev in q.output():
            got += ev.stdout or ""
            if "alpha-exec" in got:
                break
        q.detach()
        assert "alpha-exec" in got
        f = b"".join(c.data for c in a._volumes.GetFile(
            volumes_pb2.GetFileRequest(volume="vol", path=b"f.txt"), metadata=[
                ("authorization", "Bearer " + tokens["a"])]))
        assert f == b"alpha-data"
        assert a._unary(a._images.GetImage,
                        images_pb2.GetImageRequest(image=alpha["image_name"])).id == alpha["image_id"]
        with sb.connect(9000) as c:
            c.send(b"ping")
            c.close_write()
            data = b""
            while True:
                x = c.recv()
                if not x:
                    break
                data += x
            assert data == b"ping"
        assert [x.name for x in a._unary(a._secrets.ListSecrets,
                                         secrets_pb2.ListSecretsRequest()).secrets] == ["sec"]


def test_identity_token_is_scoped_like_a_user_token(d, root, alpha):
    """The table again with the identity token of a sandbox of ident-only
    (identity=True) instead of beta's admin token: every RPC on alpha's
    objects is refused the same way (a user may not revoke tokens at all:
    PERMISSION_DENIED where the admin gets NOT_FOUND)."""
    a_tok = [t for t in root.list_tokens("alpha") if t.description == "alpha admin"][0]
    o = dict(alpha, a_token_id=a_tok.id)
    with wr.SandboxClient(d.unix_addr, environment="ident-only") as g:
        sb = g.create(image=IMAGE, identity=True, block_network=True)
        try:
            tok = sb.exec("cat", "/run/warren/identity/token").stdout_text.strip()
            s = Stubs(d, tok)
            try:
                who = identity_pb2.WhoAmIRequest()
                me = s.identity.WhoAmI(who, metadata=s.md)
                assert (me.environment, me.role, me.subject) == ("ident-only", "user",
                                                                 "sandbox:" + sb.id)
                wrong = []
                for method, what, fn, want in table(o):
                    code, details = code_of(lambda: fn(s))
                    ok = code == want or (method == "Identity/RevokeToken" and
                                          code == grpc.StatusCode.PERMISSION_DENIED)
                    if not ok:
                        wrong.append((method, what, code, want, details))
                    if code == NF:
                        assert "alpha" not in details.replace(o["image_name"], ""), (method,
                                                                                      details)
                assert not wrong, "\n".join("%s (%s): got %s want %s: %s" % r for r in wrong)
            finally:
                s.close()
        finally:
            sb.terminate()


def test_lists_show_only_own(d, tokens, alpha):
    with tls_client(d, tokens["b"]) as b:
        sbs = b.list()
        assert alpha["sandbox"] not in [x.id for x in sbs]
        mine = b.create(image=IMAGE)
        try:
            assert [x.id for x in b.list()] == [mine.id]
            assert [x.id for x in b.list(name=alpha["name"])] == []
            imgs = b._unary(b._images.ListImages, images_pb2.ListImagesRequest()).images
            assert alpha["image_id"] not in [i.id for i in imgs]
            assert all(alpha["image_name"] not in n for i in imgs for n in i.names)
            # the shared catalog (the operator's images) stays usable
            assert any("busybox" in n for i in imgs for n in i.names)
            vols = b._unary(b._volumes.ListVolumes, volumes_pb2.ListVolumesRequest()).volumes
            assert "vol" not in [v.name for v in vols]
            secs = b._unary(b._secrets.ListSecrets, secrets_pb2.ListSecretsRequest()).secrets
            assert "sec" not in [x.name for x in secs]
        finally:
            mine.terminate()
    with tls_client(d, tokens["a"]) as a:
        assert alpha["sandbox"] in [x.id for x in a.list()]
        assert "vol" in [v.name for v in a._unary(a._volumes.ListVolumes,
                                                   volumes_pb2.ListVolumesRequest()).volumes]


def test_same_names_are_separate(d, tokens, alpha):
    """beta makes a volume, a secret and a sandbox with alpha's names: its
    own, and alpha's are untouched."""
    with tls_client(d, tokens["b"]) as b:
        b._unary(b._volumes.CreateVolume, volumes_pb2.CreateVolumeRequest(name="vol"))
        b._unary(b._secrets.SetSecret, secrets_pb2.SetSecretRequest(name="sec", value=b"beta"))
        r = code_of(lambda: list(b._volumes.GetFile(
            volumes_pb2.GetFileRequest(volume="vol", path=b"f.txt"),
            metadata=[("authorization", "Bearer " + tokens["b"])])))
        assert r[0] == NF  # beta's own, empty volume
        sb = b.create(image=IMAGE, name=alpha["name"], secrets=[wr.Secret.from_name("sec")])
        try:
            assert sb.exec("sh", "-c", "echo $sec").stdout_text.strip() == "beta"
        finally:
            sb.terminate()
        b._unary(b._secrets.DeleteSecret, secrets_pb2.DeleteSecretRequest(name="sec"))
        b._unary(b._volumes.DeleteVolume, volumes_pb2.DeleteVolumeRequest(name="vol"))
    with tls_client(d, tokens["a"]) as a:
        infos = a._unary(a._secrets.ListSecrets, secrets_pb2.ListSecretsRequest()).secrets
        assert [(x.name, x.version) for x in infos] == [("sec", 1)]
        assert a.get(name=alpha["name"]).id == alpha["sandbox"]


def test_tls_needs_a_token(d, tokens):
    s = Stubs(d)  # no token
    try:
        assert s.system.GetVersion(system_pb2.GetVersionRequest()).api_version == "v1"
        assert s.health.Check(health_pb2.HealthCheckRequest()).status == \
            health_pb2.HealthCheckResponse.SERVING
        code, details = code_of(lambda: s.sandboxes.ListSandboxes(
            sandboxes_pb2.ListSandboxesRequest()))
        assert code == grpc.StatusCode.UNAUTHENTICATED
        assert "token" in details
    finally:
        s.close()
    with tls_client(d, None) as c:
        with pytest.raises(wr.Unauthenticated):
            c.list()


@pytest.mark.parametrize("header", [
    "Bearer wt_0123456789abcdef_" + "0" * 64,          # well-formed, unknown
    "Bearer not-a-token",                               # malformed
    "Bearer",                                           # no token
    "Basic eDp5",                                       # another scheme
])
def test_wrong_token_is_unauthenticated(d, header):
    s = Stubs(d)
    try:
        code, details = code_of(lambda: s.sandboxes.ListSandboxes(
            sandboxes_pb2.ListSandboxesRequest(), metadata=[("authorization", header)]))
        assert code == grpc.StatusCode.UNAUTHENTICATED, details
    finally:
        s.close()
    # also on the unix socket: a root peer that sends a token is that token
    with grpc.insecure_channel(d.unix_addr) as ch:
        code, _ = code_of(lambda: sandboxes_pb2_grpc.SandboxesStub(ch).ListSandboxes(
            sandboxes_pb2.ListSandboxesRequest(), metadata=[("authorization", header)]))
        assert code == grpc.StatusCode.UNAUTHENTICATED


def test_tampered_token_is_unauthenticated(d, tokens):
    good = tokens["b"]
    last = "0" if good[-1] != "0" else "1"
    with tls_client(d, good[:-1] + last) as c:
        with pytest.raises(wr.Unauthenticated):
            c.list()


def test_expired_and_revoked_tokens(d, root):
    short = root.create_token("gamma", expires="1s")
    revoked = root.create_token("gamma")
    with tls_client(d, short.token) as c:
        assert c.list() == []
    with tls_client(d, revoked.token) as c:
        assert c.whoami().environment == "gamma"
        info = root.revoke_token(revoked.info.id)
        assert info.revoked_unix_nanos > 0
        with pytest.raises(wr.Unauthenticated) as ei:
            c.list()
        assert "revoked" in str(ei.value)
    time.sleep(1.3)
    with tls_client(d, short.token) as c:
        with pytest.raises(wr.Unauthenticated) as ei:
            c.list()
        assert "expired" in str(ei.value)
    ls = {t.id: t for t in root.list_tokens("gamma")}
    assert ls[revoked.info.id].revoked_unix_nanos and ls[short.info.id].expires_unix_nanos
    # the token itself is nowhere in the database
    db = open(os.path.join(d.state_dir, "warren.db"), "rb").read()
    assert short.token.encode() not in db and revoked.token.encode() not in db


def test_roles(d, tokens):
    with tls_client(d, tokens["b_user"]) as u:
        assert u.whoami().role == "user"
        with pytest.raises(wr.PermissionDenied):
            u.create_token("beta")
        with pytest.raises(wr.PermissionDenied):
            u.list_tokens()
        with pytest.raises(wr.PermissionDenied):
            u.audit_events()
    with tls_client(d, tokens["b"]) as adm:
        t = adm.create_token(role="user")  # its own environment
        assert t.info.environment == "beta"
        assert t.info.id in [x.id for x in adm.list_tokens()]
        adm.revoke_token(t.info.id)
        with pytest.raises(wr.PermissionDenied):
            adm._unary(adm._identity.SetQuota, identity_pb2.SetQuotaRequest(
                quota=identity_pb2.Quota(environment="beta", max_sandboxes=1)))


def test_whoami_and_environment(d, root, tokens, alpha):
    assert (root.whoami().subject, root.whoami().role) == ("uid:0", "operator")
    assert root.whoami().environment == "default"
    assert alpha["sandbox"] not in [x.id for x in root.list()]
    # the operator acts in any environment (WARREN_ENVIRONMENT)
    with wr.SandboxClient(d.unix_addr, environment="alpha") as op:
        assert op.whoami().environment == "alpha"
        assert alpha["sandbox"] in [x.id for x in op.list()]
    # a token only in its own
    with tls_client(d, tokens["b"], environment="alpha") as c:
        with pytest.raises(wr.PermissionDenied):
            c.list()
    with tls_client(d, tokens["b"], environment="beta") as c:
        assert c.whoami().environment == "beta"


def test_non_root_unix_peer_needs_a_token(d, tokens):
    # let uid 65534 reach the socket (0660 root:root by default)
    os.chmod(d.sock, 0o666)
    os.chmod(os.path.dirname(d.sock), 0o755)
    cli = shutil.copy(WARREN_CLI, tempfile.mkdtemp(prefix="wr-cli-"))
    os.chmod(os.path.dirname(cli), 0o755)
    base = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", cli,
            "--addr", d.unix_addr]
    p = subprocess.run(base + ["sandbox", "ls"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "UNAUTHENTICATED" in p.stderr, p.stderr
    p = subprocess.run(base + ["--token", tokens["b"], "env", "whoami"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0 and "environment beta" in p.stdout, p.stderr
    p = subprocess.run(base + ["env", "whoami"], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, WARREN_TOKEN=tokens["a"]))
    assert p.returncode == 0 and "environment alpha" in p.stdout, p.stderr
    shutil.rmtree(os.path.dirname(cli), ignore_errors=True)


def test_audit_log(d, root, tokens):
    with tls_client(d, tokens["a"]) as a:
        sb = a.create(image=IMAGE, name="audited")
        sb.exec("true")
        sb.terminate()
        with pytest.raises(wr.NotFound):
            a._unary(a._volumes.DeleteVolume, volumes_pb2.DeleteVolumeRequest(name="nope"))
        ev = a.audit_events(limit=50)
    me = a_id = [t.id for t in root.list_tokens("alpha") if t.description == "alpha admin"][0]
    by = {(e.method.rsplit("/", 1)[1], e.object): e for e in ev}
    create = by[("CreateSandbox", "audited")]
    assert (create.environment, create.token_id, create.code) == ("alpha", me, 0)
    assert create.subject == "token:" + a_id and "tls" in create.peer
    assert by[("Exec", sb.id)].code == 0
    assert by[("TerminateSandbox", sb.id)].code == 0
    assert by[("DeleteVolume", "nope")].code == grpc.StatusCode.NOT_FOUND.value[0]
    assert not any(e.method.endswith(("/ListSandboxes", "/GetSandbox")) for e in ev)
    for e in ev:
        assert e.environment == "alpha"
        for t in tokens.values():
            assert t not in str(e)
    # beta's admin sees none of alpha's; the operator sees every environment
    with tls_client(d, tokens["b"]) as b:
        assert all(e.environment == "beta" for e in b.audit_events(limit=1000))
    allenv = root.audit_events(environment="*", limit=1000)
    assert {"alpha", "default"} <= {e.environment for e in allenv}
    # refused calls are recorded too (no token → no environment)
    s = Stubs(d, "wt_0123456789abcdef_" + "1" * 64)
    code_of(lambda: s.sandboxes.TerminateSandbox(sandboxes_pb2.TerminateSandboxRequest(id="sb-x"),
                                                 metadata=s.md))
    s.close()
    bad = [e for e in root.audit_events(environment="*", limit=1000)
           if e.code == grpc.StatusCode.UNAUTHENTICATED.value[0]]
    assert bad and bad[0].method.endswith("/TerminateSandbox") and bad[0].token_id == ""


def cli(d, *args, token=None, check=0):
    env = dict(os.environ)
    env.pop("WARREN_TOKEN", None)
    if token:
        env["WARREN_TOKEN"] = token
    p = subprocess.run([WARREN_CLI, "--addr", d.unix_addr] + list(args), capture_output=True,
                       text=True, timeout=60, env=env)
    if check is not None:
        assert p.returncode == check, (args, p.stdout, p.stderr)
    return p


def test_cli_tokens_and_audit(d):
    p = cli(d, "token", "create", "--env", "delta", "--role", "admin", "--expires", "1h")
    tok = p.stdout.strip()
    assert tok.startswith("wt_") and len(tok) == 84 and "shown only now" in p.stderr
    tid = "tk-" + tok[3:19]
    ls = json.loads(cli(d, "token", "ls", "--env", "delta", "--json").stdout)
    assert [t["id"] for t in ls] == [tid] and tok not in json.dumps(ls)
    assert "environment delta" in cli(d, "env", "whoami", token=tok).stdout
    assert "environment delta" in cli(d, "--token", tok, "env", "whoami").stdout
    cli(d, "--token", tok, "volume", "create", "dv")
    out = cli(d, "audit", "--env", "delta", "--limit", "5").stdout
    assert "CreateVolume" in out and "dv" in out and tok not in out
    assert "CreateVolume" in cli(d, "--token", tok, "audit", "--json").stdout
    cli(d, "token", "revoke", tid)
    p = cli(d, "--token", tok, "volume", "ls", check=1)
    assert "UNAUTHENTICATED" in p.stderr and "revoked" in p.stderr


def test_quotas(d, root):
    """Per-environment quotas: RESOURCE_EXHAUSTED naming the quota; other
    environments are not limited by it; set by the operator only."""
    tok = root.create_token("quota-env", role="admin").token
    r = subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "env", "set-quota", "quota-env",
                        "--sandboxes", "2", "--cpu", "3", "--memory", "3Gi",
                        "--volume-bytes", "96Mi"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "sandboxes   2" in r.stdout, r.stderr
    with tls_client(d, tok) as c:
        q = c._unary(c._identity.GetQuota, identity_pb2.GetQuotaRequest())
        assert (q.max_sandboxes, q.max_cpu, q.max_memory_bytes) == (2, 3.0, 3 << 30)
        a = c.create(image=IMAGE, cpu=2)
        try:
            # cpu: 2 + 2 > 3
            with pytest.raises(wr.ResourceExhausted) as ei:
                c.create(image=IMAGE, cpu=2)
            assert "quota cpu" in str(ei.value) and "quota-env" in str(ei.value)
            # memory: default 1 GiB each; 1 + 2.5 GiB > 3 GiB
            with pytest.raises(wr.ResourceExhausted) as ei:
                c.create(image=IMAGE, memory="2560Mi", cpu=0.5)
            assert "quota memory" in str(ei.value)
            b = c.create(image=IMAGE, cpu=0.5)
            try:
                with pytest.raises(wr.ResourceExhausted) as ei:
                    c.create(image=IMAGE, cpu=0.1)
                assert "quota sandboxes" in str(ei.value)
                # forks count too
                with pytest.raises(wr.ResourceExhausted):
                    c._unary(c._sandboxes.ForkSandbox,
                             sandboxes_pb2.ForkSandboxRequest(id=b.id))
                # another environment is not limited by it
                with wr.SandboxClient(d.unix_addr) as other:
                    o = other.create(image=IMAGE, cpu=2)
                    o.terminate()
            finally:
                b.terminate()
        finally:
            a.terminate()
        # freed: a create fits again
        c.create(image=IMAGE).terminate()
        c._unary(c._volumes.CreateVolume, volumes_pb2.CreateVolumeRequest(name="v1",
                                                                          max_bytes=64 << 20))
        with pytest.raises(wr.ResourceExhausted) as ei:
            c._unary(c._volumes.CreateVolume, volumes_pb2.CreateVolumeRequest(name="v2",
                                                                              max_bytes=64 << 20))
        assert "quota volume_bytes" in str(ei.value)
        c._unary(c._volumes.DeleteVolume, volumes_pb2.DeleteVolumeRequest(name="v1"))
        # an admin of the environment cannot raise its own quota
        with pytest.raises(wr.PermissionDenied):
            c._unary(c._identity.SetQuota, identity_pb2.SetQuotaRequest(
                quota=identity_pb2.Quota(environment="quota-env")))


def test_workload_identity_federation(fresh_warrend):
    """GetWorkloadIdentityToken mints an ES256 JWT that PyJWT verifies
    against the served JWKS with the right audience, issuer and expiry;
    after a key rotation the previous key is still published (overlap)."""
    jwt = pytest.importorskip("jwt")
    import urllib.request
    from conftest import free_port
    port = free_port()
    issuer = "http://127.0.0.1:%d" % port
    dd = fresh_warrend(tls=True, extra_args=["--admin-listen", "127.0.0.1:%d" % port])
    with wr.SandboxClient(dd.unix_addr) as root_c:
        tok = root_c.create_token("fed", role="user").token

    def fetch(path):
        with urllib.request.urlopen(issuer + path, timeout=10) as r:
            assert r.headers["Content-Type"] == "application/json"
            return json.loads(r.read())

    conf = fetch("/.well-known/openid-configuration")
    assert conf["issuer"] == issuer and conf["jwks_uri"] == issuer + "/.well-known/jwks.json"
    with tls_client(dd, tok) as c:
        t0 = time.time()
        wit = c.get_workload_identity_token("snowflakecomputing.com")
    jwks = jwt.PyJWKClient(conf["jwks_uri"])
    key = jwks.get_signing_key_from_jwt(wit)
    claims = jwt.decode(wit, key.key, algorithms=["ES256"], audience="snowflakecomputing.com",
                        issuer=issuer)
    assert claims["environment_id"] == "fed"
    assert claims["sub"].startswith("environment:fed:token:tk-")
    assert t0 - 5 <= claims["iat"] <= time.time() + 5
    assert 0 < claims["exp"] - claims["iat"] <= 3600
    with pytest.raises(jwt.InvalidAudienceError):
        jwt.decode(wit, key.key, algorithms=["ES256"], audience="other.example")
    head, body, sig = wit.split(".")
    forged = head + "." + body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + "." + sig
    with pytest.raises(jwt.InvalidTokenError):
        jwt.decode(forged, key.key, algorithms=["ES256"], audience="snowflakecomputing.com")
    # an anonymous TLS caller gets no token
    s = Stubs(dd)
    try:
        code, _ = code_of(lambda: s.identity.GetWorkloadIdentityToken(
            identity_pb2.GetWorkloadIdentityTokenRequest(audience="x")))
        assert code == grpc.StatusCode.UNAUTHENTICATED
    finally:
        s.close()
    keys = os.path.join(dd.state_dir, "keys")
    made = [f for f in os.listdir(keys) if f.startswith("identity-") and f.endswith(".pem")]
    assert len(made) == 1
    assert stat.S_IMODE(os.stat(os.path.join(keys, made[0])).st_mode) == 0o600
    # its public half next to it: warrend never parses the private key
    # (the signer made it and keeps it; docs/signer.md "Identity tokens")
    assert os.path.exists(os.path.join(keys, made[0][:-4] + ".pub"))


def test_workload_identity_key_rotation(fresh_warrend, tmp_path):
    """A signing key older than 30 days is replaced at start; the previous
    one stays in the JWKS (tokens it signed verify until they expire)."""
    jwt = pytest.importorskip("jwt")
    import urllib.request
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from conftest import free_port
    state = tmp_path / "state"
    (state / "keys").mkdir(parents=True)
    os.chmod(state / "keys", 0o700)
    old = ec.generate_private_key(ec.SECP256R1())
    old_file = state / "keys" / ("identity-%d.pem" % (int(time.time()) - 31 * 86400))
    old_file.write_bytes(old.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    os.chmod(old_file, 0o600)
    port = free_port()
    issuer = "https://warren.example/ns"
    dd = fresh_warrend(extra_args=["--state-dir", str(state), "--admin-listen",
                                   "127.0.0.1:%d" % port, "--issuer", issuer])
    with urllib.request.urlopen("http://127.0.0.1:%d/.well-known/jwks.json" % port,
                                timeout=10) as r:
        ks = json.loads(r.read())["keys"]
    assert len(ks) == 2
    nums = old.public_key().public_numbers()
    b64 = lambda n: __import__("base64").urlsafe_b64encode(n.to_bytes(32, "big")).rstrip(b"=").decode()
    olds = [k for k in ks if (k["x"], k["y"]) == (b64(nums.x), b64(nums.y))]
    assert len(olds) == 1
    # a token the old key signed (with its published kid) still verifies
    prior = jwt.encode({"iss": issuer, "aud": "a", "exp": int(time.time()) + 60}, old,
                       algorithm="ES256", headers={"kid": olds[0]["kid"]})
    jwk = jwt.PyJWK(olds[0])
    assert jwt.decode(prior, jwk.key, algorithms=["ES256"], audience="a", issuer=issuer)
    # new tokens: the new key, the configured issuer
    with wr.SandboxClient(dd.unix_addr) as c:
        new = c.get_workload_identity_token("a")
    kid = jwt.get_unverified_header(new)["kid"]
    assert kid != olds[0]["kid"] and kid in [k["kid"] for k in ks]
    newkey = jwt.PyJWK([k for k in ks if k["kid"] == kid][0])
    claims = jwt.decode(new, newkey.key, algorithms=["ES256"], audience="a", issuer=issuer)
    assert claims["environment_id"] == "default" and claims["sub"] == "environment:default:uid:0"
    assert len([f for f in os.listdir(state / "keys")
                if f.startswith("identity-") and f.endswith(".pem")]) == 2
