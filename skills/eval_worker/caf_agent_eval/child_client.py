"""The parent's handle on one child process: start, request with a deadline, capped log,
crash and timeout detection. A child is used for one job and then killed."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from . import protocol

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Rationale: 64 KiB of a submission's prints is plenty to debug it; more is a flood.
LOG_CAP_BYTES = 64 * 1024


class ChildTimeout(Exception):
    """The child missed a deadline (it was killed)."""


class ChildCrashed(Exception):
    """The child exited or was killed by a signal while a request was pending."""


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


class ChildProcess:
    """One `python -m caf_agent_eval.child` with its frame pipes and a log reader."""

    def __init__(self, device: str, threads: int):
        env = dict(os.environ)
        env["PYTHONPATH"] = PACKAGE_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        env["CAF_EVAL_DEVICE"] = device
        env["CAF_EVAL_THREADS"] = str(threads)
        if threads > 0:
            env["OMP_NUM_THREADS"] = str(threads)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "caf_agent_eval.child"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
        self._log = bytearray()
        self._dropped = 0
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        self.ready = False

    def _drain(self):
        while True:
            chunk = self.proc.stderr.read1(65536) if hasattr(self.proc.stderr, "read1") \
                else self.proc.stderr.read(65536)
            if not chunk:
                return
            room = LOG_CAP_BYTES - len(self._log)
            self._log += chunk[:max(0, room)]
            self._dropped += max(0, len(chunk) - max(0, room))

    def log(self) -> str:
        text = self._log.decode(errors="replace")
        if self._dropped:
            text += f"\n... [{self._dropped} more bytes of output dropped]"
        return text

    def wait_ready(self, timeout_s: float) -> None:
        if not self.ready:
            self._read(time.monotonic() + timeout_s, "start-up")
            self.ready = True

    def request(self, obj: dict, timeout_s: float, phase: str) -> dict:
        """Sends a request and waits for its reply; raises ChildTimeout / ChildCrashed."""
        try:
            protocol.write_frame(self.proc.stdin.fileno(), obj)
        except (BrokenPipeError, OSError):
            self._crashed(phase)
        return self._read(time.monotonic() + timeout_s, phase)

    def _read(self, deadline: float, phase: str) -> dict:
        try:
            return protocol.read_frame(self.proc.stdout.fileno(), deadline)
        except protocol.FrameTimeout:
            self.kill()
            raise ChildTimeout(phase) from None
        except protocol.FrameError:
            self._crashed(phase)

    def _crashed(self, phase: str):
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        raise ChildCrashed(f"{describe_exit(self.proc.returncode)} during {phase}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self._reader.join(timeout=1)
