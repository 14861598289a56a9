"""Ties a process's life to its parent's (Linux prctl PR_SET_PDEATHSIG)."""
import ctypes
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL this process when its parent exits; no-op where prctl is unavailable."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass
