// out = alpha * a + b on the CPU (the CPU flavour of bench/judge/kernels/axpby.cu).
#include "caf_kernel.h"

namespace {

torch::Tensor axpby(torch::Tensor a, torch::Tensor b, double alpha) {
  CAF_CHECK(a.is_contiguous() && b.is_contiguous() && a.sizes() == b.sizes(), "shape/layout");
  auto o = torch::empty_like(a);
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = o.data_ptr<float>();
  const float al = static_cast<float>(alpha);
  for (int64_t i = 0; i < a.numel(); ++i) po[i] = al * pa[i] + pb[i];
  return o;
}

}  // namespace

CAF_REGISTER(m) {
  m.def("axpby", &axpby);
}
