"""Stopping a run on SIGTERM/SIGINT so that what it has done so far is still written.

The handler both raises `Stopped` and records the request. The raise stops the run where it
is; the record is for the case the raise is lost: Python runs a signal handler wherever the
main thread happens to be, and an exception raised while it is inside a finalizer (`__del__`,
a weakref callback, garbage collection) is printed as "Exception ignored" and dropped. The
slot pool checks the record on every turn of its loop (`check`), so a lost raise costs at most
one turn, never the stop.
"""
from __future__ import annotations

_requested: list[str] = []


class Stopped(BaseException):
    """The run was asked to stop (SIGTERM, SIGINT): the outputs so far are still written. A
    BaseException, so no handler of a task's own errors swallows it."""


def on_signal(signum, frame) -> None:
    reason = f"stopped by signal {signum}; the tasks kept until then are written"
    _requested.append(reason)
    raise Stopped(reason)


def check() -> None:
    """Raises Stopped if a stop was requested (even when the handler's own raise was lost)."""
    if _requested:
        raise Stopped(_requested[0])


def requested() -> str | None:
    return _requested[0] if _requested else None


def reset() -> None:
    """Forgets a request (for a process that runs more than one job, and for tests)."""
    _requested.clear()
