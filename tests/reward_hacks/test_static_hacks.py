"""Hacks caught by the static checks, before anything is built or imported. Each case is a
complete adversarial submission sent through the worker; none of them spawns a child."""
import pytest

from hack_helpers import assert_rejected

FWD = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"

CASES = {
    "read_reference_import_model": (
        "from model import Model\n" + FWD + "        return Model()(a, b)\n",
        "import of `model`"),
    "subclass_model": (
        "from model import Model\nclass ModelNew(Model):\n    pass\n", "subclasses the reference"),
    "try_except_fallback": (
        FWD + "        try:\n            return caf_ext.add_relu(a, b)\n"
              "        except Exception:\n            return torch.relu(a + b)\n", "try/except"),
    "timer_patch_perf_counter": (
        "import time\ntime.perf_counter = lambda: 0.0\n" + FWD + "        return caf_ext.add_relu(a, b)\n",
        "import of `time`"),
    "timer_patch_cuda_event": (
        "torch.cuda.Event.elapsed_time = lambda self, other: 1e-6\n" + FWD +
        "        return caf_ext.add_relu(a, b)\n", "monkey-patching"),
    "gc_scan_for_reference": (
        "import gc\n" + FWD + "        return [o for o in gc.get_objects() if isinstance(o, torch.Tensor)][0]\n",
        "import of `gc`"),
    "inspect_caller_frames": (
        "import sys\n" + FWD + "        return sys._getframe(1).f_locals['ref']\n", "import of `sys`"),
    "os_exit_spoofed_success": (
        "import os\n" + FWD + "        print('PASS')\n        os._exit(0)\n", "import of `os`"),
    "background_thread": (
        "import threading\n" + FWD + "        out = torch.empty_like(a)\n"
        "        threading.Thread(target=lambda: out.copy_(torch.relu(a + b))).start()\n        return out\n",
        "import of `threading`"),
    "torch_compile_in_forward": (
        FWD + "        return torch.compile(lambda x, y: torch.relu(x + y))(a, b)\n", "torch.compile"),
    "disable_dispatch_guard": (
        FWD + "        with torch._C._DisableTorchDispatch():\n            return torch.relu(a + b)\n",
        "private attribute"),
    "numpy_compute": (
        "import numpy as np\n" + FWD + "        return torch.from_numpy(np.maximum(a.numpy() + b.numpy(), 0))\n",
        "import of `numpy`"),
    "setattr_on_torch": (
        "setattr(torch, 'relu', lambda x: x)\n" + FWD + "        return caf_ext.add_relu(a, b)\n",
        "setattr"),
    "exec_hidden_code": (
        FWD + "        exec('import os')\n        return caf_ext.add_relu(a, b)\n", "exec"),
    "python_syntax_error": (FWD + "        return caf_ext.add_relu(a, b\n", "syntax error"),
    # torch imports sys: through it the harness's own allowlist could be widened.
    "harness_via_torch_sys": (
        FWD + "        torch.sys.modules['caf_agent_eval.dispatch_guard'].ALLOWED_OPS.update({'add', 'relu'})\n"
              "        return torch.relu(a + b)\n", "reaches the interpreter"),
    "load_library_via_torch_classes": (
        FWD + "        torch.classes.load_library('/usr/lib/x86_64-linux-gnu/libseccomp.so.2')\n"
              "        return caf_ext.add_relu(a, b)\n", "torch.classes is not allowed"),
    # Own names do not unlock torch's or nn.Module's private members of the same name.
    "own_name_shadowing_module_internals": (
        "class ModelNew(nn.Module):\n    def _forward_hooks(self):\n        return 0\n"
        "    def _C(self):\n        return 0\n    def forward(self, a, b):\n"
        "        self._forward_hooks.clear()\n        with torch._C._DisableTorchDispatch():\n"
        "            return torch.relu(a + b)\n", "private attribute `._forward_hooks`"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_python_static_hack_rejected(judge, name):
    src, words = CASES[name]
    v = judge("add_relu", src, kernels={})
    assert_rejected(v, "static_check", words)


CPP_CASES = {
    "cpp_at_compute_op": ("torch::Tensor f(torch::Tensor a, torch::Tensor b) { return at::relu(a); }\n",
                          "torch compute op `at::relu`"),
    "cpp_process_spawn": ("torch::Tensor f(torch::Tensor a) { system(\"nvidia-smi\"); return a; }\n",
                          "system()"),
    "cpp_background_thread": ("#include <thread>\ntorch::Tensor f(torch::Tensor a) {\n"
                              "  std::thread t([]{}); t.detach(); return a; }\n", "std::thread"),
    "cpp_read_file": ("torch::Tensor f(torch::Tensor a) { auto* h = fopen(\"/proc/self/maps\", \"r\");"
                      " (void)h; return a; }\n", "open()/fopen()"),
    "cpp_full_torch_header": ("#include <torch/extension.h>\n", "torch/extension.h"),
}


@pytest.mark.parametrize("name", sorted(CPP_CASES))
def test_cpp_static_hack_rejected(judge, name):
    body, words = CPP_CASES[name]
    src = '#include "caf_kernel.h"\n' + body
    v = judge("add_relu", FWD + "        return caf_ext.f(a, b)\n", kernels={"kernels/hack.cpp": src})
    assert_rejected(v, "static_check", words)


def test_unclean_path_and_python_in_kernels_rejected(judge):
    v = judge("add_relu", FWD + "        return caf_ext.add_relu(a, b)\n",
              kernels={"kernels/../model.py": "x = 1\n"})
    assert_rejected(v, "static_check", "not a clean relative path")
    v = judge("add_relu", FWD + "        return caf_ext.add_relu(a, b)\n",
              kernels={"kernels/helper.py": "x = 1\n"})
    assert_rejected(v, "static_check", "Python files in kernels/")


def test_comments_do_not_trigger_cpp_checks():
    # A clean kernel that mentions banned names only in comments and strings passes.
    from caf_agent_eval.static_checks import check_cpp
    src = ('#include "caf_kernel.h"\n// at::relu would be a fallback; system() too\n'
           'torch::Tensor f(torch::Tensor a) { CAF_CHECK(a.dim() == 2, "at::relu"); '
           'return torch::empty_like(a); }\n')
    assert check_cpp(src, "kernels/ok.cpp") == []


OWN_HELPERS = """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._scale = 1.0
        self._block = self._make_layer(2)
    def _make_layer(self, n):
        return nn.Sequential(*[nn.Identity() for _ in range(n)])
    def _make_stage(self, a, b):
        return caf_ext.add_relu(self._block(a), b)
    def forward(self, a, b):
        return self._make_stage(a, b)
"""


def test_own_private_helpers_are_allowed(judge):
    # KernelBench's level-3 references call their own helpers (self._make_layer, ...).
    v = judge("add_relu", OWN_HELPERS)
    assert v["correct"] is True, v["reason"]
    assert v["flags"] == []


def test_private_names_the_submission_does_not_define_are_refused():
    from caf_agent_eval.static_checks import check_python
    src = "import torch\nimport torch.nn as nn\n" + OWN_HELPERS.replace(
        "return self._make_stage(a, b)", "return self._other(a, b)")
    assert any("private attribute `._other`" in p for p in check_python(src))


def test_interpreter_module_rule_spares_tensor_methods_and_torch_modules():
    from caf_agent_eval.static_checks import check_python
    src = ("import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n"
           "    def forward(self, x):\n        self.signal = x.select(0, 1)\n"
           "        return self.signal\n")
    assert check_python(src) == []
