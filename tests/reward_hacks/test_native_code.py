"""Native code against the judge: each kernel in kernels_native/ passes the source checks
(aliases, function pointers, hand-written prototypes, token pasting) and is refused after
the build by the native-code check (symbols.py: the extension's undefined dynamic symbols
against an allowlist), naming the symbol. Each is its own library (one build per case)."""
import os

import pytest

from hack_helpers import assert_rejected

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels_native")
AB = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"


def native(name: str) -> dict:
    with open(os.path.join(HERE, name)) as f:
        return {f"kernels/{name}": f.read()}


CASES = {
    # kernel file: (forward body, symbols the verdict must name)
    "py_api.cpp": ("        return torch.relu(a + b)\n", ["PyRun_SimpleString", "PyGILState_Ensure"]),
    "alias_cpu_kernels.cpp": ("        return caf_ext.add_relu_cpu(a, b)\n",
                              ["at::cpu::add", "at::cpu::relu"]),
    "alias_dispatch.cpp": ("        return caf_ext.add_relu_alias(a, b)\n",
                           ["at::_ops::add_Tensor", "at::_ops::relu"]),
    "thread_pool.cpp": ("        return caf_ext.add_relu_pool(a, b)\n", ["c10::ThreadPool"]),
    "os_functions.cpp": ("        return caf_ext.add_relu_os(a, b)\n",
                         ["`system`", "`pthread_create`", "`fopen", "`fork`", "`execve`",
                          "`socket`", "`dlopen`"]),
    "aten_override.cpp": ("        return caf_ext.add_relu_ovr(a, b)\n", ["torch::Library::_impl"]),
    "method_fallback.cpp": ("        return caf_ext.method_fallback(a, b)\n",
                            ["at::_ops::add_Tensor", "at::_ops::clamp_min"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_native_code_refused_by_symbol(judge, name):
    body, symbols = CASES[name]
    v = judge("add_relu", AB + body, kernels=native(name))
    assert_rejected(v, "native", "native code check failed")
    for s in symbols:
        assert s in v["compile_log"], (s, v["compile_log"])
    assert "static_check" not in v["flags"]  # the source checks did not see it


def test_build_stage_refuses_the_same_library():
    """The pool's build stage (`op: build`) runs the same check: the job ends there."""
    from caf_agent_eval import build
    from hack_helpers import build_root
    res = build.build(native("os_functions.cpp"), "cpu", build_root())
    assert not res.ok and res.rejected and "`execve`" in res.log
    again = build.build(native("os_functions.cpp"), "cpu", build_root())  # cached refusal
    assert not again.ok and again.rejected and again.cached and "`execve`" in again.log


def test_symbol_classification_table():
    """The policy on names, without a build: allowed families and refused ones."""
    from caf_agent_eval.symbols import classify
    ok = [("memcpy", "memcpy"), ("expf", "expf"), ("__expf_finite", "__expf_finite"),
          ("GOMP_parallel", "GOMP_parallel"), ("cudaLaunchKernel", "cudaLaunchKernel"),
          ("cublasSgemm_v2", "cublasSgemm_v2"), ("printf", "printf"), ("stderr", "stderr"),
          ("exit", "exit"),
          ("_ZN2at4_ops5addmm4callE", "at::_ops::addmm::call(at::Tensor const&)"),
          ("_ZN2at4_ops16empty_like4callE", "at::_ops::empty_like::call(at::Tensor const&)"),
          ("_ZNK2at10TensorBase8data_ptrIfEEPT_v", "float* at::TensorBase::data_ptr<float>() const"),
          ("_ZN5torch7LibraryC1E", "torch::Library::Library(torch::Library::Kind)"),
          ("_ZNSo9_M_insertIlEERSoT_", "std::basic_ostream<char, std::char_traits<char> >& "
           "std::basic_ostream<char, std::char_traits<char> >::_M_insert<long>(long)")]
    bad = [("system", "system"), ("PyRun_SimpleString", "PyRun_SimpleString"),
           ("_ZN2at4_ops4relu4callE", "at::_ops::relu::call(at::Tensor const&)"),
           ("_ZN2at6native4reluE", "at::native::relu(at::Tensor const&)"),
           ("_ZN3c104impl26tls_set_dispatch_key_excludedE",
            "c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey, bool)"),
           ("_ZN3c1010Dispatcher9singletonEv", "c10::Dispatcher::singleton()"),
           ("_ZNSt6thread15_M_start_threadE", "std::thread::_M_start_thread(std::unique_ptr<"
            "std::thread::_State, std::default_delete<std::thread::_State> >, void (*)())"),
           ("_ZNSt13basic_filebufIcSt11char_traitsIcEE4openEPKcSt13_Ios_Openmode",
            "std::basic_filebuf<char, std::char_traits<char> >::open(char const*, std::_Ios_Openmode)"),
           ("_ZNSt6chrono3_V212steady_clock3nowEv", "std::chrono::_V2::steady_clock::now()"),
           ("cudaLaunchHostFunc", "cudaLaunchHostFunc"), ("fopen", "fopen"), ("read", "read"),
           ("omp_get_wtime", "omp_get_wtime"), ("_ZN2at3cpu4reluERKNS_6TensorE",
                                                "at::cpu::relu(at::Tensor const&)")]
    for mangled, demangled in ok:
        assert classify(mangled, demangled) is None, demangled
    for mangled, demangled in bad:
        assert classify(mangled, demangled), demangled


def test_native_exit_zero_fails_the_job(judge):
    """`exit` is allowed by the native-code check (nvcc's host stubs for device functions
    link it), so a library may end the child with status 0: the child's missing result
    still fails the job, and the reason quotes the last line it wrote (a crash's cause)."""
    v = judge("add_relu", AB + "        return caf_ext.add_relu_exit(a, b)\n",
              kernels=native("exit_zero.cpp"))
    assert v["reward"] == -1 and v["correct"] is False, v
    assert "native" not in v["flags"], v  # the symbol check let it through
    assert "exited with status 0" in v["reason"], v["reason"]
    assert v["reason"].endswith("(its last output: the reason it gave up)"), v["reason"]
