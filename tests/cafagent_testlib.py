"""Helpers shared by the Python tests: where the build is, free ports, caf-agent processes.

Imported by name (`from cafagent_testlib import ...`); never import from a conftest,
since several test folders have their own and pytest caches the first one."""
import os
import pathlib
import shutil
import socket
import struct
import subprocess
import sys
import time


REPO = pathlib.Path(__file__).resolve().parents[1]


def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("CAF_AGENT_BUILD_DIR", REPO / "build"))


import msgpack  # noqa: E402
import pytest  # noqa: E402  (skip/fail helpers)


def require_binary(path: pathlib.Path) -> pathlib.Path:
    """Fails (or skips, with CAF_AGENT_ALLOW_SKIP=1) when a built binary is missing."""
    if not path.exists():
        msg = f"{path} is not built (run ./x build)"
        if os.environ.get("CAF_AGENT_ALLOW_SKIP") == "1":
            pytest.skip(msg)
        pytest.fail(msg)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """A caf-agent process whose stderr is collected in a file."""

    def __init__(self, binary, args, log_path, cwd=REPO):
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen([str(binary), *args], stdout=self._log,
                                     stderr=subprocess.STDOUT, cwd=cwd)

    def log(self) -> str:
        return pathlib.Path(self.log_path).read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float = 10.0) -> float:
        """Waits until `needle` appears in the log; returns when (monotonic)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log():
                return time.monotonic()
            if self.proc.poll() is not None and needle not in self.log():
                break
            time.sleep(0.05)
        raise AssertionError(f"'{needle}' not seen within {timeout}s; log:\n{self.log()}")

    def stop(self, sig, timeout: float = 10.0) -> int:
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._log.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def tiny_model() -> pathlib.Path:
    """The small random model `./x setup` creates (the test command always has it)."""
    env = os.environ.get("CAF_AGENT_TINY_MODEL")
    path = pathlib.Path(env) if env else REPO / "models" / "tiny-qwen2"
    if not (path / "config.json").exists():
        if env:
            raise AssertionError(f"CAF_AGENT_TINY_MODEL={env} has no config.json")
        pytest.skip("no small model (./x setup creates models/tiny-qwen2)")
    return path


def make_tiny_checkpoint(out: pathlib.Path, seed: int) -> pathlib.Path:
    """Another checkpoint of the small model's shape (different weights), for weight swaps."""
    python = os.environ.get("CAF_AGENT_PYTHON", str(REPO / ".venv" / "bin" / "python"))
    subprocess.run([python, str(REPO / "tools" / "make_tiny_model.py"), "--out", str(out),
                    "--tokenizer", str(tiny_model()), "--seed", str(seed)],
                   check=True, capture_output=True, timeout=300)
    return out


def records_in(store):
    """Every record of a trajectory store directory (CAFT frames of msgpack)."""
    out = []
    for seg in sorted(pathlib.Path(store).glob("segment-*.msgpack")):
        data, pos = seg.read_bytes(), 0
        while pos + 12 <= len(data):
            (n,) = struct.unpack("<I", data[pos + 4:pos + 8])
            out.append(msgpack.unpackb(data[pos + 12:pos + 12 + n], raw=False))
            pos += 12 + n
    return out


def store_of(output):
    """The trajectory store a run printed ("N records in DIR")."""
    return [l.split(" in ")[-1].strip() for l in output.splitlines() if "records in" in l][-1]
