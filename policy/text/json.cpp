#include "policy/text/json.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "policy/text/utf8.hpp"

namespace caf_agent::policy {

double json_value::as_double() const {
  if (is_integer()) return static_cast<double>(as_integer());
  if (is_big_integer()) return std::strtod(as_big_integer().c_str(), nullptr);
  return std::get<double>(data_);
}

const json_value* json_value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [k, v] : as_object())
    if (k == key) return &v;
  return nullptr;
}

const char* json_kind_name(json_kind k) {
  switch (k) {
    case json_kind::null:
      return "null";
    case json_kind::boolean:
      return "boolean";
    case json_kind::integer:
      return "integer";
    case json_kind::real:
      return "number";
    case json_kind::string:
      return "string";
    case json_kind::big_integer:
      return "integer";
    case json_kind::array:
      return "array";
    case json_kind::object:
      return "object";
  }
  return "unknown";
}

namespace {

// Recursive-descent parser; the first error wins and stops the parse.
class parser {
 public:
  parser(std::string_view text, size_t pos, const json_parse_options& opts) : text_(text), pos_(pos), opts_(opts) {}

  bool parse_value(json_value& out, int depth);
  void skip_ws() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t'))
      ++pos_;
  }
  bool fail(std::string what) {
    if (error_.empty()) error_ = "invalid JSON at offset " + std::to_string(pos_) + ": " + what;
    return false;
  }
  size_t pos() const { return pos_; }
  const std::string& error() const { return error_; }

 private:
  bool parse_literal(std::string_view word, json_value v, json_value& out);
  bool parse_number(json_value& out);
  bool parse_string(std::string& out);
  bool parse_hex4(char32_t& out);
  bool parse_escape(std::string& out);
  bool parse_array(json_value& out, int depth);
  bool parse_object(json_value& out, int depth);
  std::string describe_here() const {
    if (pos_ >= text_.size()) return "end of input";
    char c = text_[pos_];
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7F)
      return "byte 0x" + to_hex(static_cast<unsigned char>(c));
    return std::string("'") + c + "'";
  }
  static std::string to_hex(unsigned v) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%02X", v);
    return buf;
  }

  std::string_view text_;
  size_t pos_;
  const json_parse_options& opts_;
  std::string error_;
};

bool parser::parse_value(json_value& out, int depth) {
  if (depth > opts_.max_depth) return fail("nesting deeper than " + std::to_string(opts_.max_depth));
  skip_ws();
  if (pos_ >= text_.size()) return fail("expected a value, got end of input");
  switch (text_[pos_]) {
    case '{':
      return parse_object(out, depth);
    case '[':
      return parse_array(out, depth);
    case '"': {
      std::string s;
      if (!parse_string(s)) return false;
      out = json_value(std::move(s));
      return true;
    }
    case 't':
      return parse_literal("true", json_value(true), out);
    case 'f':
      return parse_literal("false", json_value(false), out);
    case 'n':
      return parse_literal("null", json_value(), out);
    default:
      if (text_[pos_] == '-' || (text_[pos_] >= '0' && text_[pos_] <= '9')) return parse_number(out);
      return fail("expected a value, got " + describe_here());
  }
}

bool parser::parse_literal(std::string_view word, json_value v, json_value& out) {
  if (text_.substr(pos_, word.size()) != word) return fail("expected '" + std::string(word) + "'");
  pos_ += word.size();
  out = std::move(v);
  return true;
}

bool parser::parse_number(json_value& out) {
  size_t start = pos_;
  auto digits = [&] {
    size_t s = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    return pos_ - s;
  };
  if (text_[pos_] == '-') ++pos_;
  if (pos_ < text_.size() && text_[pos_] == '0') {
    ++pos_;
  } else if (digits() == 0) {
    return fail("expected digits in number");
  }
  bool integral = true;
  if (pos_ < text_.size() && text_[pos_] == '.') {
    ++pos_;
    integral = false;
    if (digits() == 0) return fail("expected digits after '.'");
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    integral = false;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    if (digits() == 0) return fail("expected digits in exponent");
  }
  const char* first = text_.data() + start;
  const char* last = text_.data() + pos_;
  if (integral) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(first, last, v);
    if (ec == std::errc() && p == last) {
      out = json_value(v);
      return true;
    }
    // Beyond int64: keep the digits (Python prints them back exactly); "-0"
    // style inputs never get here, they fit int64.
    std::string digits(first, last);
    if (digits.size() > 1 && digits[0] == '-') {
      size_t nz = digits.find_first_not_of('0', 1);
      digits = "-" + digits.substr(nz);
    } else {
      digits = digits.substr(std::min(digits.find_first_not_of('0'), digits.size() - 1));
    }
    out = json_value(json_big_integer{std::move(digits)});
    return true;
  }
  // Rationale: strtod is locale-sensitive only for the decimal point, and the
  // "C" locale is the default in every binary of this project.
  std::string copy(first, last);
  out = json_value(std::strtod(copy.c_str(), nullptr));
  return true;
}

bool parser::parse_hex4(char32_t& out) {
  if (pos_ + 4 > text_.size()) return fail("truncated \\u escape");
  out = 0;
  for (int i = 0; i < 4; ++i) {
    char c = text_[pos_ + i];
    out <<= 4;
    if (c >= '0' && c <= '9')
      out |= c - '0';
    else if (c >= 'a' && c <= 'f')
      out |= c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      out |= c - 'A' + 10;
    else
      return fail("invalid hex digit in \\u escape");
  }
  pos_ += 4;
  return true;
}

// A lone surrogate cannot be written as UTF-8; it becomes U+FFFD.
bool parser::parse_escape(std::string& out) {
  char c = text_[pos_++];
  switch (c) {
    case '"':
      out.push_back('"');
      return true;
    case '\\':
      out.push_back('\\');
      return true;
    case '/':
      out.push_back('/');
      return true;
    case 'b':
      out.push_back('\b');
      return true;
    case 'f':
      out.push_back('\f');
      return true;
    case 'n':
      out.push_back('\n');
      return true;
    case 'r':
      out.push_back('\r');
      return true;
    case 't':
      out.push_back('\t');
      return true;
    case 'u':
      break;
    default:
      --pos_;
      return fail("invalid escape " + describe_here());
  }
  char32_t cp = 0;
  if (!parse_hex4(cp)) return false;
  if (cp >= 0xD800 && cp <= 0xDBFF && text_.substr(pos_, 2) == "\\u") {
    size_t save = pos_;
    pos_ += 2;
    char32_t lo = 0;
    if (!parse_hex4(lo)) return false;
    if (lo >= 0xDC00 && lo <= 0xDFFF) {
      append_utf8(out, 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00));
      return true;
    }
    pos_ = save;
  }
  append_utf8(out, cp);
  return true;
}

bool parser::parse_string(std::string& out) {
  ++pos_;  // opening quote
  while (true) {
    if (pos_ >= text_.size()) return fail("unterminated string");
    char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      return true;
    }
    if (c == '\\') {
      ++pos_;
      if (pos_ >= text_.size()) return fail("unterminated string");
      if (!parse_escape(out)) return false;
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20 && !opts_.allow_control_chars)
      return fail("unescaped control character " + describe_here() + " in string");
    out.push_back(c);
    ++pos_;
  }
}

bool parser::parse_array(json_value& out, int depth) {
  ++pos_;
  json_array items;
  skip_ws();
  if (pos_ < text_.size() && text_[pos_] == ']') {
    ++pos_;
    out = json_value(std::move(items));
    return true;
  }
  while (true) {
    json_value item;
    if (!parse_value(item, depth + 1)) return false;
    items.push_back(std::move(item));
    skip_ws();
    if (pos_ >= text_.size()) return fail("unterminated array, expected ',' or ']'");
    if (text_[pos_] == ']') break;
    if (text_[pos_] != ',') return fail("expected ',' or ']' in array, got " + describe_here());
    ++pos_;
    skip_ws();
    if (opts_.allow_trailing_commas && pos_ < text_.size() && text_[pos_] == ']') break;
  }
  ++pos_;
  out = json_value(std::move(items));
  return true;
}

bool parser::parse_object(json_value& out, int depth) {
  ++pos_;
  json_object members;
  skip_ws();
  if (pos_ < text_.size() && text_[pos_] == '}') {
    ++pos_;
    out = json_value(std::move(members));
    return true;
  }
  while (true) {
    skip_ws();
    if (pos_ >= text_.size()) return fail("unterminated object, expected a key");
    if (text_[pos_] != '"') return fail("expected a string key in object, got " + describe_here());
    std::string key;
    if (!parse_string(key)) return false;
    skip_ws();
    if (pos_ >= text_.size() || text_[pos_] != ':')
      return fail("expected ':' after object key, got " + describe_here());
    ++pos_;
    json_value v;
    if (!parse_value(v, depth + 1)) return false;
    members.emplace_back(std::move(key), std::move(v));
    skip_ws();
    if (pos_ >= text_.size()) return fail("unterminated object, expected ',' or '}'");
    if (text_[pos_] == '}') break;
    if (text_[pos_] != ',') return fail("expected ',' or '}' in object, got " + describe_here());
    ++pos_;
    skip_ws();
    if (opts_.allow_trailing_commas && pos_ < text_.size() && text_[pos_] == '}') break;
  }
  ++pos_;
  out = json_value(std::move(members));
  return true;
}

// Python's float repr: shortest round-trip digits; scientific when the decimal
// exponent is < -4 or >= 16, with a sign and at least two exponent digits.
void append_real(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-Infinity" : "Infinity";
    return;
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view sci(buf, end - buf);
  bool neg = sci.front() == '-';
  if (neg) sci.remove_prefix(1);
  size_t epos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, epos))
    if (c != '.') digits.push_back(c);
  int exp = std::atoi(std::string(sci.substr(epos + 1)).c_str());
  if (neg) out.push_back('-');
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += ebuf;
  } else if (exp < 0) {
    out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    auto int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out += digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
}

void newline_indent(std::string& out, const json_dump_options& opts, int depth) {
  out.push_back('\n');
  out.append(static_cast<size_t>(opts.indent) * static_cast<size_t>(depth), ' ');
}

void dump_into(std::string& out, const json_value& v, const json_dump_options& opts, int depth) {
  switch (v.kind()) {
    case json_kind::null:
      out += "null";
      return;
    case json_kind::boolean:
      out += v.as_bool() ? "true" : "false";
      return;
    case json_kind::integer:
      out += std::to_string(v.as_integer());
      return;
    case json_kind::big_integer:
      out += v.as_big_integer();
      return;
    case json_kind::real:
      append_real(out, v.as_double());
      return;
    case json_kind::string:
      append_json_string(out, v.as_string());
      return;
    case json_kind::array: {
      const auto& items = v.as_array();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += opts.item_separator;
        if (opts.indent >= 0) newline_indent(out, opts, depth + 1);
        dump_into(out, items[i], opts, depth + 1);
      }
      if (opts.indent >= 0) newline_indent(out, opts, depth);
      out.push_back(']');
      return;
    }
    case json_kind::object: {
      const auto& members = v.as_object();
      if (members.empty()) {
        out += "{}";
        return;
      }
      out.push_back('{');
      for (size_t i = 0; i < members.size(); ++i) {
        if (i > 0) out += opts.item_separator;
        if (opts.indent >= 0) newline_indent(out, opts, depth + 1);
        append_json_string(out, members[i].first);
        out += opts.key_separator;
        dump_into(out, members[i].second, opts, depth + 1);
      }
      if (opts.indent >= 0) newline_indent(out, opts, depth);
      out.push_back('}');
      return;
    }
  }
}

}  // namespace

result<json_prefix> parse_json_prefix(std::string_view text, size_t offset, const json_parse_options& opts) {
  parser p(text, offset, opts);
  json_value v;
  if (!p.parse_value(v, 0)) return make_error(p.error());
  return json_prefix{std::move(v), p.pos()};
}

result<json_value> parse_json(std::string_view text, const json_parse_options& opts) {
  parser p(text, 0, opts);
  json_value v;
  if (!p.parse_value(v, 0)) return make_error(p.error());
  p.skip_ws();
  if (p.pos() != text.size()) {
    p.fail("unexpected text after the value");
    return make_error(p.error());
  }
  return v;
}

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

std::string dump_json(const json_value& v, const json_dump_options& opts) {
  std::string out;
  dump_into(out, v, opts, 0);
  return out;
}

}  // namespace caf_agent::policy
