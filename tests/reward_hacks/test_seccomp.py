"""The system-call filter of the judging child (seccomp.py): code that evades the source
checks and the native-code check (raw system calls through inline assembly) still cannot
start a process, open a socket or write a file; from Python the same is refused statically.
Honest submissions run under the same filter (the whole suite does)."""
import os
import secrets

import pytest

from hack_helpers import assert_rejected

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels_native")
AB = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"


def raw_kernels() -> dict:
    with open(os.path.join(HERE, "raw_syscalls.cpp")) as f:
        return {"kernels/raw_syscalls.cpp": f.read()}


@pytest.mark.parametrize("op", ["add_relu_socket", "add_relu_fork"])
def test_raw_process_and_socket_syscalls_kill_the_child(judge, op):
    v = judge("add_relu", AB + f"        return caf_ext.{op}(a, b)\n", kernels=raw_kernels())
    assert_rejected(v, "forbidden_syscall", "forbidden system call", "SIGSYS")
    assert "static_check" not in v["flags"] and "native" not in v["flags"]


def test_raw_file_write_is_refused(judge):
    path = f"/tmp/caf_eval_seccomp_probe_{secrets.token_hex(4)}"
    src = ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           f"        self.path = torch.tensor(list(b'{path}') + [0], dtype=torch.uint8)\n"
           "    def forward(self, a, b):\n"
           "        return caf_ext.add_relu_write_file(a, b, self.path)\n")
    try:
        v = judge("add_relu", src, kernels=raw_kernels())
        assert not os.path.exists(path), "the submission created a file"
        # The kernel reports openat's result in out[0]: -13 is EACCES from the filter.
        assert_rejected(v, "mismatch", "got -13")
    finally:
        if os.path.exists(path):
            os.unlink(path)


@pytest.mark.parametrize("expr", ["torch.os.system('true')", "torch.serialization.os.system('true')",
                                  "torch.sys.modules['subprocess']"])
def test_python_reaching_os_through_torch_is_refused(judge, expr):
    v = judge("add_relu", AB + f"        {expr}\n        return caf_ext.add_relu(a, b)\n", kernels={})
    assert_rejected(v, "static_check", "reaches the interpreter or the process")


def test_filter_installs_and_blocks_in_a_plain_process():
    """seccomp.install() in a throw-away interpreter: threads work, a write-open fails with
    EACCES, os.system kills the process with SIGSYS."""
    import signal
    import subprocess
    import sys
    from hack_helpers import ROOT
    code = ("import os, threading\nfrom caf_agent_eval import seccomp\nseccomp.install()\n"
            "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
            "try:\n    open('/tmp/caf_eval_seccomp_plain', 'w')\nexcept PermissionError:\n"
            "    print('EACCES', flush=True)\nos.system('true')\nprint('survived')\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "skills", "eval_worker"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.stdout.split() == ["EACCES"], (r.stdout, r.stderr)
    assert r.returncode == -signal.SIGSYS
