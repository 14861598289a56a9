#include "policy/text/chat_template.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace caf_agent::policy {

namespace {

struct known_template {
  uint64_t fingerprint;
  size_t length;  // bytes after the normalization of chat_template_fingerprint
  chat_family family;
  const char* name;
};

// Rationale: exact texts only. A fingerprint plus length identifies one text;
// tests/policy/text/test_chat_templates.py recomputes both from the stored
// templates, so an edit to either side fails the test.
constexpr known_template known_templates[] = {
    {0xe642ce246d7f2e3dULL, 2506, chat_family::qwen2_5, "Qwen2.5 instruct"},
    {0x2bfdb7aa9754484eULL, 4116, chat_family::qwen3, "Qwen3"},
    // The later revision (content read only when a string); same rendering of string contents.
    {0x959a4551391a6549ULL, 4168, chat_family::qwen3, "Qwen3 (content-is-string revision)"},
    {0xcc0368e1ffb6b958ULL, 4613, chat_family::llama3_1, "Llama 3.1 instruct"},
    {0xb501a298f84568f6ULL, 2206, chat_family::chatml_tools, "caf-agent ChatML with tools"},
};

std::string_view normalized(std::string_view text) {
  if (text.size() >= 3 && text.substr(text.size() - 3) == "%}\n") text.remove_suffix(1);
  return text;
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

result<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open '" + path.string() + "'");
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace

uint64_t chat_template_fingerprint(std::string_view template_text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : normalized(template_text)) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

result<chat_format> chat_format_for_template(std::string_view template_text, std::string_view source,
                                             std::string_view bos_token) {
  uint64_t fp = chat_template_fingerprint(template_text);
  size_t len = normalized(template_text).size();
  for (const auto& k : known_templates) {
    if (k.fingerprint != fp || k.length != len) continue;
    chat_format fmt = chat_format_of_family(k.family);
    fmt.bos_token = std::string(bos_token);
    fmt.name = std::string(k.name) + " (" + std::string(source) + ")";
    return fmt;
  }
  std::string known;
  for (const auto& k : known_templates) known += std::string(known.empty() ? "" : ", ") + k.name;
  return make_error("chat template of " + std::string(source) + " (fingerprint " + hex64(fp) + ", " +
                    std::to_string(len) +
                    " bytes) is not one this renderer reproduces exactly; "
                    "known templates: " +
                    known + ". Refusing rather than rendering an approximation.");
}

result<chat_format> load_chat_format(const std::string& model_dir) {
  namespace fs = std::filesystem;
  fs::path dir(model_dir);
  fs::path config_path = dir / "tokenizer_config.json";
  json_value config = json_object{};
  if (fs::exists(config_path)) {
    auto text = read_text(config_path);
    if (!text) return text.error();
    auto parsed = parse_json(*text);
    if (!parsed) return make_error(config_path.string() + ": " + parsed.error().message);
    config = std::move(*parsed);
  }
  std::string bos;
  if (const auto* b = config.find("bos_token")) {
    if (b->is_string())
      bos = b->as_string();
    else if (const auto* c = b->find("content"); c && c->is_string())
      bos = c->as_string();
  }
  fs::path jinja_path = dir / "chat_template.jinja";
  if (fs::exists(jinja_path)) {
    auto text = read_text(jinja_path);
    if (!text) return text.error();
    return chat_format_for_template(*text, jinja_path.string(), bos);
  }
  const auto* t = config.find("chat_template");
  if (!t)
    return make_error(model_dir +
                      ": no chat template (neither chat_template.jinja nor "
                      "\"chat_template\" in tokenizer_config.json)");
  if (!t->is_string())
    return make_error(config_path.string() +
                      ": \"chat_template\" is a list of named templates; "
                      "only a single template string is supported");
  return chat_format_for_template(t->as_string(), config_path.string() + " chat_template", bos);
}

result<chat_format> checkpoint_chat_format(const std::string& model_dir) {
  namespace fs = std::filesystem;
  fs::path dir(model_dir);
  bool has_template = fs::exists(dir / "chat_template.jinja");
  if (!has_template && fs::exists(dir / "tokenizer_config.json")) {
    auto text = read_text(dir / "tokenizer_config.json");
    if (!text) return text.error();
    auto parsed = parse_json(*text);
    if (!parsed) return make_error((dir / "tokenizer_config.json").string() + ": " + parsed.error().message);
    has_template = parsed->find("chat_template") != nullptr;
  }
  if (!has_template) return chat_format{};
  return load_chat_format(model_dir);
}

}  // namespace caf_agent::policy
