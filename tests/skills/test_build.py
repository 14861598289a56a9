"""The submission builder (skills/eval_worker/caf_agent_eval/build.py): precompiled header,
side-by-side translation units, logs that name the agent's files, CUDA arch flags."""
import os
import secrets
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reward_hacks"))

from caf_agent_eval import build  # noqa: E402
from hack_helpers import build_root  # noqa: E402

# Includes a standard header before caf_kernel.h: the forced include keeps the precompiled
# header usable whatever the agent's include order.
SCALE_CPP = '''#include <cstring>
#include "caf_kernel.h"
// nonce {nonce}
namespace {{
torch::Tensor scale_{nonce}(torch::Tensor a) {{
  auto o = torch::empty_like(a);
  const float* p = a.data_ptr<float>();
  float* q = o.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) q[i] = 3.f * p[i];
  return o;
}}
}}  // namespace
CAF_REGISTER(m) {{ m.def("scale_{nonce}", &scale_{nonce}); }}
'''
HELPER_CPP = '''// nonce {nonce}
float helper_{nonce}(float x) {{ return 2.f * x; }}
'''

LOAD_AND_CALL = '''
import sys, torch
torch.ops.load_library(sys.argv[1])
x = torch.arange(6, dtype=torch.float32)
print(getattr(torch.ops.caf_ext, sys.argv[2])(x).tolist())
'''


def _nonce():
    return "n" + secrets.token_hex(6)


def test_cpu_build_on_the_precompiled_header_runs(tmp_path):
    root = build_root()
    n = _nonce()
    files = {"kernels/scale.cpp": SCALE_CPP.format(nonce=n),
             "kernels/helper.cpp": HELPER_CPP.format(nonce=n), "model_new.py": ""}
    res = build.build(files, "cpu", root)
    assert res.ok, res.log
    assert "pch" in res.seconds and "kernels/scale.cpp" in res.seconds and "link" in res.seconds
    # -Winvalid-pch: a precompiled header gcc could not use would print a warning here.
    assert "warnings" not in res.log and "pch" not in res.log.replace("precompiled header", ""), res.log
    ok, _, pch_dir = build.prepare("cpu", root)
    assert ok and os.path.exists(os.path.join(pch_dir, "caf_kernel.h.gch"))
    out = subprocess.run([sys.executable, "-c", LOAD_AND_CALL, res.library, f"scale_{n}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([3.0 * i for i in range(6)])
    again = build.build(files, "cpu", root)
    assert again.ok and again.cached and again.library == res.library


def test_build_without_the_precompiled_header(tmp_path, monkeypatch):
    monkeypatch.setenv("CAF_EVAL_PCH", "0")
    n = _nonce()
    res = build.build({"kernels/scale.cpp": SCALE_CPP.format(nonce=n)}, "cpu", str(tmp_path))
    assert res.ok, res.log
    assert "pch" not in os.listdir(tmp_path)


def test_compile_error_names_the_agents_file_not_the_judges_paths(tmp_path):
    bad = '#include "caf_kernel.h"\ntorch::Tensor f(torch::Tensor a) { return a }\n'
    res = build.build({"kernels/sub/bad.cpp": bad}, "cpu", build_root())
    assert not res.ok
    assert "kernels/sub/bad.cpp:2" in res.log, res.log
    assert build_root() not in res.log


def test_link_error_is_reported(tmp_path):
    src = '#include "caf_kernel.h"\nvoid missing();\nstatic int x = (missing(), 0);\n'
    res = build.build({"kernels/a.cpp": src + f"// {_nonce()}\n"}, "cpu", build_root())
    # A shared library may leave symbols undefined; the native-code check lists every
    # undefined symbol outside its allowlist, so a missing definition is named at build time.
    assert not res.ok and res.rejected, res.log
    assert "`missing()`" in res.log and "did not is listed too" in res.log


@pytest.mark.parametrize("spec,expected", [
    ("9.0", ["-gencode=arch=compute_90,code=sm_90"]),
    ("8.0;9.0a", ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a"]),
    ("9.0+PTX", ["-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_90,code=compute_90"]),
])
def test_cuda_arch_flags(monkeypatch, spec, expected):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", spec)
    assert build.cuda_arch_flags() == expected


def test_bad_cuda_arch_list_is_a_compile_error_naming_it(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "hopper")
    res = build.build({"kernels/a.cu": "__global__ void k() {}\n"}, "cuda", str(tmp_path))
    assert not res.ok and "TORCH_CUDA_ARCH_LIST" in res.log and "hopper" in res.log


AXPBY = os.path.join(ROOT, "bench", "judge", "kernels")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"),
                    reason="no CUDA toolkit")
def test_cuda_workspace_layout_builds_without_a_gpu(monkeypatch):
    """The agent's sandbox has nvcc and no GPU: the light .cu + torch-facing .cpp layout
    builds for the default arch and exports the launcher the .cpp calls."""
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    files = {f"kernels/{name}": open(os.path.join(AXPBY, name)).read() + f"// {_nonce()}\n"
             for name in ("axpby.cu", "axpby_op.cpp")}
    res = build.build(files, "cuda", build_root())
    assert res.ok, res.log
    syms = subprocess.run(["nm", "-D", "--defined-only", res.library], capture_output=True, text=True).stdout
    assert "axpby_launch" in syms


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"),
                    reason="no CUDA toolkit")
def test_the_judges_hold_kernel_builds_once_and_loads_without_the_dispatcher(monkeypatch, tmp_path):
    """hold.py: nvcc builds the SM-filling hold kernel as a plain C library (cached per build
    root); with no GPU, loading it works and asking its geometry is a clear error."""
    from caf_agent_eval import hold
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    lib, log = hold.build(str(tmp_path))
    assert lib and log == "built", log
    syms = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout
    assert "caf_hold" in syms and "caf_hold_geometry" in syms
    assert hold.build(str(tmp_path)) == (lib, "cached")
    with pytest.raises(RuntimeError, match="fills every SM"):
        hold.Hold(lib, 0)  # no device here: the geometry query fails, named


def test_the_documented_addmm_gemm_path_builds_as_documented():
    """SKILL.md's GEMM example, taken from SKILL.md itself, builds with caf_kernel.h alone,
    passes the native-code check (at::addmm is a sanctioned entry point) and computes
    bias + x @ w^T."""
    import re
    text = open(os.path.join(ROOT, "skills", "workspace", "SKILL.md")).read()
    snippet = next(b for b in re.findall(r"```cpp\n(.*?)```", text, re.S) if "at::addmm" in b)
    n = _nonce()
    src = ('#include "caf_kernel.h"\n' + snippet.replace("linear(", f"linear_{n}(") +
           f'CAF_REGISTER(m) {{ m.def("linear_{n}", &linear_{n}); }}\n')
    res = build.build({"kernels/linear.cpp": src}, "cpu", build_root())
    assert res.ok, res.log
    check = ("import sys, torch\ntorch.ops.load_library(sys.argv[1])\n"
             "x, w, b = torch.randn(4, 8), torch.randn(3, 8), torch.randn(3)\n"
             "y = getattr(torch.ops.caf_ext, sys.argv[2])(x, w, b)\n"
             "print(torch.allclose(y, torch.addmm(b, x, w.t()), atol=1e-5))\n")
    out = subprocess.run([sys.executable, "-c", check, res.library, f"linear_{n}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr


@pytest.mark.skipif(shutil.which("nm") is None, reason="no binutils")
def test_native_check_reads_the_same_symbols_as_nm():
    """symbols.py reads .dynsym in-process; it must list what `nm -D --undefined-only` does."""
    from caf_agent_eval import symbols
    files = {"kernels/scale.cpp": SCALE_CPP.format(nonce="nmparity")}
    res = build.build(files, "cpu", build_root())
    assert res.ok, res.log
    out = subprocess.run(["nm", "-D", "--undefined-only", "--format=posix", res.library],
                         capture_output=True, text=True, check=True).stdout
    expected = sorted({line.split()[0].split("@")[0] for line in out.splitlines() if line.strip()})
    assert sorted(set(symbols.undefined_names(res.library))) == expected
    assert symbols.demangle("_ZN2at4_ops5addmm4callERKNS_6TensorES4_S4_RKN3c106ScalarES8_") == \
        "at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, " \
        "c10::Scalar const&, c10::Scalar const&)"


def test_a_compiler_that_links_libstdcxx_statically_still_passes_the_native_check(tmp_path, monkeypatch):
    """A GPU image's CXX wrapper found only libstdc++.a: the extension then carried libstdc++'s
    own code and its libc calls (iconv, close, getentropy), and the native-code check refused
    every honest kernel. The build names the libstdc++ this process runs on instead."""
    monkeypatch.setenv("CXX", "c++ -static-libstdc++")
    root = str(tmp_path / "static-root")
    n = _nonce()
    # std::string and snprintf pull in libstdc++'s locale-aware code when it is static.
    src = SCALE_CPP.format(nonce=n).replace(
        "auto o = torch::empty_like(a);",
        'std::string tag = std::to_string(a.numel()); (void)tag;\n  auto o = torch::empty_like(a);')
    res = build.build({"kernels/scale.cpp": "#include <string>\n" + src, "model_new.py": ""}, "cpu", root)
    assert res.ok, res.log
    assert not res.rejected, res.log
    out = subprocess.run([sys.executable, "-c", LOAD_AND_CALL, res.library, f"scale_{n}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[0.0, 3.0, 6.0, 9.0, 12.0, 15.0]"
