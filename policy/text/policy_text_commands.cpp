#include "policy/text/policy_text_commands.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "policy/text/chat_json.hpp"
#include "policy/text/chat_template.hpp"
#include "policy/text/json.hpp"
#include "policy/text/tokenizer.hpp"
#include "policy/text/tool_call_parser.hpp"

namespace caf_agent::policy {

namespace {

result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open '" + path + "'");
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

result<json_value> read_json(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  auto v = parse_json(*text);
  if (!v) return make_error(path + ": " + v.error().message);
  return v;
}

result<chat_format> format_from_file(const std::string& path, const std::string& bos) {
  auto text = read_file(path);
  if (!text) return text.error();
  return chat_format_for_template(*text, path, bos);
}

json_value ids_json(const std::vector<token_id>& ids) {
  json_array a;
  a.reserve(ids.size());
  for (auto id : ids) a.emplace_back(static_cast<int64_t>(id));
  return a;
}

result<std::string> cmd_encode(const tokenizer& tok, const std::vector<std::string>& args) {
  auto text = read_file(args[2]);
  if (!text) return text.error();
  bool special = args.size() > 3 && args[3] == "--add-special-tokens";
  return dump_json(json_object{{"ids", ids_json(tok.encode(*text, special))}});
}

result<std::string> cmd_encode_batch(const tokenizer& tok, const std::vector<std::string>& args) {
  auto texts = read_json(args[2]);
  if (!texts) return texts.error();
  if (!texts->is_array()) return make_error(args[2] + ": expected an array of strings");
  json_array out;
  for (const auto& t : texts->as_array()) {
    if (!t.is_string()) return make_error(args[2] + ": expected an array of strings");
    out.push_back(ids_json(tok.encode(t.as_string())));
  }
  return dump_json(json_object{{"ids", json_value(std::move(out))}});
}

result<std::string> cmd_decode_batch(const tokenizer& tok, const std::vector<std::string>& args) {
  auto lists = read_json(args[2]);
  if (!lists) return lists.error();
  if (!lists->is_array()) return make_error(args[2] + ": expected an array of id arrays");
  json_array texts, skipped;
  for (const auto& l : lists->as_array()) {
    std::vector<token_id> ids;
    for (const auto& id : l.is_array() ? l.as_array() : json_array{})
      if (id.is_integer()) ids.push_back(static_cast<token_id>(id.as_integer()));
    texts.emplace_back(tok.decode(ids, false));
    skipped.emplace_back(tok.decode(ids, true));
  }
  return dump_json(
      json_object{{"texts", json_value(std::move(texts))}, {"texts_skip_special", json_value(std::move(skipped))}});
}

result<std::string> cmd_bench(const tokenizer& tok, const std::vector<std::string>& args) {
  auto text = read_file(args[2]);
  if (!text) return text.error();
  int repeats = args.size() > 3 ? std::max(1, std::stoi(args[3])) : 10;
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto ids = tok.encode(*text);
  double first_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  auto t1 = clock::now();
  for (int i = 0; i < repeats; ++i) ids = tok.encode(*text);
  double warm_ms = std::chrono::duration<double, std::milli>(clock::now() - t1).count() / repeats;
  auto t2 = clock::now();
  auto back = tok.decode(ids);
  double decode_ms = std::chrono::duration<double, std::milli>(clock::now() - t2).count();
  return dump_json(json_object{{"bytes", static_cast<int64_t>(text->size())},
                               {"tokens", static_cast<int64_t>(ids.size())},
                               {"encode_cold_ms", first_ms},
                               {"encode_warm_ms", warm_ms},
                               {"decode_ms", decode_ms},
                               {"roundtrip_equal", back == *text}});
}

}  // namespace

result<std::string> run_text_command(const std::vector<std::string>& args) {
  const std::string& cmd = args.empty() ? std::string() : args[0];
  if (cmd == "parse-tool-calls") {
    if (args.size() < 2) return make_error("parse-tool-calls TEXT_FILE");
    auto text = read_file(args[1]);
    if (!text) return text.error();
    return dump_json(assistant_turn_to_json(parse_assistant_turn(*text)));
  }
  if (cmd == "identify-template") {
    if (args.size() < 2) return make_error("identify-template TEMPLATE_FILE_OR_MODEL_DIR");
    auto fmt = std::filesystem::is_directory(args[1]) ? checkpoint_chat_format(args[1]) : format_from_file(args[1], "");
    if (!fmt) return fmt.error();
    return dump_json(
        json_object{{"family", chat_family_name(fmt->family)}, {"name", fmt->name}, {"bos_token", fmt->bos_token}});
  }
  if (args.size() < 3) return make_error("'" + cmd + "' needs TOKENIZER_JSON and an input file");
  auto tok = tokenizer::from_file(args[1]);
  if (!tok) return tok.error();
  if (cmd == "encode") return cmd_encode(*tok, args);
  if (cmd == "encode-batch") return cmd_encode_batch(*tok, args);
  if (cmd == "decode-batch") return cmd_decode_batch(*tok, args);
  if (cmd == "bench") return cmd_bench(*tok, args);
  if (cmd == "render-chat") {
    auto conv = read_json(args[2]);
    if (!conv) return conv.error();
    chat_format fmt;
    if (args.size() > 3) {  // render-chat TOKENIZER CONV TEMPLATE_FILE_OR_MODEL_DIR [BOS_TOKEN]
      auto f = std::filesystem::is_directory(args[3]) ? checkpoint_chat_format(args[3])
                                                      : format_from_file(args[3], args.size() > 4 ? args[4] : "");
      if (!f) return f.error();
      fmt = std::move(*f);
    }
    auto out = render_conversation_json(*tok, *conv, fmt);
    if (!out) return out.error();
    return dump_json(*out);
  }
  return make_error("unknown command '" + cmd + "'");
}

}  // namespace caf_agent::policy
