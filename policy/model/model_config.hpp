#pragma once
// model_config: the subset of a Hugging Face config.json that a Llama / Qwen2 / Qwen3 decoder
// needs, parsed and validated without LibTorch. Unknown model types, activations, rope types
// and sliding-window attention are errors naming the field, never silently ignored.

#include <cstdint>
#include <string>

#include "policy/model/result.hpp"

namespace caf_agent::policy {

/// The architecture family, from config.json's model_type.
enum class model_family { llama, qwen2, qwen3 };

/// RoPE frequency scaling, from rope_scaling (transformers 4) or rope_parameters (5).
struct rope_config {
  /// "default" (none), "linear" or "llama3"; anything else is rejected when parsing.
  std::string type = "default";
  double theta = 10000.0;                           ///< Base of the inverse frequencies (rope_theta).
  double factor = 1.0;                              ///< linear and llama3: how much the context was stretched.
  double low_freq_factor = 1.0;                     ///< llama3 only.
  double high_freq_factor = 4.0;                    ///< llama3 only.
  int64_t original_max_position_embeddings = 8192;  ///< llama3 only.
};

/// Shapes and options of one decoder checkpoint.
struct model_config {
  model_family family = model_family::qwen2;  ///< From model_type.
  int64_t vocab_size = 0;                     ///< Rows of the embedding and the LM head.
  int64_t hidden_size = 0;                    ///< Model width.
  int64_t intermediate_size = 0;              ///< SwiGLU inner width.
  int64_t num_hidden_layers = 0;              ///< Decoder blocks.
  int64_t num_attention_heads = 0;            ///< Query heads.
  int64_t num_key_value_heads = 0;            ///< Key/value heads (grouped-query attention).
  int64_t head_dim = 0;                       ///< From config when present, else hidden_size / heads.
  int64_t max_position_embeddings = 0;        ///< The longest context the model was built for.
  double rms_norm_eps = 1e-6;                 ///< Epsilon of every RMSNorm.
  bool tie_word_embeddings = false;           ///< LM head shares the embedding matrix.
  bool attention_bias = false;                ///< q/k/v projections carry a bias (always true for Qwen2).
  bool attention_output_bias = false;         ///< o_proj carries a bias (Llama attention_bias).
  bool mlp_bias = false;                      ///< Llama mlp_bias.
  bool qk_norm = false;                       ///< Qwen3: RMSNorm over head_dim on q and k before RoPE.
  rope_config rope;                           ///< Position encoding.
  std::string source_json;                    ///< The config.json text it was parsed from (saved back verbatim).

  /// Checks the invariants the decoder relies on (divisibility, positive sizes).
  status validate() const;
};

/// Parses config.json text. `source` names the file in error messages.
result<model_config> parse_model_config(const std::string& json_text, const std::string& source);

/// Reads and parses `<model_dir>/config.json`.
result<model_config> load_model_config(const std::string& model_dir);

/// config.json text for `config`: source_json when present, else a minimal config that
/// transformers and parse_model_config both accept.
std::string model_config_to_json(const model_config& config);

/// The model_type string of a family ("llama", "qwen2", "qwen3").
const char* family_name(model_family family);

}  // namespace caf_agent::policy
