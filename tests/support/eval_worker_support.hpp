#pragma once
/// tests/support/eval_worker_support.hpp: what the C++ tests that start the real eval worker
/// share: where the repo and its Python venv are, and a tiny CPU task with a kernel submission.

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace caf_agent::test_support {

/// The repository root (ctest runs tests there and sets CAF_AGENT_SOURCE_DIR).
inline std::string source_dir() {
  const char* src = std::getenv("CAF_AGENT_SOURCE_DIR");
  return src ? src : ".";
}

/// The interpreter with torch: CAF_AGENT_PYTHON, else the repo's .venv; none: skip the test.
inline std::optional<std::string> venv_python() {
  if (const char* p = std::getenv("CAF_AGENT_PYTHON")) return std::string(p);
  auto venv = source_dir() + "/.venv/bin/python";
  if (std::filesystem::exists(venv)) return venv;
  return std::nullopt;
}

/// A layout-only task: an honest ModelNew needs no compiled kernel (views and copies are
/// allowed ops), so a test can exercise the whole judge without a C++ build.
inline const char* transpose_task_py() {
  return "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
         "    def forward(self, x):\n        return x.t().contiguous()\n\n"
         "batch_size = 8\n\ndef get_inputs():\n    return [torch.randn(batch_size, 33)]\n\n"
         "def get_init_inputs():\n    return []\n";
}

/// A CPU kernel for that task under a symbol named by `nonce` (so its build is never cached
/// already), and the model_new.py that calls it.
inline std::map<std::string, std::string> transpose_kernel_submission(const std::string& nonce) {
  return {{"kernels/t.cpp",
           "#include \"caf_kernel.h\"\n"
           "torch::Tensor tr_" +
               nonce +
               "(torch::Tensor x) {\n"
               "  CAF_CHECK(x.dim() == 2 && x.is_contiguous(), \"2-d contiguous\");\n"
               "  auto out = torch::empty({x.size(1), x.size(0)}, x.options());\n"
               "  const float* p = x.data_ptr<float>(); float* o = out.data_ptr<float>();\n"
               "  for (int64_t i = 0; i < x.size(0); ++i)\n"
               "    for (int64_t j = 0; j < x.size(1); ++j) o[j * x.size(0) + i] = p[i * x.size(1) + j];\n"
               "  return out;\n}\n"
               "CAF_REGISTER(m) { m.def(\"tr_" +
               nonce + "\", &tr_" + nonce + "); }\n"},
          {"model_new.py",
           "import torch\nimport torch.nn as nn\nimport caf_ext\n\nclass ModelNew(nn.Module):\n"
           "    def forward(self, x):\n        return caf_ext.tr_" +
               nonce + "(x)\n"}};
}

}  // namespace caf_agent::test_support
