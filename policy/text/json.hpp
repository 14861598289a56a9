#pragma once
// A small self-contained JSON value, parser and serializer. The policy's text
// side reads tokenizer.json and the agent's tool-call arguments with it, and
// must build on machines that have only a compiler and LibTorch.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "policy/text/result.hpp"

namespace caf_agent::policy {

class json_value;

/// A JSON array.
using json_array = std::vector<json_value>;

/// A JSON object; members keep their order (serialization must match Python's
/// json.dumps with sort_keys=False, which keeps insertion order).
using json_object = std::vector<std::pair<std::string, json_value>>;

/// An integer outside int64's range, kept exactly as its decimal digits
/// (Python's json round-trips such integers; a double would not).
struct json_big_integer {
  /// The digits, with a leading '-' when negative.
  std::string digits;
  /// Equality of the digits.
  friend bool operator==(const json_big_integer&, const json_big_integer&) = default;
};

/// The kind of a json_value.
enum class json_kind { null, boolean, integer, real, string, array, object, big_integer };

/// One JSON value: null, bool, number (integer or real), string, array, object.
class json_value {
 public:
  /// Null.
  json_value() = default;
  /// Null.
  json_value(std::nullptr_t) {}
  /// A boolean.
  json_value(bool b) : data_(b) {}
  /// An integer.
  json_value(int v) : data_(static_cast<int64_t>(v)) {}
  /// An integer.
  json_value(int64_t v) : data_(v) {}
  /// A real number.
  json_value(double v) : data_(v) {}
  /// A string (UTF-8).
  json_value(std::string s) : data_(std::move(s)) {}
  /// A string (UTF-8).
  json_value(const char* s) : data_(std::string(s)) {}
  /// An array.
  json_value(json_array a) : data_(std::move(a)) {}
  /// An object.
  json_value(json_object o) : data_(std::move(o)) {}
  /// An integer beyond int64.
  json_value(json_big_integer b) : data_(std::move(b)) {}

  /// The kind of value held.
  json_kind kind() const noexcept { return static_cast<json_kind>(data_.index()); }
  /// True for null.
  bool is_null() const noexcept { return kind() == json_kind::null; }
  /// True for a boolean.
  bool is_bool() const noexcept { return kind() == json_kind::boolean; }
  /// True for an integer or real number.
  bool is_number() const noexcept {
    return kind() == json_kind::integer || kind() == json_kind::real || kind() == json_kind::big_integer;
  }
  /// True for an integer beyond int64 (see as_big_integer).
  bool is_big_integer() const noexcept { return kind() == json_kind::big_integer; }
  /// True for an integer number.
  bool is_integer() const noexcept { return kind() == json_kind::integer; }
  /// True for a string.
  bool is_string() const noexcept { return kind() == json_kind::string; }
  /// True for an array.
  bool is_array() const noexcept { return kind() == json_kind::array; }
  /// True for an object.
  bool is_object() const noexcept { return kind() == json_kind::object; }

  /// The boolean; only valid when is_bool().
  bool as_bool() const { return std::get<bool>(data_); }
  /// The integer; only valid when is_integer().
  int64_t as_integer() const { return std::get<int64_t>(data_); }
  /// The number as a double; only valid when is_number().
  double as_double() const;
  /// The digits of a big integer; only valid when is_big_integer().
  const std::string& as_big_integer() const { return std::get<json_big_integer>(data_).digits; }
  /// The string; only valid when is_string().
  const std::string& as_string() const { return std::get<std::string>(data_); }
  /// The array; only valid when is_array().
  const json_array& as_array() const { return std::get<json_array>(data_); }
  /// The array; only valid when is_array().
  json_array& as_array() { return std::get<json_array>(data_); }
  /// The object; only valid when is_object().
  const json_object& as_object() const { return std::get<json_object>(data_); }
  /// The object; only valid when is_object().
  json_object& as_object() { return std::get<json_object>(data_); }

  /// The member named key of an object, or nullptr (also for non-objects).
  const json_value* find(std::string_view key) const;

  /// Structural equality (objects compare in order).
  friend bool operator==(const json_value& a, const json_value& b) { return a.data_ == b.data_; }

 private:
  std::variant<std::nullptr_t, bool, int64_t, double, std::string, json_array, json_object, json_big_integer> data_;
};

/// Name of a kind for error messages ("object", "string", ...).
const char* json_kind_name(json_kind k);

/// Options for parse_json.
struct json_parse_options {
  /// Accept `[1, 2,]` and `{"a": 1,}`; LLM-written tool calls often have them.
  bool allow_trailing_commas = false;
  /// Accept raw control characters (newline, tab) inside strings; LLMs put
  /// literal newlines into code they pass as string arguments.
  bool allow_control_chars = false;
  /// Maximum nesting; deeper input is an error, never a stack overflow.
  /// Rationale: 512 is far beyond any tokenizer.json or tool call.
  int max_depth = 512;
};

/// A value parsed from a prefix of a text, with where it ended.
struct json_prefix {
  /// The parsed value.
  json_value value;
  /// Offset just past the value (trailing whitespace not consumed).
  size_t end = 0;
};

/// Parses a complete JSON text; trailing non-whitespace is an error. Errors
/// read "invalid JSON at offset N: <what>".
result<json_value> parse_json(std::string_view text, const json_parse_options& opts = {});

/// Parses one JSON value starting at `offset` (after skipping whitespace) and
/// reports where it ended; text after the value is not looked at.
result<json_prefix> parse_json_prefix(std::string_view text, size_t offset, const json_parse_options& opts = {});

/// Options for dump_json.
struct json_dump_options {
  /// Between array items and object members; ", " is Python's json.dumps.
  std::string_view item_separator = ", ";
  /// Between a key and its value; ": " is Python's json.dumps.
  std::string_view key_separator = ": ";
  /// Python's indent: when >= 0, each item goes on its own line indented by
  /// this many spaces per level (and item_separator should be ",", as
  /// json.dumps makes it when indent is given); -1 is one line.
  int indent = -1;
};

/// Serializes like Python's json.dumps(ensure_ascii=False): non-ASCII text is
/// written as UTF-8, only '"', '\\' and control characters are escaped, and
/// reals use the shortest repr ("1.0", "1e-07", "1e+16").
std::string dump_json(const json_value& v, const json_dump_options& opts = {});

/// Appends the JSON string literal for s (quotes included) to out.
void append_json_string(std::string& out, std::string_view s);

}  // namespace caf_agent::policy
