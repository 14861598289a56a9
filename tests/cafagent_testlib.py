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

    def wait_for(self, needle: str, timeout: float = 30.0) -> float:
        """Waits until `needle` appears in the log; returns when (monotonic)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log():
                return time.monotonic()
            if self.proc.poll() is not None and needle not in self.log():
                break
            time.sleep(0.05)
        raise AssertionError(f"'{needle}' not seen within {timeout}s; log:\n{self.log()}")

    def stop(self, sig, timeout: float = 60.0) -> int:
        """Signals the node and returns its exit status. The default wait is long: on a loaded
        2-core machine whose page cache was reclaimed, a node's shutdown pages the 240 MB binary
        and LibTorch's destructors back in from disk (15.8 s seen where 0.4 s is usual). A test
        about how fast a node stops passes its own timeout."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the node did not exit within {timeout}s of signal {sig}; log:\n{self.log()}")
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


def train_config_head(tmp_path: pathlib.Path, task_names, *, max_new_tokens: int) -> str:
    """The [cluster] .. [policy] sections of a small training run's config (the tests append
    [learner] and [train]): the named bundled tasks copied into tmp_path/tasks, one CPU judge
    slot, the small model, the run under tmp_path/run, workspaces where sandbox uids reach them
    (pytest's tmp dirs are mode 0700)."""
    import tempfile
    python = os.environ.get("CAF_AGENT_PYTHON", str(REPO / ".venv" / "bin" / "python"))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name in task_names:
        shutil.copy(REPO / "skills" / "tasks" / f"{name}.py", tasks / f"{name}.py")
    ws = pathlib.Path(tempfile.mkdtemp(prefix="caf_agent_ws_", dir="/tmp"))
    ws.chmod(0o755)
    return f"""
[cluster]
port = 0
# Rationale: a loaded 2-core CI machine (builds beside the test) may starve a node for seconds.
node_timeout_ms = 10000
[runtime]
run_dir = "{tmp_path / 'run'}"
[rollout]
max_concurrent_episodes = 2
tasks_dir = "{tasks}"
skills_dir = "{REPO / 'skills'}"
[gpu_pool]
slots = 1
worker_python = "{python}"
job_deadline_s = 240
[sandbox]
workspace_root = "{ws}"
[policy]
backend = "libtorch"
model_dir = "{tiny_model()}"
max_batch = 2
max_context = 8192
max_new_tokens = {max_new_tokens}
"""


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


def tiny_decoder_families(vocab: int, max_positions: int) -> dict:
    """Config makers of tiny random Llama, Qwen2 and Qwen3 checkpoints (transformers), each
    exercising what the C++ decoder must match: llama3 RoPE scaling with a short original
    context, q/k/v/o and MLP biases and an untied head (llama); q/k/v bias, tied embeddings
    and linear RoPE scaling (qwen2); q/k norm with head_dim 32 != hidden / heads (qwen3)."""
    import transformers

    def shapes():
        return dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=vocab, max_position_embeddings=max_positions,
                    bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return {
        "llama": lambda: transformers.LlamaConfig(
            attention_bias=True, mlp_bias=True, tie_word_embeddings=False,
            rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 16}, **shapes()),
        "qwen2": lambda: transformers.Qwen2Config(
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "linear", "rope_theta": 1000.0, "factor": 2.0}, **shapes()),
        "qwen3": lambda: transformers.Qwen3Config(head_dim=32, tie_word_embeddings=False, **shapes()),
    }
