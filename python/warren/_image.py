"""Declarative images. Every builder method returns a new Image; the spec
travels to warrend as an ImageBuild protobuf, which builds and caches it.
An Image with no steps is just a reference (ImageSpec.ref)."""
from __future__ import annotations

import datetime as _dt
import os
import re
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
        `sandbox:latest`): Debian with Python, Git, CA certificates and
        OpenSSH, working in /workspace, built offline from Debian packages
        (scripts/base-image.sh). An empty base means "the default", so the
        spec carries no reference and builder steps apply on top of it."""
        return cls("")

    @classmethod
    def from_dockerfile(cls, path: Union[str, os.PathLike]) -> "Image":
        """A Dockerfile's contents inlined: its FROM is the base, every
        other instruction a raw step. Multi-stage files are rejected."""
        with open(path, encoding="utf-8") as f:
            text = f.read()
        base: Optional[str] = None
        steps: List[pb.BuildStep] = []
        for instr in _dockerfile_instructions(text):
            word = instr.split(None, 1)[0].upper()
            if word == "FROM":
                if base is not None:
                    raise ValueError(f"{path}: multi-stage Dockerfiles are not supported")
                args = [a for a in instr.split()[1:] if not a.startswith("--")]
                if not args:
                    raise ValueError(f"{path}: FROM without an image")
                base = args[0]
            elif base is None and word != "ARG":
                raise ValueError(f"{path}: instruction before FROM: {instr}")
            else:
                steps.append(pb.BuildStep(dockerfile=instr))
        if base is None:
            raise ValueError(f"{path}: no FROM instruction")
        img = cls(base)
        img._steps = tuple(steps)
        return img

    # --- builder ---
    def _with(self, step: pb.BuildStep) -> "Image":
        img = Image(self.base_image)
        img._steps = self._steps + (step,)
        return img

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
        img = self
        root = os.fspath(local_path)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                if not os.path.isfile(full):
                    continue
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                img = img.add_local_file(full, remote_path.rstrip("/") + "/" + rel)
        return img

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
    def build(self, client: Any, on_log: Optional[Callable[[str], None]] = None) -> "ImageInfo":
        """Build this image with `client` (a SandboxClient); `on_log` gets
        each build log line. Steps already built are reused (cache)."""
        return build_image(client, self, on_log)

    def _to_build(self) -> pb.ImageBuild:
        return pb.ImageBuild(base_image=self.base_image, steps=list(self._steps))

    def _to_spec(self) -> pb.ImageSpec:
        if not self._steps:
            return pb.ImageSpec(ref=self.base_image)
        return pb.ImageSpec(build=self._to_build())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Image) and self._to_build() == other._to_build()

    def __hash__(self) -> int:
        return hash(self._to_build().SerializeToString(deterministic=True))

    def __repr__(self) -> str:
        return f"Image({self.base_image or 'sandbox default'!r}, steps={len(self._steps)})"


def image_spec(image: Union[Image, str, None]) -> Optional[pb.ImageSpec]:
    """ImageSpec for an Image, a plain reference, or None (daemon default)."""
    if image is None:
        return None
    if isinstance(image, str):
        return pb.ImageSpec(ref=image)
    if isinstance(image, Image):
        return image._to_spec()
    raise TypeError(f"image must be a str or Image, not {type(image).__name__}")


def _dockerfile_instructions(text: str) -> List[str]:
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        out.append(re.sub(r"\s+", " ", cur.strip()) if not cur.lstrip().upper().startswith("RUN") else cur.strip())
        cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


@dataclass(frozen=True)
class ImageConfig:
    """The run configuration an image carries: environment ("K=V" entries
    as a dict), working directory, entrypoint, command and user."""

    env: Dict[str, str] = field(default_factory=dict)
    workdir: str = ""
    entrypoint: List[str] = field(default_factory=list)
    cmd: List[str] = field(default_factory=list)
    user: str = ""

    @classmethod
    def _from_proto(cls, c: pb.ImageConfig) -> "ImageConfig":
        env: Dict[str, str] = {}
        for kv in c.env:
            k, _, v = kv.partition("=")
            env[k] = v
        return cls(env=env, workdir=c.working_dir, entrypoint=list(c.entrypoint),
                   cmd=list(c.cmd), user=c.user)

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


def build_image(channel: Any, image: "Image",
                on_log: Optional[Callable[[str], None]] = None) -> "ImageInfo":
    """Build a declarative image over `channel` (a SandboxClient); on_log
    gets each build log line. Cached step by step by the daemon."""
    try:
        final = None
        for p in channel._images.BuildImage(pb.BuildImageRequest(build=image._to_build())):
            if p.log and on_log is not None:
                on_log(p.log)
            if p.HasField("image"):
                final = p.image
    except grpc.RpcError as err:
        raise from_rpc_error(err, build_call=True) from None
    if final is None:
        raise ImageBuildError(Status.UNKNOWN, "build ended without an image")
    return ImageInfo._from_proto(final)
