// The torch side of axpby.cu: checks, allocation, stream, registration.
#include "caf_kernel.h"

void axpby_launch(const float* a, const float* b, float* o, float alpha, int64_t n, cudaStream_t s);

namespace {

torch::Tensor axpby(torch::Tensor a, torch::Tensor b, double alpha) {
  CAF_CHECK(a.is_contiguous() && b.is_contiguous() && a.sizes() == b.sizes(), "shape/layout");
  auto o = torch::empty_like(a);
  axpby_launch(a.data_ptr<float>(), b.data_ptr<float>(), o.data_ptr<float>(), static_cast<float>(alpha), a.numel(),
               caf::stream());
  return o;
}

}  // namespace

CAF_REGISTER(m) {
  m.def("axpby", &axpby);
}
