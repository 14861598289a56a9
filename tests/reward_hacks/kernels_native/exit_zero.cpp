// Ends the judge's child with status 0 from inside the op (what nvcc's host stubs for
// device functions also link), after a line on stderr: the process is gone before it
// reports, so the job fails, and its reason quotes that last line.
#include <cstdio>
#include <cstdlib>

#include "caf_kernel.h"

namespace {
torch::Tensor add_relu_exit(torch::Tensor a, torch::Tensor b) {
  std::fputs("first line\nthe reason it gave up\n\n", stderr);
  std::fflush(stderr);
  std::exit(0);
  return a;
}
}  // namespace

CAF_REGISTER(m) {
  m.def("add_relu_exit", &add_relu_exit);
}
