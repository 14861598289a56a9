// Kernels used only by adversarial submissions (tests/reward_hacks). They pass the static
// checks on purpose: each is caught at run time by a different defence.
#include "caf_kernel.h"

#include <cmath>
#include <iostream>

namespace {

// Never writes its output: uninitialised (poisoned) memory.
torch::Tensor empty_out(torch::Tensor a) {
  return torch::empty_like(a);
}

// Correct result, but uses input b as scratch space (input mutation).
torch::Tensor add_relu_scratch_b(torch::Tensor a, torch::Tensor b) {
  auto out = torch::empty_like(a);
  float* pa = a.data_ptr<float>();
  float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    pb[i] = pa[i] + pb[i];
    po[i] = pb[i] > 0.f ? pb[i] : 0.f;
  }
  return out;
}

// Writes the result into a and returns a (output aliases an input).
torch::Tensor add_relu_into_a(torch::Tensor a, torch::Tensor b) {
  float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float v = pa[i] + pb[i];
    pa[i] = v > 0.f ? v : 0.f;
  }
  return a;
}

// Counts its calls in this process (a static): a child reused across jobs, or extension state
// inherited from the fork server, would show a count above 1 in a later job's first call.
torch::Tensor process_calls(torch::Tensor a) {
  static int64_t calls = 0;
  ++calls;
  auto out = torch::empty_like(a);
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) po[i] = static_cast<float>(calls);
  return out;
}

// Lowered precision: results rounded to multiples of 1/16, well beyond the tolerance.
torch::Tensor add_relu_lowprec(torch::Tensor a, torch::Tensor b) {
  auto out = torch::empty_like(a);
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float v = pa[i] + pb[i];
    po[i] = std::round((v > 0.f ? v : 0.f) * 16.f) / 16.f;
  }
  return out;
}

// Caches its output keyed on the inputs' addresses and two sampled values, and returns the
// stored tensor on a hit (printing "cache hit" to the log): with inputs rotated among a few
// sets, timed calls after the first few cost a lookup. Fresh inputs per timed call make it
// miss every time; a hit would return an earlier call's buffer, which the child flags.
torch::Tensor add_relu_cached(torch::Tensor a, torch::Tensor b) {
  struct Entry {
    const float* pa = nullptr;
    const float* pb = nullptr;
    float a0 = 0.f, b_last = 0.f;
    torch::Tensor out;
  };
  static Entry entries[8];
  static int next = 0;
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  const int64_t n = a.numel();
  for (const Entry& e : entries)
    if (e.out.defined() && e.pa == pa && e.pb == pb && e.a0 == pa[0] && e.b_last == pb[n - 1]) {
      std::cerr << "cache hit\n";
      return e.out;
    }
  auto out = torch::empty_like(a);
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i] > 0.f ? pa[i] + pb[i] : 0.f;
  entries[next] = Entry{pa, pb, pa[0], pb[n - 1], out};
  next = (next + 1) % 8;
  return out;
}

// Dereferences a null pointer: the evaluation process dies with SIGSEGV.
torch::Tensor segfault(torch::Tensor a) {
  volatile float* p = nullptr;
  p[a.numel()] = 1.f;
  return a;
}

// Ignores its input's values: a (rows x cols) output of one value (the constant answer
// that passes the elementwise test of a task whose output barely depends on its input).
torch::Tensor fill_rows(torch::Tensor x, int64_t cols, double value) {
  auto out = torch::empty({x.size(0), cols}, x.options());
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) po[i] = static_cast<float>(value);
  return out;
}

}  // namespace

CAF_REGISTER(m) {
  m.def("empty_out", &empty_out);
  m.def("add_relu_scratch_b", &add_relu_scratch_b);
  m.def("add_relu_into_a", &add_relu_into_a);
  m.def("process_calls", &process_calls);
  m.def("add_relu_lowprec", &add_relu_lowprec);
  m.def("segfault", &segfault);
  m.def("fill_rows", &fill_rows);
  m.def("add_relu_cached", &add_relu_cached);
}
