// Spins forever in a static initialiser: the library never finishes loading. The load has
// its own deadline (options load_timeout_s), so this holds a slot for seconds, not for the
// build's 300.
#include "caf_kernel.h"

namespace {
volatile int forever = 1;
int spin() {
  while (forever) {
  }
  return 0;
}
const int spun = spin();
torch::Tensor nothing(torch::Tensor a) {
  return torch::empty_like(a);
}
}  // namespace

CAF_REGISTER(m) {
  m.def("nothing", &nothing);
}
