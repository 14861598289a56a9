#pragma once
// Reading and writing the safetensors format (Hugging Face): an 8-byte little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__":
// {...}}, then the raw little-endian tensor bytes. Supported dtypes: F32, BF16, F16 (the ones
// decoder checkpoints use). Sharded checkpoints add model.safetensors.index.json with a
// weight_map {name: shard file}.

#include <cstdint>
#include <map>
#include <string>

#include <torch/types.h>

#include "policy/model/result.hpp"

namespace caf_agent::policy {

/// Tensors by name, ordered so that files are written deterministically.
using tensor_map = std::map<std::string, torch::Tensor>;

/// Reads every tensor of one .safetensors file into CPU memory (dtype as stored).
result<tensor_map> read_safetensors(const std::string& path);

/// Writes `tensors` (any device, F32/BF16/F16) to one .safetensors file, names sorted,
/// metadata {"format": "pt"}. Bytes are written as stored: a round trip is bit-exact.
status write_safetensors(const std::string& path, const tensor_map& tensors);

/// Reads a checkpoint directory: model.safetensors, or the shards that
/// model.safetensors.index.json lists (every shard's tensors, checked against the weight_map).
result<tensor_map> read_checkpoint_tensors(const std::string& model_dir);

/// Writes `tensors` into `model_dir` as model.safetensors, or, when their total size exceeds
/// `max_shard_bytes` (> 0), as model-0000i-of-0000n.safetensors plus the index file.
status write_checkpoint_tensors(const std::string& model_dir, const tensor_map& tensors, int64_t max_shard_bytes = 0);

}  // namespace caf_agent::policy
