#include "policy/text/tool_call_parser.hpp"

#include <algorithm>

namespace caf_agent::policy {

namespace {

constexpr std::string_view open_tag = "<tool_call>";
constexpr std::string_view close_tag = "</tool_call>";

// Rationale: LLM output is the input here, so the parser accepts the common
// near-JSON slips (trailing commas, literal newlines in strings).
const json_parse_options lenient{true, true, 64};

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  return pos;
}

std::string trim(std::string_view s) {
  size_t b = skip_space(s, 0);
  size_t e = s.size();
  while (e > b && is_space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

// Skips a Markdown fence ("```" or "```json") at pos, if any.
size_t skip_fence(std::string_view s, size_t pos) {
  if (s.substr(pos, 3) != "```") return pos;
  pos += 3;
  while (pos < s.size() && s[pos] != '\n' && !is_space(s[pos]) && s[pos] != '{') ++pos;
  return skip_space(s, pos);
}

// Where a block that could not be parsed ends: its closing tag, the next
// opening tag, or the end of the text.
size_t block_end(std::string_view text, size_t from) {
  size_t close = text.find(close_tag, from);
  size_t next = text.find(open_tag, from);
  return std::min({close, next, text.size()});
}

bool fail(parsed_tool_call& call, std::string why) {
  call.ok = false;
  call.error = std::move(why);
  return false;
}

// Fills name and arguments from the parsed object.
bool read_call_object(const json_value& obj, parsed_tool_call& call) {
  if (!obj.is_object()) return fail(call, std::string("expected a JSON object, got ") + json_kind_name(obj.kind()));
  const auto* name = obj.find("name");
  if (!name) return fail(call, "missing \"name\"");
  if (!name->is_string() || name->as_string().empty()) return fail(call, "\"name\" must be a non-empty string");
  call.name = name->as_string();
  const auto* args = obj.find("arguments");
  if (!args) args = obj.find("parameters");
  if (!args || args->is_null()) {
    call.arguments = json_object{};
  } else if (args->is_string()) {
    auto inner = parse_json(args->as_string(), lenient);
    if (!inner) return fail(call, "\"arguments\" is a string that is not JSON: " + inner.error().message);
    if (!inner->is_object()) return fail(call, "\"arguments\" must be a JSON object");
    call.arguments = std::move(*inner);
  } else if (args->is_object()) {
    call.arguments = *args;
  } else {
    return fail(call, std::string("\"arguments\" must be a JSON object, got ") + json_kind_name(args->kind()));
  }
  call.ok = true;
  return true;
}

// Parses one block starting just after <tool_call>; returns where the text
// continues after the block.
size_t parse_block(std::string_view text, size_t body, parsed_tool_call& call) {
  size_t start = skip_fence(text, skip_space(text, body));
  if (start >= text.size() || text.substr(start, close_tag.size()) == close_tag ||
      text.substr(start, open_tag.size()) == open_tag) {
    size_t end = block_end(text, body);
    call.raw = trim(text.substr(body, end - body));
    fail(call, "empty tool call");
    return text.substr(end, close_tag.size()) == close_tag ? end + close_tag.size() : end;
  }
  std::string_view json_text = text.substr(start);
  auto parsed = parse_json_prefix(json_text, 0, lenient);
  size_t end;
  if (!parsed) {
    end = block_end(text, body);
    fail(call, parsed.error().message);
  } else {
    size_t after = skip_space(text, start + parsed->end);
    if (text.substr(after, 3) == "```") after = skip_space(text, after + 3);
    end = after;
    if (after < text.size() && text.substr(after, close_tag.size()) != close_tag &&
        text.substr(after, open_tag.size()) != open_tag) {
      end = block_end(text, after);
      fail(call, "unexpected text after the JSON object at offset " + std::to_string(after - start) + ": '" +
                     trim(text.substr(after, std::min<size_t>(20, end - after))) + "'");
    } else {
      read_call_object(parsed->value, call);
    }
  }
  call.raw = trim(text.substr(body, end - body));
  return text.substr(end, close_tag.size()) == close_tag ? end + close_tag.size() : end;
}

}  // namespace

assistant_turn parse_assistant_turn(std::string_view text) {
  assistant_turn turn;
  std::string content;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find(open_tag, pos);
    if (open == std::string_view::npos) {
      content += text.substr(pos);
      break;
    }
    content += text.substr(pos, open - pos);
    parsed_tool_call call;
    call.index = turn.calls.size() + 1;
    pos = parse_block(text, open + open_tag.size(), call);
    turn.calls.push_back(std::move(call));
  }
  turn.content = trim(content);
  return turn;
}

assistant_turn parse_assistant_turn(const chat_format& fmt, std::string_view text) {
  if (fmt.family != chat_family::llama3_1) return parse_assistant_turn(text);
  constexpr std::string_view python_tag = "<|python_tag|>";
  std::string body = trim(text);
  if (std::string_view(body).substr(0, python_tag.size()) == python_tag)
    body = trim(std::string_view(body).substr(python_tag.size()));
  assistant_turn turn;
  if (body.empty() || body.front() != '{') {
    turn.content = trim(text);
    return turn;
  }
  parsed_tool_call call;
  call.index = 1;
  call.raw = body;
  auto parsed = parse_json_prefix(body, 0, lenient);
  if (!parsed) {
    fail(call, parsed.error().message);
  } else if (size_t after = skip_space(body, parsed->end); after < body.size()) {
    fail(call, "unexpected text after the JSON object at offset " + std::to_string(after) + ": '" +
                   trim(std::string_view(body).substr(after, 20)) + "'");
  } else {
    read_call_object(parsed->value, call);
  }
  turn.calls.push_back(std::move(call));
  return turn;
}

std::string tool_call_error_text(const parsed_tool_call& call) {
  return "tool call " + std::to_string(call.index) + ": " + call.error;
}

json_value assistant_turn_to_json(const assistant_turn& turn) {
  json_array calls;
  for (const auto& c : turn.calls) {
    json_object o{{"index", static_cast<int64_t>(c.index)}, {"ok", c.ok}};
    if (c.ok) {
      o.emplace_back("name", c.name);
      o.emplace_back("arguments", c.arguments);
    } else {
      o.emplace_back("error", tool_call_error_text(c));
    }
    calls.push_back(json_value(std::move(o)));
  }
  return json_object{
      {"content", turn.content}, {"final_answer", turn.is_final_answer()}, {"calls", json_value(std::move(calls))}};
}

}  // namespace caf_agent::policy
