#pragma once
// tool_common: what policy_model_tool's commands share (policy_model_tool.cpp holds the command
// line and its usage): flags, raw fp32 files, JSON strings, and each command's entry point, in
// tool_kernels.cpp (the fused kernels alone: sample, linear-rows, decode-attention) and
// tool_engine.cpp (the generation engine: generate, bench, agent-bench).

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "base/named_enum.hpp"
#include "policy/model/decoder.hpp"
#include "policy/model/tool_args.hpp"

namespace caf_agent::policy::tool {

using args = tool_args;

/// The value of flag `key`, or `fallback` when it was not given.
inline std::string get(const args& a, const std::string& key, const std::string& fallback = "") {
  return tool_arg(a, key, fallback);
}

// The value of flag `key` named as E (`fallback` when not given); a name E does not have throws
// std::invalid_argument naming the flag and E's names.
template <class E>
inline E named_arg(const args& a, const std::string& key, E fallback) {
  return caf_agent::base::parse_name_or_throw<E>(get(a, key, std::string(caf_agent::base::name_of(fallback))),
                                                 "--" + key);
}

/// Comma-separated integers ("1,2,3").
std::vector<int64_t> parse_ids(const std::string& text);
/// --dtype as a model_dtype (float32 when not given), and as a torch dtype.
model_dtype model_dtype_of(const args& a);
torch::ScalarType dtype_of(const args& a);
/// `values` as raw little-endian fp32 into `path`: 0, or 1 (said on stderr) when it cannot be written.
int write_floats(const torch::Tensor& values, const std::string& path);
/// Exactly `count` raw fp32 values from `path`; throws naming the file otherwise.
torch::Tensor read_floats(const std::string& path, int64_t count);
/// `s` as a JSON string (quotes and backslashes escaped, control characters dropped).
std::string json_string(const std::string& s);

// The commands; each returns the tool's exit status (0, 1 failure, 2 usage).
int run_sample(const args& a);                                // tool_kernels.cpp
int run_linear_rows(const args& a);                           // tool_kernels.cpp
int run_decode_attention(const args& a);                      // tool_kernels.cpp
int run_boundary_chain(const args& a);                        // tool_kernels.cpp
int run_generate(const std::string& command, const args& a);  // tool_engine.cpp: generate, bench
int run_agent_bench(const args& a);                           // tool_engine.cpp

}  // namespace caf_agent::policy::tool
