#pragma once
/// runtime/config_reader.hpp: strict, typed reading of one TOML table, through a section's
/// field list (base/config_fields.hpp).
///
/// Every key a section reads is remembered; whatever is left over is an unknown
/// key and an error naming it. A value of the wrong type is an error naming the
/// key and both types. Errors are collected, not thrown, so a user sees all of
/// them at once.

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "base/config_fields.hpp"

namespace caf_agent::runtime {

/// Reads typed values from one TOML table (a config section), strictly; validation errors
/// (base::config_errors) are named with the section.
class section_reader : public base::config_errors {
 public:
  /// `table` may be null (section absent: every key keeps its default).
  section_reader(const toml::table* table, std::string section, std::vector<std::string>& errors);

  /// Reads `key` into `out` if present; leaves `out` unchanged otherwise.
  void read(std::string_view key, bool& out);
  void read(std::string_view key, int32_t& out);
  void read(std::string_view key, int64_t& out);
  void read(std::string_view key, uint64_t& out);
  void read(std::string_view key, double& out);
  void read(std::string_view key, std::string& out);
  void read(std::string_view key, std::vector<std::string>& out);
  /// An array of [integer, number] pairs, e.g. lr phases [[450, 1e-2], [90, 3e-3]].
  void read(std::string_view key, std::vector<std::pair<int64_t, double>>& out);
  /// A named enum from its name; another string is "'x' is not one of: <the names>".
  template <base::named_enum E>
  void read(std::string_view key, E& out) {
    std::string name{base::name_of(out)};
    const auto before = errors_.size();
    read(key, name);
    if (errors_.size() != before) return;
    if (auto v = base::parse_name<E>(name))
      out = *v;
    else
      error(key, "'" + name + "' is not one of: " + base::names_list<E>());
  }
  /// A list of named enums from their names; a name not in the list is an error as above.
  template <base::named_enum E>
  void read(std::string_view key, std::vector<E>& out) {
    std::vector<std::string> names;
    for (auto e : out) names.emplace_back(base::name_of(e));
    const auto before = errors_.size();
    read(key, names);
    if (errors_.size() != before) return;
    std::vector<E> values;
    for (auto& name : names) {
      auto v = base::parse_name<E>(name);
      if (!v) return error(key, "'" + name + "' is not one of: " + base::names_list<E>());
      values.push_back(*v);
    }
    out = std::move(values);
  }

  /// The sub-table `key` (e.g. [train.rft] inside [train]), or null when absent; a value that
  /// is not a table is an error naming the key. The key counts as read.
  const toml::table* subtable(std::string_view key);

  /// Reads every field of `Config`'s field list that the table holds (nested sections from their
  /// sub-tables, each strict and validated when read cleanly). Checks nothing else: see finish().
  template <class Config>
  void read_fields(Config& c);

  /// Reads `table` (a subtable() of this section, may be null) into `s` with a reader of its
  /// own, named `<this section>.<key>`: strict like every section, validated when read cleanly.
  template <class Section>
  void read_nested(const toml::table* table, std::string_view key, Section& s) {
    section_reader nested{table, qualified(key), errors_};
    const auto before = errors_.size();
    nested.read_fields(s);
    nested.finish();
    if (errors_.size() == before) base::validate_fields(s, nested);
  }

  /// Records an error about `key` (validation: "config key 'section.key': message").
  void error(std::string_view key, std::string_view message) override;

  /// Reports every key of the table that no read() asked for.
  void finish();

  /// The dotted name of `key` in this section, e.g. "rollout.max_episodes".
  std::string qualified(std::string_view key) const;

 private:
  const toml::node* lookup(std::string_view key);
  void type_error(std::string_view key, std::string_view want, const toml::node& got);

  const toml::table* table_;
  std::string section_;
  std::vector<std::string>& errors_;
  std::set<std::string, std::less<>> seen_;
};

namespace detail {

/// Walks a field list for section_reader::read_fields.
struct field_reader {
  section_reader& r;
  template <class T, class... Checks>
  void operator()(std::string_view key, T& value, std::string_view, const Checks&...) {
    r.read(key, value);
  }
  template <class Section>
  void section(std::string_view key, Section& s, std::string_view) {
    r.read_nested(r.subtable(key), key, s);
  }
};

}  // namespace detail

template <class Config>
void section_reader::read_fields(Config& c) {
  detail::field_reader w{*this};
  Config::fields(w, c);
}

}  // namespace caf_agent::runtime
