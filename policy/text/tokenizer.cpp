#include "policy/text/tokenizer.hpp"

#include <fstream>
#include <sstream>

#include "policy/text/tokenizer_state.hpp"
#include "policy/text/unicode.hpp"
#include "policy/text/utf8.hpp"

namespace caf_agent::policy {

namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool is_word_byte(std::string_view text, size_t pos) {
  auto c = static_cast<unsigned char>(text[pos]);
  return c >= 0x80 || c == '_' || is_letter(c) || is_number(c);
}

// An added-token match: the token and the byte range it consumes (including
// whitespace absorbed by lstrip / rstrip).
struct added_match {
  size_t begin;
  size_t end;
  token_id id;
};

// Leftmost-longest match of the added tokens of one kind (raw or normalized)
// at or after `from`; lstrip never reaches back before `floor`.
std::optional<added_match> find_added(const tokenizer_state& st, int kind, std::string_view text,
                                      size_t from, size_t floor) {
  const auto& table = st.added_by_first_byte[kind];
  for (size_t pos = from; pos < text.size(); ++pos) {
    for (size_t idx : table[static_cast<uint8_t>(text[pos])]) {
      const auto& a = st.added[idx];
      if (text.compare(pos, a.content.size(), a.content) != 0) continue;
      size_t end = pos + a.content.size();
      if (a.single_word && ((pos > 0 && is_word_byte(text, pos - 1)) ||
                            (end < text.size() && is_word_byte(text, end))))
        continue;
      size_t begin = pos;
      if (a.lstrip)
        while (begin > floor && is_ascii_space(text[begin - 1])) --begin;
      if (a.rstrip)
        while (end < text.size() && is_ascii_space(text[end])) ++end;
      return added_match{begin, end, a.id};
    }
  }
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
template <class OnText>
void split_added(const tokenizer_state& st, int kind, std::string_view text,
                 std::vector<token_id>& out, OnText&& on_text) {
  size_t pos = 0;
  while (pos < text.size()) {
    auto m = find_added(st, kind, text, pos, pos);
    if (!m) break;
    on_text(text.substr(pos, m->begin - pos));
    out.push_back(m->id);
    pos = m->end;
  }
  on_text(text.substr(pos));
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

} // namespace

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

} // namespace caf_agent::policy
