// The torch side of relu.cu: checks, allocation, stream, registration.
#include "caf_kernel.h"

void relu_launch(const float* x, float* o, int64_t n, cudaStream_t s);

namespace {

torch::Tensor relu(torch::Tensor x) {
  CAF_CHECK(x.is_contiguous(), "contiguous input");  // data_ptr<float>() checks the dtype
  auto o = torch::empty_like(x);
  relu_launch(x.data_ptr<float>(), o.data_ptr<float>(), x.numel(), caf::stream());
  return o;
}

}  // namespace

CAF_REGISTER(m) {
  m.def("relu", &relu);
}
