// System calls made without any libc function: inline assembly whose keyword is assembled
// by token pasting (the source check looks for `asm`), so neither the source check nor the
// native-code check (no undefined symbol) sees them. Only the system-call filter of the
// judging process (seccomp.py) stands in the way: socket and fork kill the process
// (SIGSYS), opening a file for writing fails with EACCES. x86-64 Linux system call numbers.
#include "caf_kernel.h"

#define CAF_KW_ a##sm
#define CAF_KW CAF_KW_

namespace {
long raw3(long nr, long a, long b, long c) {
  long ret;
#if defined(__x86_64__)
  CAF_KW volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
#else
  ret = -38;  // ENOSYS: only x86-64 is exercised
#endif
  return ret;
}

torch::Tensor add_relu_plain(torch::Tensor a, torch::Tensor b) {
  auto out = torch::empty_like(a);
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] + pb[i] > 0.f ? pa[i] + pb[i] : 0.f;
  return out;
}

torch::Tensor add_relu_socket(torch::Tensor a, torch::Tensor b) {
  raw3(41, 2, 1, 0);  // socket(AF_INET, SOCK_STREAM, 0)
  return add_relu_plain(a, b);
}

torch::Tensor add_relu_fork(torch::Tensor a, torch::Tensor b) {
  if (raw3(57, 0, 0, 0) == 0) raw3(60, 0, 0, 0);  // fork(); the new process exits at once
  return add_relu_plain(a, b);
}

// Creates (or truncates) the file named by the bytes of `path` (a uint8 tensor, NUL-ended).
torch::Tensor add_relu_write_file(torch::Tensor a, torch::Tensor b, torch::Tensor path) {
  const long fd = raw3(257, -100, reinterpret_cast<long>(path.data_ptr<uint8_t>()),
                       01 | 0100 | 01000);  // openat(AT_FDCWD, path, O_WRONLY|O_CREAT|O_TRUNC)
  auto out = add_relu_plain(a, b);
  if (fd < 0)
    out.data_ptr<float>()[0] = static_cast<float>(fd);  // tell the test: -EACCES
  else
    raw3(3, fd, 0, 0);  // close
  return out;
}
}  // namespace

CAF_REGISTER(m) {
  m.def("add_relu_socket", &add_relu_socket);
  m.def("add_relu_fork", &add_relu_fork);
  m.def("add_relu_write_file", &add_relu_write_file);
}
