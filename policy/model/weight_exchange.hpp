#pragma once
// weight_exchange: new weights handed to an engine in the same process without the disk. The
// learner stages a copy of its tensors under a key (copied in buckets: one allocation and one
// copy per bucket, so a large model is not a thousand small allocations); an engine's
// load_weights("inproc:<key>", version) takes them from here instead of reading a checkpoint.
// Only the latest staged set is kept: a newer one replaces it, and the older key is then an error.
// The staged tensors are never written again (the learner keeps training its own masters), so
// engines that read them share them safely.

#include <cstdint>
#include <string>

#include "policy/model/result.hpp"
#include "policy/model/safetensors.hpp"

namespace caf_agent::policy {

/// The prefix of a load_weights path that names staged in-process weights.
inline constexpr const char* in_process_weights_prefix = "inproc:";

/// Copies `tensors` (detached) into buckets of at most `bucket_bytes` per dtype and device (a
/// larger tensor is a bucket of its own) and stages them under `key`, replacing any earlier set.
void stage_in_process_weights(const std::string& key, const tensor_map& tensors, int64_t bucket_bytes);

/// The tensors staged under `key`; an error when nothing is staged or a newer key replaced it.
result<tensor_map> in_process_weights(const std::string& key);

}  // namespace caf_agent::policy
