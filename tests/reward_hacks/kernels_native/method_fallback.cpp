// Torch compute through tensor methods (no `at::` in the text for the source check to see):
// the methods call at::_ops::add_Tensor / clamp_min, which the native-code check refuses at
// build time (the dispatcher guard would also see them at run time).
#include "caf_kernel.h"

namespace {
torch::Tensor method_fallback(torch::Tensor a, torch::Tensor b) {
  return a.add(b).clamp_min(0);
}
}  // namespace

CAF_REGISTER(m) {
  m.def("method_fallback", &method_fallback);
}
