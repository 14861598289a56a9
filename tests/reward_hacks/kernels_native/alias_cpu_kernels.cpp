// torch's own CPU kernels called directly through a namespace alias: `A::cpu::add` is
// at::cpu::add, which runs the kernel without going through the dispatcher (the guard never
// sees it) and the source check's `at::` rule never sees the text. Caught by the native-code
// check: `at::cpu::add`, `at::cpu::relu`.
#include "caf_kernel.h"

#include <ATen/ops/add_cpu_dispatch.h>
#include <ATen/ops/relu_cpu_dispatch.h>

namespace A = at;

namespace {
torch::Tensor add_relu_cpu(torch::Tensor a, torch::Tensor b) {
  auto s = A::cpu::add(a, b);
  return A::cpu::relu(s);
}
}  // namespace

CAF_REGISTER(m) {
  m.def("add_relu_cpu", &add_relu_cpu);
}
