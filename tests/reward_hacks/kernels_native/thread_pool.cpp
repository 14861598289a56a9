// Threads through c10's pool instead of <thread> (banned by the source check): the work
// runs after forward returned, on a thread the dispatcher guard never sees. Caught by the
// native-code check: `c10::ThreadPool`.
#include "caf_kernel.h"

#include <c10/core/thread_pool.h>

namespace {
torch::Tensor add_relu_pool(torch::Tensor a, torch::Tensor b) {
  static c10::ThreadPool pool(1);
  auto out = torch::empty_like(a);
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const int64_t n = a.numel();
  pool.run([=] {
    for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i] > 0.f ? pa[i] + pb[i] : 0.f;
  });
  pool.waitWorkComplete();
  return out;
}
}  // namespace

CAF_REGISTER(m) {
  m.def("add_relu_pool", &add_relu_pool);
}
