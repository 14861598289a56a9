// policy/model/weight_exchange.cpp: see weight_exchange.hpp.
#include "policy/model/weight_exchange.hpp"

#include <mutex>
#include <vector>

#include <ATen/ATen.h>

namespace caf_agent::policy {
namespace {

struct staged_set {
  std::string key;
  tensor_map tensors;
};

std::mutex& exchange_mutex() {
  static std::mutex m;
  return m;
}

staged_set& exchange() {
  static staged_set s;
  return s;
}

/// Copies one bucket: the tensors end to end in one flat buffer, each name a view of it.
void copy_bucket(const std::vector<std::pair<std::string, at::Tensor>>& bucket, tensor_map& out) {
  if (bucket.empty()) return;
  std::vector<at::Tensor> flat;
  for (const auto& [name, t] : bucket) flat.push_back(t.detach().reshape({-1}));
  auto buffer = at::cat(flat);
  int64_t offset = 0;
  for (const auto& [name, t] : bucket) {
    out[name] = buffer.narrow(0, offset, t.numel()).view(t.sizes());
    offset += t.numel();
  }
}

}  // namespace

void stage_in_process_weights(const std::string& key, const tensor_map& tensors, int64_t bucket_bytes) {
  at::NoGradGuard no_grad;
  tensor_map copy;
  // Buckets hold one dtype on one device (a flat buffer has one of each).
  std::map<std::string, std::vector<std::pair<std::string, at::Tensor>>> open;
  std::map<std::string, int64_t> open_bytes;
  for (const auto& [name, t] : tensors) {
    const std::string kind = std::string(c10::toString(t.scalar_type())) + "@" + t.device().str();
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    if (!open[kind].empty() && open_bytes[kind] + bytes > bucket_bytes) {
      copy_bucket(open[kind], copy);
      open[kind].clear();
      open_bytes[kind] = 0;
    }
    open[kind].emplace_back(name, t);
    open_bytes[kind] += bytes;
  }
  for (const auto& [kind, bucket] : open) copy_bucket(bucket, copy);
  std::lock_guard lock(exchange_mutex());
  exchange() = {key, std::move(copy)};
}

result<tensor_map> in_process_weights(const std::string& key) {
  std::lock_guard lock(exchange_mutex());
  if (exchange().key.empty()) return fail("no weights are staged in this process (key '" + key + "')");
  if (exchange().key != key)
    return fail("in-process weights '" + key + "' were replaced by newer ones ('" + exchange().key + "')");
  return exchange().tensors;
}

}  // namespace caf_agent::policy
