#include "policy/text/tokenizer.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "policy/text/tokenizer_state.hpp"
#include "policy/text/unicode.hpp"
#include "policy/text/utf8.hpp"

namespace caf_agent::policy {

namespace {

// The code point that ends text (text non-empty); invalid bytes count as
// non-word, non-space characters.
char32_t last_char(std::string_view text) {
  size_t pos = text.size() - 1;
  for (int back = 0; back < 3 && pos > 0 && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80; ++back) --pos;
  auto c = decode_utf8(text, pos);
  return c.valid && pos + c.len == text.size() ? c.cp : U'\uFFFD';
}

char32_t first_char(std::string_view text) {
  auto c = decode_utf8(text, 0);
  return c.valid ? c.cp : U'\uFFFD';
}

// Byte offset where the trailing run of Unicode White_Space of text begins
// (Rust regex `\s*$`).
size_t trailing_space_begin(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    char32_t cp = last_char(text.substr(0, end));
    if (!is_whitespace(cp)) break;
    std::string tmp;
    append_utf8(tmp, cp);
    end -= tmp.size();
  }
  return end;
}

// Byte length of the leading run of Unicode White_Space of text (`^\s*`).
size_t leading_space_len(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    auto c = decode_utf8(text, pos);
    if (!c.valid || !is_whitespace(c.cp)) break;
    pos += c.len;
  }
  return pos;
}

// A raw leftmost-longest match of one added token: [begin, end) and its index.
struct raw_match {
  size_t begin;
  size_t end;
  size_t index;
};

// Leftmost-longest match among the added tokens of one kind (raw or
// normalized) at or after `from` (what `tokenizers`' Aho-Corasick automaton
// with MatchKind::LeftmostLongest finds).
std::optional<raw_match> leftmost_longest(const tokenizer_state& st, int kind, std::string_view text, size_t from) {
  const auto& table = st.added_by_first_byte[kind];
  for (size_t pos = from; pos < text.size(); ++pos)
    for (size_t idx : table[static_cast<uint8_t>(text[pos])])
      if (text.compare(pos, st.added[idx].content.size(), st.added[idx].content) == 0)
        return raw_match{pos, pos + st.added[idx].content.size(), idx};
  return std::nullopt;
}

// Pre-tokenizes one piece free of added tokens and runs BPE on each pre-token.
void encode_piece(const tokenizer_state& st, std::string_view piece, std::vector<token_id>& out) {
  if (piece.empty()) return;
  std::string prefixed;
  if (st.add_prefix_space && piece.front() != ' ') {
    prefixed = " " + std::string(piece);
    piece = prefixed;
  }
  if (!st.split) {
    st.model->encode_word(piece, out);
    return;
  }
  thread_local std::vector<byte_span> spans;
  spans.clear();
  split_pretokens(piece, *st.split, spans);
  for (auto [b, e] : spans) st.model->encode_word(piece.substr(b, e - b), out);
}

// Splits on added tokens of `kind`; calls on_text for the text between them.
// Mirrors AddedVocabulary::find_matches of `tokenizers`: matches come from
// one left-to-right scan that resumes after each raw match (also after a
// discarded single_word match); single_word rejects a match next to a `\w`
// character; lstrip / rstrip absorb Unicode White_Space, lstrip never
// reaching back into the previous match.
template <class OnText>
void split_added(const tokenizer_state& st, int kind, std::string_view text, std::vector<token_id>& out,
                 OnText&& on_text) {
  size_t start_offset = 0;
  size_t search = 0;
  while (auto m = leftmost_longest(st, kind, text, search)) {
    search = m->end;
    const auto& a = st.added[m->index];
    size_t start = m->begin, stop = m->end;
    if (a.single_word) {
      bool start_space = start == 0 || !is_word_char(last_char(text.substr(0, start)));
      bool stop_space = stop == text.size() || !is_word_char(first_char(text.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (a.lstrip) start = std::max(trailing_space_begin(text.substr(0, start)), start_offset);
    if (a.rstrip) stop += leading_space_len(text.substr(stop));
    if (start_offset < start) on_text(text.substr(start_offset, start - start_offset));
    out.push_back(a.id);
    start_offset = stop;
  }
  if (start_offset < text.size()) on_text(text.substr(start_offset));
}

void encode_normalized(const tokenizer_state& st, std::string_view text, std::vector<token_id>& out) {
  if (text.empty()) return;
  std::string normalized;
  if (st.nfc) {
    normalized = nfc_normalize(text);
    text = normalized;
  }
  split_added(st, 1, text, out, [&](std::string_view piece) { encode_piece(st, piece, out); });
}

}  // namespace

tokenizer::tokenizer(std::shared_ptr<const tokenizer_state> state) : state_(std::move(state)) {}

result<tokenizer> tokenizer::from_json_text(std::string_view json_text) {
  auto root = parse_json(json_text);
  if (!root) return make_error("tokenizer.json: " + root.error().message);
  auto st = load_tokenizer_state(*root);
  if (!st) return st.error();
  return tokenizer(std::move(*st));
}

result<tokenizer> tokenizer::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open tokenizer file '" + path + "'");
  std::ostringstream buf;
  buf << in.rdbuf();
  auto t = from_json_text(buf.str());
  if (!t) return make_error(path + ": " + t.error().message);
  return t;
}

std::vector<token_id> tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const auto& st = *state_;
  std::vector<token_id> ids;
  ids.reserve(text.size() / 3 + 4);
  split_added(st, 0, text, ids, [&](std::string_view piece) { encode_normalized(st, piece, ids); });
  if (!add_special_tokens || st.post_template.empty()) return ids;
  std::vector<token_id> out;
  for (const auto& item : st.post_template) {
    if (item.is_sequence)
      out.insert(out.end(), ids.begin(), ids.end());
    else
      out.insert(out.end(), item.ids.begin(), item.ids.end());
  }
  return out;
}

std::string tokenizer::decode_bytes(std::span<const token_id> ids, bool skip_special_tokens) const {
  const auto& st = *state_;
  std::string out;
  for (token_id id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= st.id_kind.size()) continue;
    uint8_t kind = st.id_kind[id];
    if (kind == 0 || (kind == 2 && skip_special_tokens)) continue;
    out += st.id_bytes[id];
  }
  return out;
}

std::string tokenizer::decode(std::span<const token_id> ids, bool skip_special_tokens) const {
  return utf8_lossy(decode_bytes(ids, skip_special_tokens));
}

std::optional<token_id> tokenizer::token_to_id(std::string_view token) const {
  auto it = state_->added_by_content.find(std::string(token));
  if (it != state_->added_by_content.end()) return state_->added[it->second].id;
  return state_->model->token_to_id(token);
}

std::optional<std::string> tokenizer::id_to_token(token_id id) const {
  auto it = state_->added_by_id.find(id);
  if (it != state_->added_by_id.end()) return state_->added[it->second].content;
  if (const auto* s = state_->model->id_to_token(id)) return *s;
  return std::nullopt;
}

bool tokenizer::is_special(token_id id) const {
  return id >= 0 && static_cast<size_t>(id) < state_->id_kind.size() && state_->id_kind[id] == 2;
}

size_t tokenizer::id_limit() const {
  return state_->id_kind.size();
}

const std::vector<added_token>& tokenizer::added_tokens() const {
  return state_->added;
}

}  // namespace caf_agent::policy
