#pragma once
// A tokenizer.json built in memory for C++ tests: the 256 byte-level
// characters, a few merges, and the ChatML special tokens.

#include <string>

#include "policy/text/byte_level.hpp"
#include "policy/text/json.hpp"
#include "policy/text/tokenizer.hpp"

namespace caf_agent::policy::testing {

/// tokenizer.json text; `model_type` and `pre_tokenizer` can be overridden to
/// test rejection of unsupported configurations.
inline std::string tiny_tokenizer_json(
    const std::string& model_type = "BPE",
    const std::string& pre_tokenizer = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})") {
  const auto& alphabet = byte_level_alphabet::get();
  json_object vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(alphabet.to_utf8(static_cast<uint8_t>(b)), b);
  json_array merges;
  int next = 256;
  for (auto [a, b] : {std::pair{"h", "e"}, std::pair{"he", "l"}, std::pair{"l", "o"}, std::pair{"Ġ", "w"}}) {
    vocab.emplace_back(std::string(a) + b, next++);
    merges.emplace_back(std::string(a) + " " + b);
  }
  json_array added;
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    added.push_back(json_object{{"id", next}, {"content", special}, {"special", true}});
    vocab.emplace_back(special, next++);
  }
  json_object model{
      {"type", model_type}, {"vocab", json_value(std::move(vocab))}, {"merges", json_value(std::move(merges))}};
  std::string out = R"({"version": "1.0", "normalizer": null, "added_tokens": )" + dump_json(added) +
                    R"(, "pre_tokenizer": )" + pre_tokenizer + R"(, "decoder": {"type": "ByteLevel"}, "model": )" +
                    dump_json(model) + "}";
  return out;
}

/// The tokenizer of tiny_tokenizer_json(); aborts the test binary if broken.
inline tokenizer tiny_tokenizer() {
  auto t = tokenizer::from_json_text(tiny_tokenizer_json());
  if (!t) throw std::runtime_error(t.error().message);
  return *t;
}

}  // namespace caf_agent::policy::testing
