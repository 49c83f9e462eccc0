"""warren image build -f / --spec and warren image prune (issue 14): the
CLI reads the context, uploads only the files the daemon lacks, streams
the build log on stderr and prints the image id on stdout."""
import os
import subprocess

import warren as wr
from conftest import WARREN_CLI
from warren import Image


def cli(d, *args, check=True, cwd=None):
    p = subprocess.run([WARREN_CLI, "--addr", d.unix_addr, *args], capture_output=True,
                       text=True, timeout=300, cwd=cwd)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def test_build_dockerfile_with_context_and_tag(d, client, tmp_path):
    ctx = tmp_path / "ctx"
    (ctx / "src").mkdir(parents=True)
    (ctx / "src" / "a.txt").write_text("A\n")
    (ctx / "b.txt").write_text("B\n")
    (ctx / "Dockerfile").write_text("FROM busybox\nARG WHO=world\nCOPY src /srv/\n"
                                    "COPY b.txt /srv/b.txt\nRUN echo hello $WHO > /srv/hello\n"
                                    "LABEL built-by=cli\nEXPOSE 9000\nCMD [\"cat\", \"/srv/hello\"]\n")
    p = cli(d, "image", "build", "-f", str(ctx / "Dockerfile"), "-t", "clibuilt:v1",
            "--build-arg", "WHO=cli", str(ctx))
    image_id = p.stdout.strip()
    assert image_id.startswith("sha256:")
    assert "Step 1/" in p.stderr and "Context: 3 files, 3 uploaded" in p.stderr, p.stderr
    info = client.get_image("clibuilt:v1")
    assert info.id == image_id and info.config.cmd == ["cat", "/srv/hello"]
    sb = client.create(image="clibuilt:v1", entrypoint=["sleep", "infinity"])
    try:
        r = sb.exec("sh", "-c", "cat /srv/a.txt /srv/b.txt /srv/hello")
        assert r.stdout_text == "A\nB\nhello cli\n", r.stderr_text
    finally:
        sb.terminate()
    # again: nothing uploaded, every step cached
    p = cli(d, "image", "build", "-f", str(ctx / "Dockerfile"), "--build-arg", "WHO=cli", str(ctx))
    assert p.stdout.strip() == image_id
    assert "Context: 3 files, 0 uploaded" in p.stderr
    assert all("cached" in l for l in p.stderr.splitlines() if l.startswith("Step ")), p.stderr


def test_build_errors(d, tmp_path):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM busybox\nCOPY ../../etc/shadow /x\n")
    p = cli(d, "image", "build", "-f", str(ctx / "Dockerfile"), str(ctx), check=False)
    assert p.returncode != 0
    assert "line 2, column 1" in p.stderr and "outside the build context" in p.stderr, p.stderr
    (ctx / "Dockerfile").write_text("FROM busybox\nCOPY . /x\n")
    (ctx / "escape").symlink_to("/etc/shadow")
    p = cli(d, "image", "build", "-f", str(ctx / "Dockerfile"), str(ctx), check=False)
    assert p.returncode != 0 and "outside the build context" in p.stderr and "escape" in p.stderr
    (ctx / "escape").unlink()
    (ctx / "Dockerfile").write_text("FROM busybox\nRUN echo failing; exit 7\n")
    p = cli(d, "image", "build", "-f", str(ctx / "Dockerfile"), str(ctx), check=False)
    assert p.returncode != 0 and "exit code 7" in p.stderr and "failing" in p.stderr


def test_build_spec_json_and_prune(d, client, tmp_path):
    f = tmp_path / "conf.ini"
    f.write_text("[x]\n")
    img = (Image.base("busybox:latest").run_commands("echo from-spec > /s")
           .add_local_file(f, "/etc/conf.ini").env({"K": "V"}))
    spec = tmp_path / "spec.json"
    spec.write_text(img.to_json())
    p = cli(d, "image", "build", "--spec", str(spec))
    built = p.stdout.strip()
    # the same spec through the SDK is the same image (and all cached)
    assert client.build_image(img).id == built
    p = cli(d, "image", "prune")
    assert f"deleted {built}" in p.stdout and "removed" in p.stdout
    assert built not in [i.id for i in client.list_images()]
    bad = tmp_path / "bad.json"
    bad.write_text('{"base_image": "busybox", "stepz": []}')
    p = cli(d, "image", "build", "--spec", str(bad), check=False)
    assert p.returncode != 0 and "unknown field \"stepz\"" in p.stderr
