"""Exceptions raised by the SDK.

Every error carries the gRPC status (``status``, a :class:`grpc.StatusCode`)
and the server's message (``message``). :func:`from_rpc_error` turns a
``grpc.RpcError`` into the matching subclass.
"""
from __future__ import annotations

from typing import Optional

import grpc


class WarrenError(Exception):
    """Base class of every Warren error."""

    def __init__(self, status: grpc.StatusCode, message: str):
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
    """A git helper's command failed inside the sandbox."""

    def __init__(self, message: str, exit_code: Optional[int] = None, stderr: str = ""):
        self.exit_code = exit_code
        self.stderr = stderr
        super().__init__(grpc.StatusCode.UNKNOWN, message)

    def __str__(self) -> str:
        return self.message


class ImageBuildError(WarrenError):
    """An image build or import failed."""


_BY_STATUS = {
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.UNKNOWN: Unknown,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DATA_LOSS: DataLoss,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
}


def from_rpc_error(err: grpc.RpcError, *, sandbox_call: bool = False,
                   build_call: bool = False) -> WarrenError:
    """The WarrenError for a failed call. ``sandbox_call`` turns NOT_FOUND
    into SandboxNotFound; ``build_call`` turns FAILED_PRECONDITION/INTERNAL/
    UNKNOWN into ImageBuildError."""
    try:
        status = err.code()  # type: ignore[attr-defined]
        message = err.details() or ""  # type: ignore[attr-defined]
    except Exception:  # not a Call: e.g. a bare RpcError
        status, message = grpc.StatusCode.UNKNOWN, str(err)
    if status is None:
        status = grpc.StatusCode.UNKNOWN
    if sandbox_call and status == grpc.StatusCode.NOT_FOUND:
        return SandboxNotFound(status, message)
    if build_call and status in (grpc.StatusCode.FAILED_PRECONDITION,
                                 grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
        return ImageBuildError(status, message)
    cls = _BY_STATUS.get(status, WarrenError)
    return cls(status, message)
