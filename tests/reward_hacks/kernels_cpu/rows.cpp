// Honest CPU kernels over rows: softmax, layernorm, row sum.
#include "caf_kernel.h"

#include <algorithm>
#include <cmath>

namespace {

void softmax_row(const float* x, float* y, int64_t n) {
  float mx = x[0];
  for (int64_t j = 1; j < n; ++j) mx = std::max(mx, x[j]);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    y[j] = std::exp(x[j] - mx);
    sum += y[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

torch::Tensor softmax(torch::Tensor x) {
  CAF_CHECK(x.dim() == 2 && x.is_contiguous(), "2-D contiguous input");
  auto out = torch::empty_like(x);
  const int64_t rows = x.size(0), n = x.size(1);
  for (int64_t r = 0; r < rows; ++r) softmax_row(x.data_ptr<float>() + r * n, out.data_ptr<float>() + r * n, n);
  return out;
}

torch::Tensor softmax_omp(torch::Tensor x) {
  CAF_CHECK(x.dim() == 2 && x.is_contiguous(), "2-D contiguous input");
  auto out = torch::empty_like(x);
  const int64_t rows = x.size(0), n = x.size(1);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) softmax_row(px + r * n, po + r * n, n);
  return out;
}

torch::Tensor layernorm(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
  CAF_CHECK(x.dim() == 2 && x.is_contiguous(), "2-D contiguous input");
  auto out = torch::empty_like(x);
  const int64_t rows = x.size(0), n = x.size(1);
  const float* px = x.data_ptr<float>();
  const float* pw = w.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * n;
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < n; ++j) mean += xr[j];
    mean /= n;
    for (int64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    const float inv = static_cast<float>(1.0 / std::sqrt(var / n + eps));
    for (int64_t j = 0; j < n; ++j) po[r * n + j] = static_cast<float>(xr[j] - mean) * inv * pw[j] + pb[j];
  }
  return out;
}

torch::Tensor row_sum(torch::Tensor x) {
  CAF_CHECK(x.dim() == 2 && x.is_contiguous(), "2-D contiguous input");
  auto out = torch::empty({x.size(0), 1}, x.options());
  const int64_t rows = x.size(0), n = x.size(1);
  const float* px = x.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
      for (int k = 0; k < 8; ++k) acc[k] += px[r * n + j + k];
    float s = 0.f;
    for (; j < n; ++j) s += px[r * n + j];
    for (int k = 0; k < 8; ++k) s += acc[k];
    po[r] = s;
  }
  return out;
}

}  // namespace

CAF_REGISTER(m) {
  m.def("softmax", &softmax);
  m.def("softmax_omp", &softmax_omp);
  m.def("layernorm", &layernorm);
  m.def("row_sum", &row_sum);
}
