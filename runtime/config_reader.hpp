#pragma once
/// runtime/config_reader.hpp: strict, typed reading of one TOML table.
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

namespace caf_agent::runtime {

/// Reads typed values from one TOML table (a config section), strictly.
class section_reader {
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

  /// The sub-table `key` (e.g. [train.rft] inside [train]), or null when absent; a value that
  /// is not a table is an error naming the key. The key counts as read.
  const toml::table* subtable(std::string_view key);

  /// Reads `table` (a subtable() of this section, may be null) into `s` with a reader of its
  /// own, named `<this section>.<key>`: strict like every section, validated when read cleanly.
  template <class Section>
  void read_nested(const toml::table* table, std::string_view key, Section& s) {
    section_reader nested{table, qualified(key), errors_};
    const auto before = errors_.size();
    s.read(nested);
    nested.finish();
    if (errors_.size() == before) s.validate(nested);
  }

  /// Records an error about `key` (used by validate()).
  void error(std::string_view key, std::string_view message);

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

}  // namespace caf_agent::runtime
