#include "policy/text/bpe_model.hpp"

#include <functional>
#include <mutex>
#include <queue>
#include <tuple>

#include "policy/text/byte_level.hpp"

namespace caf_agent::policy {

// Rationale: words repeat heavily in code; 100k entries bound the memory at a
// few MB, and words past 256 bytes (base64 blobs, long runs) rarely repeat.
constexpr size_t cache_capacity = 100000;
constexpr size_t cache_max_word = 256;

struct bpe_model::word_cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<token_id>> words;
};

bpe_model::bpe_model() : cache_(std::make_unique<word_cache>()) {}
bpe_model::~bpe_model() = default;

namespace {

uint64_t pair_key(token_id a, token_id b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

status check_option(const json_value& model, std::string_view key) {
  const auto* v = model.find(key);
  if (!v || v->is_null() || (v->is_string() && v->as_string().empty())) return {};
  return make_error("model." + std::string(key) + ": unsupported value " + dump_json(*v) +
                    " (only null is supported for byte-level BPE)");
}

}  // namespace

result<std::shared_ptr<bpe_model>> bpe_model::from_json(const json_value& model) {
  const auto* type = model.find("type");
  if (type && !(type->is_string() && type->as_string() == "BPE"))
    return make_error("model.type: unsupported " + dump_json(*type) + " (only BPE)");
  for (auto key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"})
    if (auto st = check_option(model, key); !st) return st.error();
  if (const auto* bf = model.find("byte_fallback"); bf && bf->is_bool() && bf->as_bool())
    return make_error("model.byte_fallback: true is unsupported (byte-level BPE has no need)");
  auto m = std::make_shared<bpe_model>();
  const auto* vocab = model.find("vocab");
  if (!vocab || !vocab->is_object()) return make_error("model.vocab: missing or not an object");
  if (auto st = m->load_vocab(*vocab); !st) return st.error();
  const auto* merges = model.find("merges");
  if (!merges || !merges->is_array()) return make_error("model.merges: missing or not an array");
  if (auto st = m->load_merges(*merges); !st) return st.error();
  if (const auto* unk = model.find("unk_token"); unk && unk->is_string()) {
    auto id = m->token_to_id(unk->as_string());
    if (!id) return make_error("model.unk_token: '" + unk->as_string() + "' is not in the vocabulary");
    m->unk_id_ = id;
  }
  if (const auto* f = model.find("fuse_unk"); f && f->is_bool()) m->fuse_unk_ = f->as_bool();
  if (const auto* f = model.find("ignore_merges"); f && f->is_bool()) m->ignore_merges_ = f->as_bool();
  const auto& alphabet = byte_level_alphabet::get();
  m->byte_ids_.assign(256, -1);
  for (int b = 0; b < 256; ++b)
    if (auto id = m->token_to_id(alphabet.to_utf8(static_cast<uint8_t>(b)))) m->byte_ids_[b] = *id;
  return m;
}

status bpe_model::load_vocab(const json_value& vocab) {
  vocab_.reserve(vocab.as_object().size());
  for (const auto& [token, id] : vocab.as_object()) {
    if (!id.is_integer() || id.as_integer() < 0 || id.as_integer() > INT32_MAX)
      return make_error("model.vocab['" + token + "']: id must be a non-negative integer");
    auto tid = static_cast<token_id>(id.as_integer());
    vocab_.emplace(token, tid);
    if (static_cast<size_t>(tid) >= id_to_token_.size()) {
      id_to_token_.resize(tid + 1);
      has_id_.resize(tid + 1, false);
    }
    id_to_token_[tid] = token;
    has_id_[tid] = true;
  }
  return {};
}

status bpe_model::load_merges(const json_value& merges) {
  const auto& list = merges.as_array();
  merges_.reserve(list.size());
  for (size_t rank = 0; rank < list.size(); ++rank) {
    const auto& item = list[rank];
    std::string where = "model.merges[" + std::to_string(rank) + "]";
    std::string a, b;
    if (item.is_string()) {
      const auto& s = item.as_string();
      auto sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return make_error(where + ": expected \"left right\", got '" + s + "'");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (item.is_array() && item.as_array().size() == 2 && item.as_array()[0].is_string() &&
               item.as_array()[1].is_string()) {
      a = item.as_array()[0].as_string();
      b = item.as_array()[1].as_string();
    } else {
      return make_error(where + ": expected a string or a pair of strings");
    }
    auto ia = token_to_id(a), ib = token_to_id(b), im = token_to_id(a + b);
    if (!ia || !ib) return make_error(where + ": '" + (ia ? b : a) + "' is not in the vocabulary");
    if (!im) return make_error(where + ": '" + a + b + "' is not in the vocabulary");
    merges_.emplace(pair_key(*ia, *ib), std::make_pair(static_cast<int32_t>(rank), *im));
  }
  return {};
}

std::optional<token_id> bpe_model::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* bpe_model::id_to_token(token_id id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

void bpe_model::clear_cache() const {
  std::lock_guard<std::mutex> lock(cache_->mutex);
  cache_->words.clear();
}

void bpe_model::encode_word(std::string_view bytes, std::vector<token_id>& out) const {
  bool cacheable = bytes.size() <= cache_max_word;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    auto it = cache_->words.find(std::string(bytes));
    if (it != cache_->words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = out.size();
  if (ignore_merges_) {
    if (auto id = token_to_id(byte_level_alphabet::get().encode(bytes)))
      out.push_back(*id);
    else
      merge_word(bytes, out);
  } else {
    merge_word(bytes, out);
  }
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (cache_->words.size() < cache_capacity)
      cache_->words.emplace(std::string(bytes), std::vector<token_id>(out.begin() + first, out.end()));
  }
}

// Symbols form a linked list; a min-heap on (rank, position) picks the next
// merge. Stale heap entries (a side already merged away) are skipped.
void bpe_model::merge_word(std::string_view bytes, std::vector<token_id>& out) const {
  struct symbol {
    token_id id;
    int prev;
    int next;
    bool alive;
  };
  std::vector<symbol> sym;
  sym.reserve(bytes.size());
  for (char c : bytes) {
    token_id id = byte_ids_[static_cast<uint8_t>(c)];
    if (id < 0) {
      if (!unk_id_) continue;  // as Hugging Face: unknown characters are dropped
      if (fuse_unk_ && !sym.empty() && sym.back().id == *unk_id_) continue;
      id = *unk_id_;
    }
    int idx = static_cast<int>(sym.size());
    sym.push_back({id, idx - 1, idx + 1, true});
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  using entry = std::tuple<int32_t, int, token_id>;  // rank, position, merged id
  std::priority_queue<entry, std::vector<entry>, std::greater<>> heap;
  auto push_pair = [&](int left) {
    int right = sym[left].next;
    if (right < 0) return;
    auto it = merges_.find(pair_key(sym[left].id, sym[right].id));
    if (it != merges_.end()) heap.emplace(it->second.first, left, it->second.second);
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) push_pair(i);
  while (!heap.empty()) {
    auto [rank, left, merged] = heap.top();
    heap.pop();
    int right = sym[left].next;
    if (!sym[left].alive || right < 0) continue;
    auto it = merges_.find(pair_key(sym[left].id, sym[right].id));
    if (it == merges_.end() || it->second.second != merged) continue;
    sym[left].id = merged;
    sym[right].alive = false;
    sym[left].next = sym[right].next;
    if (sym[right].next >= 0) sym[sym[right].next].prev = left;
    if (sym[left].prev >= 0) push_pair(sym[left].prev);
    push_pair(left);
  }
  for (int i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace caf_agent::policy
