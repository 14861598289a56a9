// torch compute through a namespace alias (`T::relu` is at::relu): invisible to the source
// check's `at::` rule. Caught by the native-code check (`at::_ops::add_Tensor`,
// `at::_ops::relu`) before the dispatcher guard would see it at run time.
#include "caf_kernel.h"

#include <ATen/ops/add.h>
#include <ATen/ops/relu.h>

namespace T = at;

namespace {
torch::Tensor add_relu_alias(torch::Tensor a, torch::Tensor b) {
  return T::relu(T::add(a, b));
}
}  // namespace

CAF_REGISTER(m) {
  m.def("add_relu_alias", &add_relu_alias);
}
