"""The builder against the fake internet: pip_install from its PyPI index
and apt_install from its Debian repository, hermetic (nothing leaves the
machine), on the Debian base image plus pip."""
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import pytest

import warren as wr
from conftest import ROOT, WARREN_CLI, Daemon
from warren import Image

sys.path.insert(0, str(ROOT / "tests"))


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
def d(bed):
    dd = Daemon(extra_args=["--upstream-dns", bed.dns])
    try:
        p = subprocess.run(["bash", str(ROOT / "scripts/base-image.sh")], capture_output=True,
                           text=True, timeout=900)
        if p.returncode != 0:
            pytest.skip("no Debian base image: " + p.stderr[-300:])
        base = p.stdout.strip().splitlines()[-1]
        import pip
        tmp = tempfile.mkdtemp(prefix="warren-buildnet-")
        try:
            tar = os.path.join(tmp, "pybase.tar")
            shutil.copyfile(base, tar)
            with tarfile.open(tar, "a") as t:
                t.add(os.path.dirname(pip.__file__), "./usr/lib/python3/dist-packages/pip",
                      filter=lambda ti: None if "__pycache__" in ti.name else ti)
            r = subprocess.run([WARREN_CLI, "--addr", dd.unix_addr, "image", "import", "--env",
                                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                "pybase:latest", tar], capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr
            dd.debian_base = base
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        yield dd
    finally:
        dd.stop()


def test_pip_and_apt_install_from_the_fake_internet(d, bed):
    ca = open(bed.ca_pem).read()
    img = (Image.base("pybase:latest")
           .add_local_file(bed.ca_pem, "/etc/fakenet-ca.pem", mode=0o644)
           .env({"PIP_CERT": "/etc/fakenet-ca.pem", "PIP_INDEX_URL": bed.pypi["index_url"],
                 "PIP_BREAK_SYSTEM_PACKAGES": "1"})
           .run_commands("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/* && echo '%s' > "
                         "/etc/apt/sources.list.d/fakenet.list" % bed.apt["sources_line"])
           .apt_install(["fakenet-hello"])
           .pip_install(["fakenet-extra"]))
    logs = []
    with wr.SandboxClient(d.unix_addr) as c:
        info = c.build_image(img, on_log=logs.append)
        sb = c.create(image=info.id, entrypoint=["sleep", "infinity"])
        try:
            r = sb.exec("sh", "-c", "fakenet-hello && python3 -c 'import fakenet_extra, "
                        "fakenet_hello; print(\"imports ok\")'")
            assert r.exit_code == 0, r.stdout_text + r.stderr_text + "\n".join(logs[-30:])
            assert "imports ok" in r.stdout_text
            # the CA went in as a file, never through the network
            assert sb.exec("cat", "/etc/fakenet-ca.pem").stdout_text == ca
        finally:
            sb.terminate()
        # cached the second time: nothing runs, nothing is fetched
        m = bed.mark()
        again = c.build_image(img)
        assert again.id == info.id
        bed.assert_nothing_seen(m)


def _fakenet_base(bed):
    """pybase with the fake internet's CA, PyPI index and Debian repository
    configured (what a real image gets from its registry and mirrors)."""
    return (Image.base("pybase:latest")
            .add_local_file(bed.ca_pem, "/etc/fakenet-ca.pem", mode=0o644)
            .env({"PIP_CERT": "/etc/fakenet-ca.pem", "PIP_INDEX_URL": bed.pypi["index_url"],
                  "PIP_BREAK_SYSTEM_PACKAGES": "1"})
            .run_commands("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/* && echo '%s' > "
                          "/etc/apt/sources.list.d/fakenet.list" % bed.apt["sources_line"]))


def test_seed_build_steps_example(d, bed, tmp_path, monkeypatch):
    """The seed README's "Build steps" example, every method, with the fake
    internet's packages standing in for requests/flask/git/tmux."""
    (tmp_path / "requirements.txt").write_text("# pinned\nfakenet-hello==1.0.0\n")
    (tmp_path / "config.yaml").write_text("debug: true\n")
    (tmp_path / "entrypoint.sh").write_text("#!/bin/sh\necho entry \"$@\"\n")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "app.py").write_text("print('app')\n")
    (tmp_path / "src" / "pkg" / "mod.py").write_text("X = 1\n")
    monkeypatch.chdir(tmp_path)
    img = (
        _fakenet_base(bed)
        .pip_install(["fakenet-extra"])
        .pip_install_from_requirements("requirements.txt")
        .apt_install(["fakenet-hello"])
        .run_commands("mkdir -p /app/data")
        .add_local_file("config.yaml", "/app/config.yaml")
        .add_local_file("entrypoint.sh", "/app/entrypoint.sh", mode=0o755)
        .add_local_dir("src", "/app/src")
        .dockerfile_commands(["EXPOSE 8080", "HEALTHCHECK CMD curl -f http://localhost:8080/"])
        .workdir("/app")
        .env({"FLASK_APP": "app:create_app"})
        .entrypoint(["/app/entrypoint.sh"])
        .cmd(["serve"])
    )
    with wr.SandboxClient(d.unix_addr) as c:
        info = c.build_image(img)
        assert info.config.entrypoint == ["/app/entrypoint.sh"] and info.config.cmd == ["serve"]
        assert info.config.workdir == "/app" and info.config.env["FLASK_APP"] == "app:create_app"
        from warren._proto.warren.v1 import images_pb2 as pb
        raw = c._images.GetImage(pb.GetImageRequest(image=info.id)).config
        assert list(raw.exposed_ports) == ["8080/tcp"]
        assert list(raw.healthcheck) == ["CMD-SHELL", "curl -f http://localhost:8080/"]
        sb = c.create(image=img, entrypoint=["sleep", "infinity"])
        try:
            r = sb.exec("sh", "-c", "python3 -c 'import fakenet_extra; print(fakenet_extra.EXTRA)'"
                        " && fakenet-hello && test -d /app/data && cat /app/config.yaml "
                        "/app/src/app.py /app/src/pkg/mod.py && /app/entrypoint.sh serve && pwd")
            assert r.exit_code == 0, r.stdout_text + r.stderr_text
            assert r.stdout_text == ("hello from the fake PyPI!\nhello from the fake Debian mirror\n"
                                     "debug: true\nprint('app')\nX = 1\nentry serve\n/app\n")
        finally:
            sb.terminate()


def test_seed_immutable_composition(d, bed):
    base = _fakenet_base(bed).pip_install(["fakenet-hello"])
    api_image = base.pip_install(["fakenet-extra"]).workdir("/api")
    worker_image = base.run_commands("echo celery-stand-in > /worker.txt").workdir("/worker")
    assert len(base._steps) == 4 and len(api_image._steps) == 6 and api_image != worker_image
    with wr.SandboxClient(d.unix_addr) as c:
        b = c.build_image(base)
        api = c.build_image(api_image)
        worker = c.build_image(worker_image)
        # the shared base's layers are the same layers in both images
        shared = len(b.layers)
        assert api.layers[:shared] == b.layers == worker.layers[:shared]
        assert len(api.layers) == shared + 2 and len(worker.layers) == shared + 2
        assert api.layers[shared] != worker.layers[shared]
        api_sandbox = c.create(image=api_image, entrypoint=["sleep", "infinity"])
        worker_sandbox = c.create(image=worker_image, entrypoint=["sleep", "infinity"])
        try:
            assert api_sandbox.exec("sh", "-c", "pwd").stdout_text == "/api\n"
            assert worker_sandbox.exec("cat", "/worker.txt").stdout_text == "celery-stand-in\n"
        finally:
            api_sandbox.terminate()
            worker_sandbox.terminate()


def _default_image(d):
    """scripts/run.sh's recipe: the offline Debian base imported as
    sandbox-base, then scripts/default-image.json built on it as
    sandbox:latest (once per module daemon)."""
    if getattr(d, "default_built", False):
        return
    r = subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "image", "import", "--workdir",
                        "/workspace", "--env",
                        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        "--env", "LANG=C.UTF-8", "sandbox-base:latest", d.debian_base],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([WARREN_CLI, "--addr", d.unix_addr, "image", "build", "--spec",
                        str(ROOT / "scripts" / "default-image.json"), "-t", "sandbox:latest"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    d.default_built = True


def test_seed_tmux_example(d, bed):
    """The seed's `Image.sandbox().apt_install(["tmux"])`, with the
    default image's apt pointed at the fake internet's Debian repository
    (real tmux .debs fetched by scripts/deps.sh)."""
    if "tmux" not in bed.apt.get("extra", []):
        pytest.skip("no tmux .deb in the fake Debian repository (scripts/deps.sh fetches it "
                    "into /var/cache/warren/test-debs)")
    _default_image(d)
    img = (Image.sandbox()
           .run_commands("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/* && echo '%s' > "
                         "/etc/apt/sources.list.d/fakenet.list" % bed.apt["sources_line"])
           .apt_install(["tmux"]))
    logs = []
    with wr.SandboxClient(d.unix_addr) as c:
        info = c.build_image(img, on_log=logs.append)
        sb = c.create(image=info.id)
        try:
            r = sb.exec("tmux", "-V")
            assert r.exit_code == 0 and r.stdout_text.startswith("tmux 3"), (
                r.stdout_text + r.stderr_text + "\n".join(logs[-20:]))
            # a session runs detached and answers
            r = sb.exec("sh", "-c", "tmux new-session -d -s w 'sleep 30' && tmux ls")
            assert r.exit_code == 0 and r.stdout_text.startswith("w:"), r.stderr_text
        finally:
            sb.terminate()


def test_default_image_through_the_builder(d):
    """scripts/run.sh's recipe: the offline Debian base imported as
    sandbox-base, then scripts/default-image.json built on it as
    sandbox:latest; the seed's sandbox.exec("python", ...) works in it."""
    _default_image(d)
    with wr.SandboxClient(d.unix_addr) as c:
        sb = c.create()  # the daemon's default image
        try:
            res = sb.exec("python", "-c", "import sys, os; print(sys.version_info[0], os.getcwd())")
            assert res.exit_code == 0 and res.stdout_text == "3 /workspace\n", res.stderr_text
            res = sb.exec("sh", "-c", "python3 -c pass && git --version && ssh -V 2>&1 && "
                          "test -s /etc/ssl/certs/ca-certificates.crt && echo ok")
            assert res.exit_code == 0 and res.stdout_text.endswith("ok\n"), res.stdout_text
        finally:
            sb.terminate()
        # Image.sandbox() names that default: builder steps apply on top of it
        info = c.build_image(Image.sandbox().run_commands("python --version > /pyver"))
        assert c.get_image("sandbox:latest").layers == info.layers[:-1]


@pytest.mark.skipif(os.environ.get("WARREN_TEST_REAL_MIRRORS") != "1",
                    reason="opt-in: WARREN_TEST_REAL_MIRRORS=1 builds against the real Debian "
                           "mirror and PyPI (this test alone leaves the machine)")
def test_real_mirrors_opt_in():
    """The seed's data-science shape against the real world: apt from the
    Debian mirror in the default image's sources, pip from PyPI, through
    the host's resolver."""
    ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")]
    dd = Daemon(extra_args=["--upstream-dns", ns[0]] if ns else [])
    try:
        p = subprocess.run(["bash", str(ROOT / "scripts/base-image.sh")], capture_output=True,
                           text=True, timeout=900)
        assert p.returncode == 0, p.stderr[-500:]
        dd.debian_base = p.stdout.strip().splitlines()[-1]
        _default_image(dd)
        img = (Image.sandbox().env({"PIP_BREAK_SYSTEM_PACKAGES": "1"})
               .apt_install(["tmux"]).pip_install(["six"]))
        with wr.SandboxClient(dd.unix_addr) as c:
            sb = c.create(image=c.build_image(img).id)
            try:
                r = sb.exec("sh", "-c", "tmux -V && python3 -c 'import six; print(six.__name__)'")
                assert r.exit_code == 0 and "six" in r.stdout_text, r.stderr_text
            finally:
                sb.terminate()
    finally:
        dd.stop()
