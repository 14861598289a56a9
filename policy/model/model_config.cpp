#include "policy/model/model_config.hpp"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "policy/text/json.hpp"

namespace caf_agent::policy {
namespace {

// Reads typed members of one JSON object; the first problem is kept and reported with its key.
class field_reader {
 public:
  field_reader(const json_value& object, std::string where) : object_(object), where_(std::move(where)) {}

  const json_value* get(const char* key) {
    const json_value* v = object_.find(key);
    return (v == nullptr || v->is_null()) ? nullptr : v;
  }
  int64_t integer(const char* key, std::optional<int64_t> fallback = std::nullopt) {
    const json_value* v = get(key);
    if (v == nullptr) return missing(key, fallback, int64_t{0});
    if (!v->is_integer()) return wrong(key, "an integer", int64_t{0});
    return v->as_integer();
  }
  double real(const char* key, std::optional<double> fallback = std::nullopt) {
    const json_value* v = get(key);
    if (v == nullptr) return missing(key, fallback, 0.0);
    if (!v->is_number()) return wrong(key, "a number", 0.0);
    return v->as_double();
  }
  bool boolean(const char* key, bool fallback) {
    const json_value* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_bool()) return wrong(key, "true or false", false);
    return v->as_bool();
  }
  std::string text(const char* key, std::optional<std::string> fallback = std::nullopt) {
    const json_value* v = get(key);
    if (v == nullptr) return missing(key, fallback, std::string());
    if (!v->is_string()) return wrong(key, "a string", std::string());
    return v->as_string();
  }
  void reject(const std::string& message) {
    if (error_.empty()) error_ = where_ + ": " + message;
  }
  const std::string& error() const { return error_; }

 private:
  template <class T>
  T missing(const char* key, const std::optional<T>& fallback, T zero) {
    if (fallback) return *fallback;
    reject(std::string("required field '") + key + "' is missing");
    return zero;
  }
  template <class T>
  T wrong(const char* key, const char* expected, T zero) {
    reject(std::string("field '") + key + "' must be " + expected);
    return zero;
  }

  const json_value& object_;
  std::string where_;
  std::string error_;
};

void parse_rope(field_reader& top, const json_value& root, rope_config& rope) {
  // transformers 5 writes rope_parameters {rope_type, rope_theta, ...}; 4 writes rope_theta
  // plus rope_scaling {type | rope_type, factor, ...} (or null).
  const json_value* params = root.find("rope_parameters");
  const bool v5 = params != nullptr && params->is_object();
  if (!v5) params = root.find("rope_scaling");
  rope.theta = top.real("rope_theta", 10000.0);
  if (params == nullptr || params->is_null()) return;
  if (!params->is_object())
    return top.reject(v5 ? "rope_parameters must be an object" : "rope_scaling must be an object or null");
  field_reader r(*params, v5 ? "rope_parameters" : "rope_scaling");
  if (v5) rope.theta = r.real("rope_theta", rope.theta);
  rope.type = r.text("rope_type", r.text("type", "default"));
  if (rope.type == "linear") {
    rope.factor = r.real("factor");
  } else if (rope.type == "llama3") {
    rope.factor = r.real("factor");
    rope.low_freq_factor = r.real("low_freq_factor");
    rope.high_freq_factor = r.real("high_freq_factor");
    rope.original_max_position_embeddings = r.integer("original_max_position_embeddings");
  } else if (rope.type != "default") {
    r.reject("rope type '" + rope.type + "' is not supported (default, linear, llama3)");
  }
  if (!r.error().empty()) top.reject(r.error());
}

void reject_unsupported_attention(field_reader& r, const json_value& root) {
  if (r.boolean("use_sliding_window", false)) r.reject("use_sliding_window=true is not supported");
  if (const json_value* types = root.find("layer_types"); types != nullptr && types->is_array()) {
    for (const auto& t : types->as_array())
      if (!t.is_string() || t.as_string() != "full_attention")
        return r.reject("layer_types: only 'full_attention' layers are supported");
  }
  if (r.get("attn_logit_softcapping") || r.get("final_logit_softcapping"))
    r.reject("logit soft-capping is not supported");
  if (r.real("partial_rotary_factor", 1.0) != 1.0) r.reject("partial_rotary_factor != 1 is not supported");
}

}  // namespace

const char* family_name(model_family family) {
  switch (family) {
    case model_family::llama:
      return "llama";
    case model_family::qwen2:
      return "qwen2";
    case model_family::qwen3:
      return "qwen3";
  }
  return "unknown";
}

result<model_config> parse_model_config(const std::string& json_text, const std::string& source) {
  auto parsed = parse_json(json_text);
  if (!parsed) return fail(source + ": " + parsed.error().message);
  const json_value& root = parsed.value();
  if (!root.is_object()) return fail(source + ": top level must be an object");
  field_reader r(root, source);
  model_config c;
  const std::string type = r.text("model_type");
  if (type == "llama")
    c.family = model_family::llama;
  else if (type == "qwen2")
    c.family = model_family::qwen2;
  else if (type == "qwen3")
    c.family = model_family::qwen3;
  else if (r.error().empty())
    r.reject("model_type '" + type + "' is not supported (llama, qwen2, qwen3)");
  const std::string act = r.text("hidden_act", "silu");
  if (act != "silu") r.reject("hidden_act '" + act + "' is not supported (silu)");
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer("hidden_size");
  c.intermediate_size = r.integer("intermediate_size");
  c.num_hidden_layers = r.integer("num_hidden_layers");
  c.num_attention_heads = r.integer("num_attention_heads");
  c.num_key_value_heads = r.integer("num_key_value_heads", c.num_attention_heads);
  c.head_dim = r.integer("head_dim", c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);
  c.max_position_embeddings = r.integer("max_position_embeddings");
  c.rms_norm_eps = r.real("rms_norm_eps", 1e-6);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  const bool bias = r.boolean("attention_bias", false);
  c.attention_bias = c.family == model_family::qwen2 ? true : bias;
  c.attention_output_bias = c.family == model_family::qwen2 ? false : bias;
  c.mlp_bias = c.family == model_family::llama && r.boolean("mlp_bias", false);
  c.qk_norm = c.family == model_family::qwen3;
  reject_unsupported_attention(r, root);
  parse_rope(r, root, c.rope);
  if (!r.error().empty()) return fail(r.error());
  c.source_json = json_text;
  if (auto valid = c.validate(); !valid) return fail(source + ": " + valid.error().message);
  return c;
}

status model_config::validate() const {
  if (vocab_size <= 0 || hidden_size <= 0 || intermediate_size <= 0 || num_hidden_layers <= 0 ||
      num_attention_heads <= 0 || num_key_value_heads <= 0 || head_dim <= 0 || max_position_embeddings <= 0)
    return fail("sizes (vocab, hidden, intermediate, layers, heads, head_dim, max positions) must be positive");
  if (num_attention_heads % num_key_value_heads != 0)
    return fail("num_attention_heads must be a multiple of num_key_value_heads");
  if (head_dim % 2 != 0) return fail("head_dim must be even for RoPE");
  if (rope.type != "default" && rope.type != "linear" && rope.type != "llama3")
    return fail("rope type '" + rope.type + "' is not supported");
  if (rope.type != "default" && rope.factor <= 0) return fail("rope factor must be positive");
  if (rope.type == "llama3" && rope.high_freq_factor <= rope.low_freq_factor)
    return fail("llama3 rope needs high_freq_factor > low_freq_factor");
  return {};
}

result<model_config> load_model_config(const std::string& model_dir) {
  const auto path = std::filesystem::path(model_dir) / "config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot open " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return parse_model_config(text.str(), path.string());
}

std::string model_config_to_json(const model_config& c) {
  if (!c.source_json.empty()) return c.source_json;
  json_object rope{{"rope_type", c.rope.type}, {"rope_theta", c.rope.theta}};
  if (c.rope.type != "default") rope.emplace_back("factor", c.rope.factor);
  if (c.rope.type == "llama3") {
    rope.emplace_back("low_freq_factor", c.rope.low_freq_factor);
    rope.emplace_back("high_freq_factor", c.rope.high_freq_factor);
    rope.emplace_back("original_max_position_embeddings", c.rope.original_max_position_embeddings);
  }
  json_object o{{"model_type", family_name(c.family)},
                {"hidden_act", "silu"},
                {"vocab_size", c.vocab_size},
                {"hidden_size", c.hidden_size},
                {"intermediate_size", c.intermediate_size},
                {"num_hidden_layers", c.num_hidden_layers},
                {"num_attention_heads", c.num_attention_heads},
                {"num_key_value_heads", c.num_key_value_heads},
                {"head_dim", c.head_dim},
                {"max_position_embeddings", c.max_position_embeddings},
                {"rms_norm_eps", c.rms_norm_eps},
                {"tie_word_embeddings", c.tie_word_embeddings},
                {"rope_theta", c.rope.theta},
                {"rope_parameters", json_value(std::move(rope))}};
  if (c.family == model_family::llama) {
    o.emplace_back("attention_bias", c.attention_bias);
    o.emplace_back("mlp_bias", c.mlp_bias);
  } else if (c.family == model_family::qwen3) {
    o.emplace_back("attention_bias", c.attention_bias);
  }
  return dump_json(json_value(std::move(o)));
}

}  // namespace caf_agent::policy
