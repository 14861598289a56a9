#pragma once
// Host vectors to the model's device without holding the host.
//
// Rationale: CUDA documents that a copy from pageable host memory to the device first waits for
// the stream's earlier work. A step that has just launched its decode graph and then copied a
// prefill's token ids with torch::tensor(v).to(cuda) held the host until the graph finished,
// and only then launched the prefill. From pinned memory with non_blocking the copy is queued
// behind the graph. PyTorch's pinned-memory allocator keeps the staging block until the copy
// has run, so the source may go at once.

#include <vector>

#include <torch/types.h>

namespace caf_agent::policy {

/// `host` as a 1-d tensor of `dtype` on `device` (on the CPU: a copy of its own).
template <class T>
torch::Tensor to_device(const std::vector<T>& host, torch::ScalarType dtype, torch::Device device) {
  auto view = torch::from_blob(const_cast<T*>(host.data()), {static_cast<int64_t>(host.size())},
                               torch::TensorOptions().dtype(dtype));
  if (!device.is_cuda()) return view.clone();
  return view.pin_memory().to(device, /*non_blocking=*/true);
}

/// The same with the dtype of T (int64_t: kLong, int32_t: kInt, float: kFloat).
template <class T>
torch::Tensor to_device(const std::vector<T>& host, torch::Device device) {
  return to_device(host, c10::CppTypeToScalarType<T>::value, device);
}

}  // namespace caf_agent::policy
