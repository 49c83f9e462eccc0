"""Conversions from wire values to the Python values of the public
dataclasses."""
from __future__ import annotations

import datetime as _dt
from typing import Optional

from warren._proto.warren.v1 import common_pb2


def from_timestamp(ts: common_pb2.Timestamp) -> Optional[_dt.datetime]:
    """An aware UTC datetime, or None for an unset timestamp."""
    if not ts.unix_nanos:
        return None
    return _dt.datetime.fromtimestamp(ts.unix_nanos / 1e9, tz=_dt.timezone.utc)


def from_unix(seconds: int) -> Optional[_dt.datetime]:
    """An aware UTC datetime for Unix seconds, or None for 0."""
    if not seconds:
        return None
    return _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc)
