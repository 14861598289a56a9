// The operating system reached without the names the source check looks for: function
// pointers (`&std::system`, `&pthread_create`, `&std::fopen`) and prototypes declared by
// hand with token pasting (fork, execve, socket, dlopen). None is called here: referencing
// them is enough for the linker to record them, and for the native-code check to refuse
// each one by name. The op itself is honest add+relu.
#include "caf_kernel.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>

#define CAF_PASTE(a, b) a##b
extern "C" int CAF_PASTE(fo, rk)(void);
extern "C" int CAF_PASTE(exe, cve)(const char*, char* const*, char* const*);
extern "C" int CAF_PASTE(sock, et)(int, int, int);
extern "C" void* CAF_PASTE(dl, open)(const char*, int);

namespace {
void* volatile reach[] = {
    reinterpret_cast<void*>(&std::system),         reinterpret_cast<void*>(&pthread_create),
    reinterpret_cast<void*>(&std::fopen),          reinterpret_cast<void*>(&CAF_PASTE(fo, rk)),
    reinterpret_cast<void*>(&CAF_PASTE(exe, cve)), reinterpret_cast<void*>(&CAF_PASTE(sock, et)),
    reinterpret_cast<void*>(&CAF_PASTE(dl, open)),
};

torch::Tensor add_relu_os(torch::Tensor a, torch::Tensor b) {
  auto out = torch::empty_like(a);
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] + pb[i] > 0.f ? pa[i] + pb[i] : 0.f;
  return out;
}
}  // namespace

CAF_REGISTER(m) {
  m.def("add_relu_os", &add_relu_os);
}
