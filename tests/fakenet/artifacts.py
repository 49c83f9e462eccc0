"""What the bed's servers serve, built locally each run (no network):
two pure-Python wheels and a PEP 503 simple index, a .deb and an unsigned
apt repository, a bare git repository."""
import base64
import email.utils
import gzip
import hashlib
import html
import os
import shutil
import subprocess
import zipfile

WHEELS = [
    # (project, version, module source, requires)
    ("fakenet-hello", "1.0.0", 'GREETING = "hello from the fake PyPI"\n', []),
    ("fakenet-extra", "0.2.0", 'from fakenet_hello import GREETING\nEXTRA = GREETING + "!"\n',
     ["fakenet-hello>=1.0"]),
]
DEB = ("fakenet-hello", "1.0")
GIT_REPO = "example/repo.git"


def _b64(digest):
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def build_wheel(outdir, project, version, source, requires):
    """Write a py3-none-any wheel by hand (zip + dist-info + RECORD)."""
    mod = project.replace("-", "_")
    dist = f"{mod}-{version}.dist-info"
    files = {
        f"{mod}/__init__.py": source.encode(),
        f"{dist}/METADATA": ("Metadata-Version: 2.1\n"
                             f"Name: {project}\nVersion: {version}\n"
                             "Summary: a package of Warren's fake internet (tests only)\n"
                             + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: fakenet\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{p},sha256={_b64(hashlib.sha256(d).digest())},{len(d)}\n" for p, d in files.items())
    files[f"{dist}/RECORD"] = (record + f"{dist}/RECORD,,\n").encode()
    path = os.path.join(outdir, f"{mod}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files.items():
            zi = zipfile.ZipInfo(p, date_time=(2024, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            z.writestr(zi, d)
    return path


def build_pypi(root, files_host):
    """pypi/simple/... (served as https://pypi.org/simple/) and
    files/packages/... (served as https://<files_host>/packages/)."""
    simple = os.path.join(root, "pypi", "simple")
    pkgdir = os.path.join(root, "files", "packages")
    os.makedirs(simple)
    os.makedirs(pkgdir)
    names = []
    for project, version, source, requires in WHEELS:
        whl = build_wheel(pkgdir, project, version, source, requires)
        sha = hashlib.sha256(open(whl, "rb").read()).hexdigest()
        fn = os.path.basename(whl)
        os.makedirs(os.path.join(simple, project))
        with open(os.path.join(simple, project, "index.html"), "w") as f:
            f.write(f"<!DOCTYPE html>\n<html><body><h1>Links for {html.escape(project)}</h1>\n"
                    f'<a href="https://{files_host}/packages/{fn}#sha256={sha}">{fn}</a><br/>\n'
                    "</body></html>\n")
        names.append(project)
    with open(os.path.join(simple, "index.html"), "w") as f:
        f.write("<!DOCTYPE html>\n<html><body>\n"
                + "".join(f'<a href="/simple/{n}/">{n}</a><br/>\n' for n in names)
                + "</body></html>\n")
    return {"simple": simple, "files": pkgdir, "projects": names}


def build_deb(workdir, pkg, version):
    tree = os.path.join(workdir, f"{pkg}-tree")
    os.makedirs(os.path.join(tree, "DEBIAN"))
    os.makedirs(os.path.join(tree, "usr", "bin"))
    os.makedirs(os.path.join(tree, "usr", "share", pkg))
    with open(os.path.join(tree, "DEBIAN", "control"), "w") as f:
        f.write(f"Package: {pkg}\nVersion: {version}\nArchitecture: all\n"
                "Maintainer: Warren tests <tests@example.test>\nSection: misc\nPriority: optional\n"
                "Description: a package of Warren's fake internet (tests only)\n"
                " Installs /usr/bin/fakenet-hello and a text file.\n")
    script = os.path.join(tree, "usr", "bin", "fakenet-hello")
    with open(script, "w") as f:
        f.write("#!/bin/sh\necho hello from the fake Debian mirror\n")
    os.chmod(script, 0o755)
    with open(os.path.join(tree, "usr", "share", pkg, "hello.txt"), "w") as f:
        f.write("hello from the fake Debian mirror\n")
    out = os.path.join(workdir, f"{pkg}_{version}_all.deb")
    subprocess.run(["dpkg-deb", "-Zgzip", "--root-owner-group", "--build", tree, out],
                   check=True, capture_output=True)
    return out


# Real packages served beside our own when scripts/deps.sh fetched them
# (the seed's tmux example): every .deb in this directory.
EXTRA_DEBS = os.environ.get("WARREN_TEST_DEBS", "/var/cache/warren/test-debs")


def _stanza(base, final):
    data = open(final, "rb").read()
    control = subprocess.run(["dpkg-deb", "-f", final], check=True, capture_output=True, text=True).stdout
    arch = next((l.split(":", 1)[1].strip() for l in control.splitlines()
                 if l.startswith("Architecture:")), "all")
    return arch, (control.rstrip("\n") + "\n"
                  f"Filename: {os.path.relpath(final, base)}\nSize: {len(data)}\n"
                  f"MD5sum: {hashlib.md5(data).hexdigest()}\nSHA256: {hashlib.sha256(data).hexdigest()}\n\n")


def build_apt(root, suite="bookworm", archs=("amd64", "arm64", "i386")):
    """An unsigned repository (apt needs [trusted=yes]) under root/debian:
    dists/<suite>/{Release, main/binary-ARCH/Packages{,.gz}} and pool/: our
    own package, plus the .debs in EXTRA_DEBS (listed for their own
    architecture)."""
    pkg, version = DEB
    base = os.path.join(root, "debian")
    pool = os.path.join(base, "pool", "main", pkg[0], pkg)
    os.makedirs(pool)
    deb = build_deb(root, pkg, version)
    final = os.path.join(pool, os.path.basename(deb))
    os.rename(deb, final)
    stanzas = [_stanza(base, final)]
    extra = []
    if os.path.isdir(EXTRA_DEBS):
        for name in sorted(os.listdir(EXTRA_DEBS)):
            if not name.endswith(".deb"):
                continue
            name_pkg = name.split("_")[0]
            d = os.path.join(base, "pool", "main", name_pkg[0], name_pkg)
            os.makedirs(d, exist_ok=True)
            target = os.path.join(d, name)
            shutil.copyfile(os.path.join(EXTRA_DEBS, name), target)
            stanzas.append(_stanza(base, target))
            extra.append(name_pkg)
    dist = os.path.join(base, "dists", suite)
    entries = []
    for arch in archs:
        d = os.path.join(dist, "main", f"binary-{arch}")
        os.makedirs(d)
        text = "".join(st for a, st in stanzas if a in (arch, "all")).encode()
        for name, blob in (("Packages", text), ("Packages.gz", gzip.compress(text, mtime=0))):
            with open(os.path.join(d, name), "wb") as f:
                f.write(blob)
            entries.append((f"main/binary-{arch}/{name}", blob))
    release = (f"Origin: fakenet\nLabel: fakenet\nSuite: {suite}\nCodename: {suite}\n"
               f"Date: {email.utils.formatdate(usegmt=True)}\nArchitectures: {' '.join(archs)}\n"
               "Components: main\nDescription: Warren fake internet (unsigned, tests only)\n")
    for field, algo in (("MD5Sum", hashlib.md5), ("SHA256", hashlib.sha256)):
        release += f"{field}:\n" + "".join(f" {algo(b).hexdigest()} {len(b)} {p}\n" for p, b in entries)
    with open(os.path.join(dist, "Release"), "w") as f:
        f.write(release)
    return {"root": base, "suite": suite, "package": pkg, "version": version, "deb": final,
            "extra": extra}


def build_git(root, uid=None):
    """root/git/example/repo.git, a bare repository with one commit."""
    gitroot = os.path.join(root, "git")
    work = os.path.join(root, "git-work")
    os.makedirs(work)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "fakenet", "GIT_AUTHOR_EMAIL": "fakenet@example.test",
           "GIT_COMMITTER_NAME": "fakenet", "GIT_COMMITTER_EMAIL": "fakenet@example.test",
           "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z"}
    run = lambda *a, cwd=work: subprocess.run(a, cwd=cwd, env=env, check=True, capture_output=True)  # noqa: E731
    run("git", "init", "-q", "-b", "main", ".")
    with open(os.path.join(work, "README.md"), "w") as f:
        f.write("# example/repo\n\nServed by Warren's fake internet.\n")
    run("git", "add", "README.md")
    run("git", "commit", "-q", "-m", "initial commit")
    bare = os.path.join(gitroot, GIT_REPO)
    os.makedirs(os.path.dirname(bare))
    run("git", "clone", "-q", "--bare", work, bare)
    head = run("git", "rev-parse", "HEAD").stdout.decode().strip()
    subprocess.run(["rm", "-rf", work], check=True)
    if uid is not None:
        for dirpath, dirnames, filenames in os.walk(gitroot):
            os.chown(dirpath, uid, uid)
            for fn in filenames:
                os.chown(os.path.join(dirpath, fn), uid, uid)
    return {"root": gitroot, "repo": GIT_REPO, "head": head}
