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
