#pragma once
// The BPE model of a byte-level tokenizer: vocabulary, ranked merges, and the
// merge loop (lowest rank first, leftmost on ties, as Hugging Face's
// tokenizers does), with a per-word cache.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "policy/text/json.hpp"
#include "policy/text/result.hpp"

namespace caf_agent::policy {

/// A token id.
using token_id = int32_t;

/// Vocabulary plus merges; encodes one pre-token's bytes at a time.
/// Thread-safe: the word cache is guarded by a mutex.
class bpe_model {
 public:
  /// Builds the model from tokenizer.json's "model" object. Errors name the
  /// field, e.g. "model.merges[12]: 'ab' is not in the vocabulary".
  static result<std::shared_ptr<bpe_model>> from_json(const json_value& model);

  /// Appends the ids of one pre-token, given as raw bytes.
  void encode_word(std::string_view bytes, std::vector<token_id>& out) const;

  /// The id of a vocabulary string (byte-level alphabet form).
  std::optional<token_id> token_to_id(std::string_view token) const;
  /// The vocabulary string of an id, or nullptr.
  const std::string* id_to_token(token_id id) const;
  /// One past the largest id in the vocabulary.
  size_t id_limit() const { return id_to_token_.size(); }

  /// Drops the word cache (for benchmarks of the uncached path).
  void clear_cache() const;

  /// Use from_json.
  bpe_model();
  /// Defined out of line (the cache type is private).
  ~bpe_model();

 private:
  status load_vocab(const json_value& vocab);
  status load_merges(const json_value& merges);
  void merge_word(std::string_view bytes, std::vector<token_id>& out) const;

  std::unordered_map<std::string, token_id> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, token_id>> merges_;
  std::vector<token_id> byte_ids_;  // id of each byte's alphabet char, -1 if absent
  std::optional<token_id> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  struct word_cache;
  std::unique_ptr<word_cache> cache_;
};

}  // namespace caf_agent::policy
