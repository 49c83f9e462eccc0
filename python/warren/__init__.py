"""Warren Python SDK: create sandboxes, run processes in them and stream
their output over gRPC.

    from warren import SandboxClient
    with SandboxClient.from_env() as client:
        sb = client.create(image="busybox:latest")
        print(sb.exec("echo", "hi").stdout_text)
        sb.terminate()
"""
from warren._channel import DEFAULT_ADDR, grpc_target
from warren._client import NewToken, SandboxClient, TokenInfo, VersionInfo, WhoAmI
from warren._errors import (Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded,
                            FailedPrecondition, GitError, ImageBuildError, Internal,
                            InvalidArgument, NotFound, OutOfRange, PermissionDenied,
                            ResourceExhausted, SandboxNotFound, Status, Unauthenticated,
                            Unavailable, Unimplemented, Unknown, WarrenError)
from warren._exec import ExecChanges, ExecEvent, ExecResult, FileChange, Process, ProcessInfo
from warren._files import FileStat, Files, WatchEvent, WatchEventKind, Watcher
from warren._git import Git, GitStatus
from warren._image import Image, ImageConfig, ImageInfo
from warren._network import ComputeClass, NetworkEvent, NetworkPolicy, ResourceDetector, SshDest
from warren._sandbox import DetectedResource, Sandbox, SandboxInfo, SandboxStatus
from warren._secret import Secret, SecretInfo
from warren._tunnel import Tunnel, TunnelConnection
from warren._volume import FileInfo, FileKind, Volume, VolumeInfo

__version__ = "0.1.0"

__all__ = [
    "SandboxClient", "Sandbox", "SandboxInfo", "SandboxStatus", "DetectedResource", "Image", "Secret", "Volume",
    "NetworkPolicy", "NetworkEvent", "SshDest", "ResourceDetector", "ComputeClass", "ExecEvent", "ExecResult",
    "Process", "ProcessInfo", "ExecChanges", "FileChange", "Git", "GitStatus", "VersionInfo", "ImageInfo", "ImageConfig",
    "SecretInfo", "Tunnel", "TunnelConnection", "VolumeInfo", "FileInfo", "FileKind", "Status", "WarrenError", "SandboxNotFound",
    "NotFound", "InvalidArgument", "Unimplemented", "Unavailable", "PermissionDenied",
    "DeadlineExceeded", "AlreadyExists", "FailedPrecondition", "ResourceExhausted", "Cancelled",
    "Unknown", "Aborted", "OutOfRange", "Internal", "DataLoss", "Unauthenticated", "GitError",
    "ImageBuildError", "DEFAULT_ADDR", "grpc_target", "Files", "FileStat", "WatchEvent",
    "WatchEventKind", "Watcher",
    "ImageBuildError", "DEFAULT_ADDR", "grpc_target", "WhoAmI", "TokenInfo", "NewToken",
]
