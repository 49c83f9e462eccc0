"""Exceptions raised by the SDK.

Every error carries a :class:`Status` (``status``; the gRPC status codes,
by the same names and numbers) and the server's message (``message``).
:func:`from_rpc_error` turns a ``grpc.RpcError`` into the matching
subclass: grpc stays an implementation detail of the SDK.
"""
from __future__ import annotations

import enum
from typing import Dict, List, Optional, Type

import grpc


class Status(enum.IntEnum):
    """Why a call failed: the gRPC status codes, same names and numbers."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

    def __str__(self) -> str:
        return self.name


def _status(code: Optional[grpc.StatusCode]) -> Status:
    """The Status for a grpc.StatusCode (UNKNOWN for None or a code this
    SDK does not know)."""
    if code is None:
        return Status.UNKNOWN
    try:
        return Status[code.name]
    except KeyError:
        return Status.UNKNOWN


class WarrenError(Exception):
    """Base class of every Warren error."""

    def __init__(self, status: Status, message: str):
        self.status = status
        self.message = message
        super().__init__(f"{status.name}: {message}" if message else status.name)

    @property
    def code(self) -> str:
        """The upper-case status name, e.g. ``"NOT_FOUND"``."""
        return self.status.name


class Cancelled(WarrenError):
    pass


class Unknown(WarrenError):
    pass


class InvalidArgument(WarrenError):
    pass


class DeadlineExceeded(WarrenError):
    pass


class NotFound(WarrenError):
    pass


class SandboxNotFound(NotFound):
    """The sandbox named by id or name does not exist."""


class AlreadyExists(WarrenError):
    pass


class PermissionDenied(WarrenError):
    pass


class ResourceExhausted(WarrenError):
    pass


class FailedPrecondition(WarrenError):
    pass


class Aborted(WarrenError):
    pass


class OutOfRange(WarrenError):
    pass


class Unimplemented(WarrenError):
    pass


class Internal(WarrenError):
    pass


class Unavailable(WarrenError):
    pass


class DataLoss(WarrenError):
    pass


class Unauthenticated(WarrenError):
    pass


class GitError(WarrenError):
    """A git helper's command failed inside the sandbox: ``command`` (the
    git argv as run, credentials never in it), ``exit_code`` and
    ``stderr``; the message names all three."""

    def __init__(self, message: str, exit_code: Optional[int] = None, stderr: str = "",
                 command: Optional[List[str]] = None):
        self.exit_code = exit_code
        self.stderr = stderr
        self.command = list(command) if command is not None else []
        super().__init__(Status.UNKNOWN, message)

    def __str__(self) -> str:
        return self.message


class ImageBuildError(WarrenError):
    """An image build or import failed."""


_BY_STATUS: Dict[Status, Type[WarrenError]] = {
    Status.CANCELLED: Cancelled,
    Status.UNKNOWN: Unknown,
    Status.INVALID_ARGUMENT: InvalidArgument,
    Status.DEADLINE_EXCEEDED: DeadlineExceeded,
    Status.NOT_FOUND: NotFound,
    Status.ALREADY_EXISTS: AlreadyExists,
    Status.PERMISSION_DENIED: PermissionDenied,
    Status.RESOURCE_EXHAUSTED: ResourceExhausted,
    Status.FAILED_PRECONDITION: FailedPrecondition,
    Status.ABORTED: Aborted,
    Status.OUT_OF_RANGE: OutOfRange,
    Status.UNIMPLEMENTED: Unimplemented,
    Status.INTERNAL: Internal,
    Status.UNAVAILABLE: Unavailable,
    Status.DATA_LOSS: DataLoss,
    Status.UNAUTHENTICATED: Unauthenticated,
}


def from_rpc_error(err: grpc.RpcError, *, sandbox_call: bool = False,
                   build_call: bool = False) -> WarrenError:
    """The WarrenError for a failed call. ``sandbox_call`` turns NOT_FOUND
    into SandboxNotFound; ``build_call`` turns FAILED_PRECONDITION/INTERNAL/
    UNKNOWN into ImageBuildError."""
    try:
        status = _status(err.code())  # type: ignore[attr-defined]
        message = err.details() or ""  # type: ignore[attr-defined]
    except Exception:  # not a Call: e.g. a bare RpcError
        status, message = Status.UNKNOWN, str(err)
    if sandbox_call and status == Status.NOT_FOUND:
        return SandboxNotFound(status, message)
    if build_call and status in (Status.FAILED_PRECONDITION, Status.INTERNAL, Status.UNKNOWN):
        return ImageBuildError(status, message)
    cls = _BY_STATUS.get(status, WarrenError)
    return cls(status, message)
