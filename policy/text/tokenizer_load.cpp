// Reads tokenizer.json into a tokenizer_state, rejecting what is unsupported
// with an error that names the field.
#include <algorithm>

#include "policy/text/byte_level.hpp"
#include "policy/text/tokenizer_state.hpp"

namespace caf_agent::policy {

namespace {

std::string type_of(const json_value& v) {
  const auto* t = v.find("type");
  return t && t->is_string() ? t->as_string() : std::string();
}

text_error unsupported(const std::string& field, const json_value& v) {
  return make_error("tokenizer.json: " + field + ": unsupported type '" + type_of(v) + "'");
}

status load_normalizer(const json_value* n, tokenizer_state& st) {
  if (!n || n->is_null()) return {};
  auto type = type_of(*n);
  if (type == "NFC") {
    st.nfc = true;
    return {};
  }
  if (type == "Sequence") {
    const auto* list = n->find("normalizers");
    if (!list || !list->is_array()) return make_error("tokenizer.json: normalizer.normalizers: missing");
    for (size_t i = 0; i < list->as_array().size(); ++i) {
      const auto& item = list->as_array()[i];
      if (type_of(item) != "NFC") return unsupported("normalizer.normalizers[" + std::to_string(i) + "].type", item);
      st.nfc = true;
    }
    return {};
  }
  return unsupported("normalizer.type", *n);
}

bool flag(const json_value& v, std::string_view key, bool fallback) {
  const auto* f = v.find(key);
  return f && f->is_bool() ? f->as_bool() : fallback;
}

status load_split(const json_value& s, const std::string& field, tokenizer_state& st) {
  const auto* pattern = s.find("pattern");
  const auto* regex = pattern ? pattern->find("Regex") : nullptr;
  if (!regex || !regex->is_string())
    return make_error("tokenizer.json: " + field + ".pattern: only {\"Regex\": ...} is supported");
  const auto* behavior = s.find("behavior");
  if (!behavior || !behavior->is_string() || behavior->as_string() != "Isolated")
    return make_error("tokenizer.json: " + field + ".behavior: only \"Isolated\" is supported");
  if (flag(s, "invert", false)) return make_error("tokenizer.json: " + field + ".invert: only false is supported");
  auto p = recognize_split_regex(regex->as_string());
  if (!p) return make_error("tokenizer.json: " + field + ".pattern.Regex: " + p.error().message);
  st.split = *p;
  return {};
}

status load_pre_tokenizer(const json_value* p, tokenizer_state& st) {
  if (!p || p->is_null())
    return make_error("tokenizer.json: pre_tokenizer: missing (a ByteLevel pre-tokenizer is required)");
  std::vector<std::pair<std::string, const json_value*>> steps;
  if (type_of(*p) == "Sequence") {
    const auto* list = p->find("pretokenizers");
    if (!list || !list->is_array()) return make_error("tokenizer.json: pre_tokenizer.pretokenizers: missing");
    for (size_t i = 0; i < list->as_array().size(); ++i)
      steps.emplace_back("pre_tokenizer.pretokenizers[" + std::to_string(i) + "]", &list->as_array()[i]);
  } else {
    steps.emplace_back("pre_tokenizer", p);
  }
  bool saw_byte_level = false;
  for (const auto& [field, step] : steps) {
    auto type = type_of(*step);
    if (saw_byte_level)
      return make_error("tokenizer.json: " + field + ": nothing may follow the ByteLevel pre-tokenizer");
    if (type == "Split") {
      if (st.split) return make_error("tokenizer.json: " + field + ": only one Split is supported");
      if (auto s = load_split(*step, field, st); !s) return s;
    } else if (type == "ByteLevel") {
      saw_byte_level = true;
      st.add_prefix_space = flag(*step, "add_prefix_space", false);
      if (flag(*step, "use_regex", true)) {
        if (st.split) return make_error("tokenizer.json: " + field + ".use_regex: must be false after a Split");
        st.split = gpt2_split_pattern();
      }
    } else {
      return unsupported(field + ".type", *step);
    }
  }
  if (!saw_byte_level) return make_error("tokenizer.json: pre_tokenizer: a ByteLevel step is required");
  return {};
}

status load_decoder(const json_value* d) {
  if (!d || d->is_null()) return make_error("tokenizer.json: decoder: missing (ByteLevel is required)");
  if (type_of(*d) != "ByteLevel") return unsupported("decoder.type", *d);
  return {};
}

status load_template(const json_value& t, const std::string& field, tokenizer_state& st) {
  const auto* single = t.find("single");
  const auto* specials = t.find("special_tokens");
  if (!single || !single->is_array()) return make_error("tokenizer.json: " + field + ".single: missing");
  for (const auto& item : single->as_array()) {
    if (item.find("Sequence")) {
      st.post_template.push_back({true, {}});
      continue;
    }
    const auto* sp = item.find("SpecialToken");
    const auto* name = sp ? sp->find("id") : nullptr;
    const auto* entry = name && name->is_string() && specials ? specials->find(name->as_string()) : nullptr;
    const auto* ids = entry ? entry->find("ids") : nullptr;
    if (!ids || !ids->is_array())
      return make_error("tokenizer.json: " + field + ".single: a SpecialToken without ids in special_tokens");
    template_item ti;
    for (const auto& id : ids->as_array())
      if (id.is_integer()) ti.ids.push_back(static_cast<token_id>(id.as_integer()));
    st.post_template.push_back(std::move(ti));
  }
  return {};
}

status load_post_processor(const json_value* p, tokenizer_state& st) {
  if (!p || p->is_null()) return {};
  std::vector<std::pair<std::string, const json_value*>> steps;
  if (type_of(*p) == "Sequence") {
    const auto* list = p->find("processors");
    if (!list || !list->is_array()) return make_error("tokenizer.json: post_processor.processors: missing");
    for (size_t i = 0; i < list->as_array().size(); ++i)
      steps.emplace_back("post_processor.processors[" + std::to_string(i) + "]", &list->as_array()[i]);
  } else {
    steps.emplace_back("post_processor", p);
  }
  for (const auto& [field, step] : steps) {
    auto type = type_of(*step);
    if (type == "ByteLevel") continue;  // only adjusts offsets
    if (type != "TemplateProcessing") return unsupported(field + ".type", *step);
    if (auto s = load_template(*step, field, st); !s) return s;
  }
  return {};
}

status load_added_tokens(const json_value* list, tokenizer_state& st) {
  if (!list || list->is_null()) return {};
  if (!list->is_array()) return make_error("tokenizer.json: added_tokens: not an array");
  for (size_t i = 0; i < list->as_array().size(); ++i) {
    const auto& t = list->as_array()[i];
    const auto* id = t.find("id");
    const auto* content = t.find("content");
    if (!id || !id->is_integer() || !content || !content->is_string() || content->as_string().empty())
      return make_error("tokenizer.json: added_tokens[" + std::to_string(i) +
                        "]: needs an integer id and non-empty content");
    added_token a{static_cast<token_id>(id->as_integer()),
                  content->as_string(),
                  flag(t, "single_word", false),
                  flag(t, "lstrip", false),
                  flag(t, "rstrip", false),
                  flag(t, "normalized", false),
                  flag(t, "special", false)};
    st.added_by_content[a.content] = st.added.size();
    st.added_by_id[a.id] = st.added.size();
    st.added.push_back(std::move(a));
  }
  for (size_t i = 0; i < st.added.size(); ++i) {
    const auto& a = st.added[i];
    st.added_by_first_byte[a.normalized ? 1 : 0][static_cast<uint8_t>(a.content[0])].push_back(i);
  }
  for (auto& table : st.added_by_first_byte)
    for (auto& bucket : table)
      std::stable_sort(bucket.begin(), bucket.end(),
                       [&](size_t x, size_t y) { return st.added[x].content.size() > st.added[y].content.size(); });
  return {};
}

void build_id_tables(tokenizer_state& st) {
  size_t limit = st.model->id_limit();
  for (const auto& a : st.added) limit = std::max(limit, static_cast<size_t>(a.id) + 1);
  st.id_bytes.assign(limit, {});
  st.id_kind.assign(limit, 0);
  const auto& alphabet = byte_level_alphabet::get();
  for (size_t id = 0; id < st.model->id_limit(); ++id) {
    if (const auto* tok = st.model->id_to_token(static_cast<token_id>(id))) {
      st.id_bytes[id] = alphabet.decode(*tok);
      st.id_kind[id] = 1;
    }
  }
  for (const auto& a : st.added) {
    st.id_bytes[a.id] = alphabet.decode(a.content);
    st.id_kind[a.id] = a.special ? 2 : 1;
  }
}

}  // namespace

result<std::shared_ptr<tokenizer_state>> load_tokenizer_state(const json_value& root) {
  if (!root.is_object()) return make_error("tokenizer.json: the top level is not an object");
  auto st = std::make_shared<tokenizer_state>();
  const auto* model = root.find("model");
  if (!model || !model->is_object()) return make_error("tokenizer.json: model: missing");
  auto m = bpe_model::from_json(*model);
  if (!m) return make_error("tokenizer.json: " + m.error().message);
  st->model = *m;
  if (auto s = load_normalizer(root.find("normalizer"), *st); !s) return s.error();
  if (auto s = load_pre_tokenizer(root.find("pre_tokenizer"), *st); !s) return s.error();
  if (auto s = load_decoder(root.find("decoder")); !s) return s.error();
  if (auto s = load_post_processor(root.find("post_processor"), *st); !s) return s.error();
  if (auto s = load_added_tokens(root.find("added_tokens"), *st); !s) return s.error();
  build_id_tables(*st);
  return st;
}

}  // namespace caf_agent::policy
