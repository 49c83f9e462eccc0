"""Declarative images. Every builder method returns a new Image; the spec
travels to warrend as an ImageBuild protobuf, which builds and caches it.
An Image with no steps is just a reference (ImageSpec.ref)."""
from __future__ import annotations

import datetime as _dt
import fnmatch
import hashlib
import os
import shutil
import stat as _stat
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import grpc

from warren._convert import from_timestamp
from warren._errors import ImageBuildError, Status, from_rpc_error
from warren._proto.warren.v1 import images_pb2 as pb

DEFAULT_PYTHON = "3.14"


def _strs(x: Union[str, Iterable[str]]) -> List[str]:
    return [x] if isinstance(x, str) else list(x)


class Image:
    """An image reference plus build steps (immutable)."""

    def __init__(self, base_image: str):
        self.base_image = base_image
        self._steps: Tuple[pb.BuildStep, ...] = ()
        # from_dockerfile: the file's text, its build context and ARG values
        self._dockerfile = ""
        self._context: Tuple[pb.FileAdd, ...] = ()
        self._build_args: Tuple[Tuple[str, str], ...] = ()

    # --- constructors ---
    @classmethod
    def base(cls, ref: str) -> "Image":
        """Any image reference ("node:25-trixie-slim") or local image name."""
        return cls(ref)

    @classmethod
    def debian_slim(cls, python_version: Optional[str] = None) -> "Image":
        """Python on Debian slim: python:<version>-slim-trixie."""
        return cls(f"python:{python_version or DEFAULT_PYTHON}-slim-trixie")

    @classmethod
    def sandbox(cls) -> "Image":
        """The daemon's default sandbox image (warrend --default-image,
        `sandbox:latest`): Debian with Python (`python` and `python3`), Git,
        CA certificates and OpenSSH, working in /workspace; built offline
        from Debian packages (scripts/base-image.sh) and finished by the
        builder (scripts/default-image.json). An empty base means "the
        default", so the spec carries no reference and builder steps apply
        on top of it."""
        return cls("")

    @classmethod
    def from_dockerfile(cls, path: Union[str, os.PathLike],
                        context_dir: Union[str, os.PathLike, None] = None,
                        build_args: Optional[Mapping[str, str]] = None) -> "Image":
        """A Dockerfile's contents inlined (parsed by the daemon: FROM is
        the base, the other instructions become steps; chain more steps
        after it). COPY/ADD read from context_dir (default: the
        Dockerfile's directory): its files are read now (minus
        .dockerignore patterns and .git) and travel with the spec, by
        digest. A symlink pointing out of the context is refused."""
        with open(path, encoding="utf-8") as f:
            text = f.read()
        ctx = os.fspath(context_dir) if context_dir is not None else \
            os.path.dirname(os.path.abspath(os.fspath(path)))
        img = cls("")
        img._dockerfile = text
        img._context = tuple(_read_context(ctx))
        img._build_args = tuple(sorted((build_args or {}).items()))
        return img

    # --- builder ---
    def _with(self, step: pb.BuildStep, context: Sequence[pb.FileAdd] = ()) -> "Image":
        img = Image(self.base_image)
        img._steps = self._steps + (step,)
        img._dockerfile = self._dockerfile
        img._context = self._context + tuple(context)
        img._build_args = self._build_args
        return img

    def _needs_build(self) -> bool:
        return bool(self._steps or self._dockerfile)

    def pip_install(self, packages: Union[str, Iterable[str]]) -> "Image":
        return self._with(pb.BuildStep(pip_install=pb.PackageList(packages=_strs(packages))))

    def pip_install_from_requirements(self, path: Union[str, os.PathLike]) -> "Image":
        """Requirement lines of a local file (read now, inlined)."""
        reqs = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.split("#", 1)[0].strip() if not line.lstrip().startswith("-") else line.strip()
                if line:
                    reqs.append(line)
        return self.pip_install(reqs)

    def apt_install(self, packages: Union[str, Iterable[str]]) -> "Image":
        return self._with(pb.BuildStep(apt_install=pb.PackageList(packages=_strs(packages))))

    def run_commands(self, *commands: Union[str, Iterable[str]]) -> "Image":
        img = self
        for c in commands:
            for cmd in _strs(c):
                img = img._with(pb.BuildStep(run=cmd))
        return img

    def add_local_file(self, local_path: Union[str, os.PathLike], remote_path: str,
                       mode: Optional[int] = None) -> "Image":
        with open(local_path, "rb") as f:
            data = f.read()
        if mode is None:
            mode = os.stat(local_path).st_mode & 0o7777
        return self._with(pb.BuildStep(add_file=pb.FileAdd(path=remote_path, content=data, mode=mode)))

    def add_local_dir(self, local_path: Union[str, os.PathLike], remote_path: str) -> "Image":
        """Every file below local_path at remote_path, as ONE layer (a
        changed file reruns this step and the later ones only). Symlinks
        pointing inside the directory are followed; one pointing out of it
        raises ValueError."""
        root = os.fspath(local_path)
        if not os.path.isdir(root):
            raise ValueError(f"add_local_dir: {root} is not a directory")
        # the files travel in the build context under a prefix of their own
        prefix = f".warren-add/{len(self._steps)}"
        files = [pb.FileAdd(path=f"{prefix}/{fa.path}", content=fa.content, mode=fa.mode)
                 for fa in _read_context(root, dockerignore=False)]
        step = pb.BuildStep(dockerfile="COPY " + _json_list([prefix, remote_path.rstrip("/") + "/"]))
        return self._with(step, files)

    def dockerfile_commands(self, commands: Union[str, Iterable[str]]) -> "Image":
        img = self
        for c in _strs(commands):
            img = img._with(pb.BuildStep(dockerfile=c))
        return img

    def workdir(self, path: str) -> "Image":
        return self._with(pb.BuildStep(workdir=path))

    def env(self, vars: Mapping[str, str]) -> "Image":
        for k, v in vars.items():
            if not isinstance(v, str):
                raise TypeError(f"Image.env: {k} must be a literal string (use sandbox env= for secrets)")
        return self._with(pb.BuildStep(env=pb.EnvSet(vars=dict(vars))))

    def entrypoint(self, argv: Sequence[str]) -> "Image":
        return self._with(pb.BuildStep(entrypoint=pb.StringList(values=list(argv))))

    def cmd(self, argv: Sequence[str]) -> "Image":
        return self._with(pb.BuildStep(cmd=pb.StringList(values=list(argv))))

    # --- serialization ---
    def build(self, client: Any, on_log: Optional[Callable[[str], None]] = None,
              step_timeout: Optional[float] = None) -> "ImageInfo":
        """Build this image with `client` (a SandboxClient); `on_log` gets
        each build log line. Steps already built are reused (cache)."""
        return build_image(client, self, on_log, step_timeout)

    def _to_build(self) -> pb.ImageBuild:
        return pb.ImageBuild(base_image=self.base_image, steps=list(self._steps),
                             dockerfile=self._dockerfile, context=list(self._context),
                             build_args=dict(self._build_args))

    def _to_spec(self) -> pb.ImageSpec:
        if not self._needs_build():
            return pb.ImageSpec(ref=self.base_image)
        return pb.ImageSpec(build=self._to_build())

    def to_json(self) -> str:
        """The spec as JSON (an ImageBuild in the protobuf JSON mapping),
        for `warren image build --spec FILE`."""
        from google.protobuf import json_format
        return json_format.MessageToJson(self._to_build(), preserving_proto_field_name=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Image) and self._to_build() == other._to_build()

    def __hash__(self) -> int:
        return hash(self._to_build().SerializeToString(deterministic=True))

    def __repr__(self) -> str:
        base = self.base_image or ("Dockerfile" if self._dockerfile else "sandbox default")
        return f"Image({base!r}, steps={len(self._steps)})"


def image_spec(image: Union[Image, str, None]) -> Optional[pb.ImageSpec]:
    """ImageSpec for an Image, a plain reference, or None (daemon default)."""
    if image is None:
        return None
    if isinstance(image, str):
        return pb.ImageSpec(ref=image)
    if isinstance(image, Image):
        return image._to_spec()
    raise TypeError(f"image must be a str or Image, not {type(image).__name__}")


def _json_list(v: Sequence[str]) -> str:
    import json
    return json.dumps(list(v))


CONTEXT_MAX_BYTES = 1 << 30


def _dockerignore(root: str) -> List[str]:
    try:
        with open(os.path.join(root, ".dockerignore"), encoding="utf-8") as f:
            return [ln.strip().strip("/") for ln in f
                    if ln.strip() and not ln.lstrip().startswith("#")]
    except FileNotFoundError:
        return []


def _ignored(rel: str, patterns: Sequence[str]) -> bool:
    out = False
    for p in patterns:
        neg = p.startswith("!")
        pat = p[1:] if neg else p
        if fnmatch.fnmatchcase(rel, pat) or fnmatch.fnmatchcase(rel, pat + "/*") or \
                rel.startswith(pat.rstrip("*") + "/") and "*" not in pat:
            out = not neg
    return out


def _read_context(root: str, dockerignore: bool = True) -> List[pb.FileAdd]:
    """The regular files below root as FileAdds (paths relative to root,
    sorted; modes kept). Symlinks: followed when their target stays inside
    root, refused (ValueError naming them) when it leaves it. Sockets,
    fifos and devices are skipped."""
    root = os.path.abspath(root)
    real_root = os.path.realpath(root)
    patterns = _dockerignore(root) if dockerignore else []
    out: List[pb.FileAdd] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".git" or rel_dir.startswith(".git" + os.sep):
            dirnames[:] = []
            continue
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if patterns and _ignored(rel, patterns):
                continue
            if os.path.islink(full):
                target = os.path.realpath(full)
                if target != real_root and not target.startswith(real_root + os.sep):
                    raise ValueError(f"{full} is a symlink to {os.readlink(full)}, which is "
                                     f"outside {root}: refusing to add it (copy the file in, "
                                     f"or add its directory)")
                if os.path.isdir(target):
                    continue  # its files are added under their real path
            st = os.stat(full)
            if not _stat.S_ISREG(st.st_mode):
                continue
            with open(full, "rb") as f:
                data = f.read()
            total += len(data)
            if total > CONTEXT_MAX_BYTES:
                raise ValueError(f"{root}: more than 1 GiB of files to send (add a "
                                 f".dockerignore, or add fewer files)")
            out.append(pb.FileAdd(path=rel, content=data, mode=st.st_mode & 0o7777))
    return out


UPLOAD_CHUNK = 1 << 20


def _upload_by_digest(channel: Any, build: pb.ImageBuild) -> pb.ImageBuild:
    """Files of the spec sent once: their digests first, then only what
    the daemon lacks (UploadBlob, chunked, verified by the daemon); the
    spec then names them by digest. A daemon without MissingBlobs gets the
    spec as it was (contents inlined)."""
    files = list(build.context) + [s.add_file for s in build.steps if s.HasField("add_file")]
    files = [f for f in files if f.content]
    if not files:
        return build
    digests: Dict[str, bytes] = {}
    digest_of: Dict[bytes, str] = {}
    for f in files:
        c = f.content
        if c not in digest_of:
            digest_of[c] = "sha256:" + hashlib.sha256(c).hexdigest()
            digests.setdefault(digest_of[c], c)
    try:
        missing = channel._images.MissingBlobs(
            pb.MissingBlobsRequest(digests=sorted(digests))).missing
    except grpc.RpcError as err:
        if err.code() == grpc.StatusCode.UNIMPLEMENTED:
            return build
        raise from_rpc_error(err, build_call=True) from None
    for d in missing:
        data = digests[d]

        def chunks(d: str = d, data: bytes = data) -> Iterable[pb.UploadBlobRequest]:
            yield pb.UploadBlobRequest(digest=d)
            for i in range(0, len(data), UPLOAD_CHUNK):
                yield pb.UploadBlobRequest(data=data[i:i + UPLOAD_CHUNK])
        try:
            channel._images.UploadBlob(chunks())
        except grpc.RpcError as err:
            raise from_rpc_error(err, build_call=True) from None
    # the spec again, each file naming its digest instead of carrying it
    def by_digest(f: pb.FileAdd) -> pb.FileAdd:
        if not f.content:
            return f
        return pb.FileAdd(path=f.path, mode=f.mode, digest=digest_of[f.content])
    steps = []
    for s in build.steps:
        steps.append(pb.BuildStep(add_file=by_digest(s.add_file)) if s.HasField("add_file") else s)
    return pb.ImageBuild(base_image=build.base_image, steps=steps, dockerfile=build.dockerfile,
                         context=[by_digest(f) for f in build.context],
                         build_args=dict(build.build_args))


@dataclass(frozen=True)
class ImageConfig:
    """The run configuration an image carries: environment ("K=V" entries
    as a dict), working directory, entrypoint, command and user."""

    env: Dict[str, str] = field(default_factory=dict)
    workdir: str = ""
    entrypoint: List[str] = field(default_factory=list)
    cmd: List[str] = field(default_factory=list)
    user: str = ""
    # recorded from Dockerfiles (LABEL, EXPOSE, SHELL, STOPSIGNAL,
    # HEALTHCHECK as the OCI Test: ["CMD", ...], ["CMD-SHELL", cmd], ["NONE"])
    labels: Dict[str, str] = field(default_factory=dict)
    exposed_ports: List[str] = field(default_factory=list)
    shell: List[str] = field(default_factory=list)
    stop_signal: str = ""
    healthcheck: List[str] = field(default_factory=list)

    @classmethod
    def _from_proto(cls, c: pb.ImageConfig) -> "ImageConfig":
        env: Dict[str, str] = {}
        for kv in c.env:
            k, _, v = kv.partition("=")
            env[k] = v
        labels = dict(kv.partition("=")[::2] for kv in c.labels)
        return cls(env=env, workdir=c.working_dir, entrypoint=list(c.entrypoint),
                   cmd=list(c.cmd), user=c.user, labels=labels,
                   exposed_ports=list(c.exposed_ports), shell=list(c.shell),
                   stop_signal=c.stop_signal, healthcheck=list(c.healthcheck))

    def _to_proto(self) -> pb.ImageConfig:
        return pb.ImageConfig(env=[f"{k}={v}" for k, v in self.env.items()],
                              working_dir=self.workdir, entrypoint=list(self.entrypoint),
                              cmd=list(self.cmd), user=self.user)


@dataclass(frozen=True)
class ImageInfo:
    """An image stored in warrend (list_images, get_image, import_image,
    build_image)."""

    id: str
    names: List[str] = field(default_factory=list)
    layers: List[str] = field(default_factory=list)
    size_bytes: int = 0
    config: ImageConfig = field(default_factory=ImageConfig)
    created_at: Optional[_dt.datetime] = None
    # "import", "pull" or "build".
    source: str = ""

    @classmethod
    def _from_proto(cls, i: pb.Image) -> "ImageInfo":
        return cls(id=i.id, names=list(i.names), layers=list(i.layers), size_bytes=i.size_bytes,
                   config=ImageConfig._from_proto(i.config),
                   created_at=from_timestamp(i.created_at), source=i.source)


def _terminal_progress() -> Optional[Callable[[str], None]]:
    """A one-line progress display on stderr when it is a terminal (the
    current step, rewritten in place; a failure's output stays in the
    error), else nothing: programs stay quiet unless they pass on_log."""
    import sys
    err = sys.stderr
    if not (hasattr(err, "isatty") and err.isatty()):
        return None
    width = shutil.get_terminal_size((80, 24)).columns - 1

    def show(line: str) -> None:
        if line.startswith("Step ") or line.startswith("Building ") or \
                line.startswith("Waiting ") or line.startswith("Pulling "):
            err.write("\r\033[K" + line[:width])
        elif line.startswith("Built "):
            err.write("\r\033[K" + line[:width] + "\n")
        err.flush()
    return show


def build_image(channel: Any, image: "Image",
                on_log: Optional[Callable[[str], None]] = None,
                step_timeout: Optional[float] = None) -> "ImageInfo":
    """Build a declarative image over `channel` (a SandboxClient); on_log
    gets each build log line; step_timeout (seconds) bounds each RUN step
    (default: the daemon's, 30 min). Cached step by step by the daemon;
    local files travel once (by digest)."""
    if on_log is None:
        on_log = _terminal_progress()
    build = _upload_by_digest(channel, image._to_build())
    try:
        final = None
        req = pb.BuildImageRequest(build=build, step_timeout_secs=float(step_timeout or 0))
        for p in channel._images.BuildImage(req):
            if p.log and on_log is not None:
                on_log(p.log)
            if p.HasField("image"):
                final = p.image
    except grpc.RpcError as err:
        raise from_rpc_error(err, build_call=True) from None
    if final is None:
        raise ImageBuildError(Status.UNKNOWN, "build ended without an image")
    return ImageInfo._from_proto(final)
