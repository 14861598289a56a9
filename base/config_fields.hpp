#pragma once
/// base/config_fields.hpp: the vocabulary of a component's config field list (header-only, no
/// dependencies beyond the standard library, so every library may use it).
///
/// A component's config struct carries its defaults as member initializers and one field list,
/// a static member template `fields(F& f, Self& self)` that names every setting once:
///
///     template <class F, class Self> static void fields(F& f, Self& c) {
///       f("bash_timeout_s", c.bash_timeout_s, "a Bash call without a timeout ends after this", positive());
///       f.section("rft", c.rft, "rejection fine-tuning");   // a nested table, [train.rft]
///     }
///
/// A closed set is a named enum (base/named_enum.hpp) and needs no check: TOML holds its name,
/// and a name not in its list is an error naming the names.
///
/// The same list is walked by whoever needs the fields: `runtime/` reads TOML through it (unknown
/// keys named with their section, wrong types naming the key) and prints the commented example
/// config from it; `validate_config` below applies each field's checks and then the struct's own
/// `validate(config_errors&)` for rules between fields. Adding a setting is one member and one line.

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/named_enum.hpp"

namespace caf_agent::base {

/// Receives validation errors: the key (relative to the section being checked) and what is wrong.
class config_errors {
 public:
  virtual ~config_errors() = default;
  /// Records that `key` is wrong; `message` says how (e.g. "must be > 0, got 0").
  virtual void error(std::string_view key, std::string_view message) = 0;
};

/// One constraint on a field's value; a field may carry several (all are checked, in order).
struct check {
  enum class kind { positive, range, within, above_within, not_empty };
  kind what;
  double lo = 0;
  double hi = 0;
  std::string_view message;  ///< within: the error text
};

/// An integer that must be > 0 ("must be > 0, got N").
inline check positive() {
  return {check::kind::positive, 0, 0, {}};
}
/// A number in [lo, hi] ("must be in [lo, hi], got v").
inline check range(double lo, double hi) {
  return {check::kind::range, lo, hi, {}};
}
/// A number in [lo, hi]; outside, `message` is the error.
inline check within(double lo, double hi, std::string_view message) {
  return {check::kind::within, lo, hi, message};
}
/// A number in (lo, hi]; outside, `message` is the error.
inline check above_within(double lo, double hi, std::string_view message) {
  return {check::kind::above_within, lo, hi, message};
}
/// A number > lo; otherwise `message` is the error.
inline check above(double lo, std::string_view message) {
  return above_within(lo, std::numeric_limits<double>::infinity(), message);
}
/// A number >= lo; below, `message` is the error.
inline check at_least(double lo, std::string_view message) {
  return within(lo, std::numeric_limits<double>::infinity(), message);
}
/// A string that is not empty ("must not be empty").
inline check not_empty() {
  return {check::kind::not_empty, 0, 0, {}};
}

/// The checks' error text for one value (empty when it passes).
template <class T>
std::string check_message(const check& c, const T& v) {
  if constexpr (std::is_arithmetic_v<T>) {
    const auto d = static_cast<double>(v);
    switch (c.what) {
      case check::kind::positive:
        if (d <= 0) return "must be > 0, got " + std::to_string(static_cast<int64_t>(v));
        return {};
      case check::kind::range:
        if (d < c.lo || d > c.hi)
          return "must be in [" + std::to_string(c.lo) + ", " + std::to_string(c.hi) + "], got " + std::to_string(d);
        return {};
      case check::kind::within:
        // Rationale: !(in range) so that NaN fails too.
        if (!(d >= c.lo && d <= c.hi)) return std::string{c.message};
        return {};
      case check::kind::above_within:
        if (!(d > c.lo && d <= c.hi)) return std::string{c.message};
        return {};
      default:
        return "check does not apply to a number";
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    switch (c.what) {
      case check::kind::not_empty:
        return v.empty() ? "must not be empty" : std::string{};
      default:
        return "check does not apply to a string";
    }
  } else {
    return "check does not apply to this type";
  }
}

namespace detail {

/// Walks a field list and applies each field's checks; nested sections are left to `nested`.
template <class Nested>
struct check_walker {
  config_errors& errors;
  Nested nested;
  template <class T, class... Checks>
  void operator()([[maybe_unused]] std::string_view key, [[maybe_unused]] const T& value, std::string_view /*comment*/,
                  const Checks&... checks) {
    (report(key, check_message(checks, value)), ...);
  }
  template <class Section>
  void section(std::string_view key, const Section& s, std::string_view /*comment*/) {
    nested(key, s);
  }
  void report(std::string_view key, const std::string& message) {
    if (!message.empty()) errors.error(key, message);
  }
};

/// Errors of a nested section, with the key prefixed "<section>.".
class prefixed_errors : public config_errors {
 public:
  prefixed_errors(config_errors& out, std::string_view prefix) : out_(out), prefix_(prefix) {}
  void error(std::string_view key, std::string_view message) override {
    out_.error(prefix_ + "." + std::string{key}, message);
  }

 private:
  config_errors& out_;
  std::string prefix_;
};

}  // namespace detail

/// Checks `c` without its nested sections: every field's checks, then `c.validate(errors)`.
template <class Config>
void validate_fields(const Config& c, config_errors& errors) {
  auto skip = [](std::string_view, const auto&) {};
  detail::check_walker<decltype(skip)> walker{errors, skip};
  Config::fields(walker, c);
  c.validate(errors);
}

/// Checks `c` and, recursively, its nested sections (their keys prefixed with the section's).
template <class Config>
void validate_config(const Config& c, config_errors& errors) {
  auto recurse = [&errors](std::string_view key, const auto& s) {
    detail::prefixed_errors nested{errors, key};
    validate_config(s, nested);
  };
  detail::check_walker<decltype(recurse)> walker{errors, recurse};
  Config::fields(walker, c);
  c.validate(errors);
}

/// Collects errors as "key: message" lines (tests, or a library checking its config alone).
class error_list : public config_errors {
 public:
  void error(std::string_view key, std::string_view message) override {
    lines.push_back(std::string{key} + ": " + std::string{message});
  }
  std::vector<std::string> lines;
};

/// A value written as TOML (strings quoted and escaped; a double in its shortest form that reads
/// back to the same value, always with a '.' or an exponent so it stays a float).
inline std::string toml_value(bool v) {
  return v ? "true" : "false";
}
inline std::string toml_value(int32_t v) {
  return std::to_string(v);
}
inline std::string toml_value(int64_t v) {
  return std::to_string(v);
}
inline std::string toml_value(uint64_t v) {
  return std::to_string(v);
}
inline std::string toml_value(double v) {
  if (v != v) return "nan";
  if (v == std::numeric_limits<double>::infinity()) return "inf";
  if (v == -std::numeric_limits<double>::infinity()) return "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, ec == std::errc{} ? end : buf);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}
inline std::string toml_value(const std::string& v) {
  std::string out = "\"";
  for (unsigned char ch : v) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          char esc[8];
          std::snprintf(esc, sizeof esc, "\\u%04x", ch);
          out += esc;
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out + "\"";
}
/// A named enum is written as its name (a string).
template <named_enum E>
std::string toml_value(E v) {
  return toml_value(std::string{name_of(v)});
}
inline std::string toml_value(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + toml_value(v[i]);
  return out + "]";
}
/// A list of named enums is written as the list of their names.
template <named_enum E>
std::string toml_value(const std::vector<E>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + toml_value(v[i]);
  return out + "]";
}
inline std::string toml_value(const std::vector<std::pair<int64_t, double>>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? ", [" : "[") + toml_value(v[i].first) + ", " + toml_value(v[i].second) + "]";
  return out + "]";
}

template <class Config>
std::vector<std::pair<std::string, std::string>> field_values(const Config& c, const std::string& prefix = {});

namespace detail {

/// Collects (dotted key, TOML value) of a field list.
struct value_collector {
  std::vector<std::pair<std::string, std::string>> out;
  std::string prefix;
  template <class T, class... Checks>
  void operator()(std::string_view key, const T& v, std::string_view, const Checks&...) {
    out.emplace_back(prefix + std::string{key}, toml_value(v));
  }
  template <class S>
  void section(std::string_view key, const S& s, std::string_view) {
    auto nested = field_values(s, prefix + std::string{key} + ".");
    out.insert(out.end(), nested.begin(), nested.end());
  }
};

}  // namespace detail

/// Every field of `c` as (dotted key, TOML value), nested sections where the list names them.
template <class Config>
std::vector<std::pair<std::string, std::string>> field_values(const Config& c, const std::string& prefix) {
  detail::value_collector w{{}, prefix};
  Config::fields(w, c);
  return std::move(w.out);
}

/// The keys whose values differ between `a` and `b` (e.g. a file and its printed form read back).
template <class Config>
std::vector<std::string> differing_fields(const Config& a, const Config& b) {
  auto va = field_values(a);
  auto vb = field_values(b);
  std::vector<std::string> out;
  for (size_t i = 0; i < va.size() || i < vb.size(); ++i) {
    if (i >= va.size() || i >= vb.size()) {
      out.push_back(i < va.size() ? va[i].first : vb[i].first);
    } else if (va[i] != vb[i]) {
      out.push_back(va[i].first + " (" + va[i].second + " vs " + vb[i].second + ")");
    }
  }
  return out;
}

}  // namespace caf_agent::base
