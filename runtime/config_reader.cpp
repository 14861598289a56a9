// runtime/config_reader.cpp: see config_reader.hpp.
#include "runtime/config_reader.hpp"

#include <cmath>
#include <limits>

namespace caf_agent::runtime {

namespace {

std::string_view type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    default:
      return "date/time";
  }
}

}  // namespace

section_reader::section_reader(const toml::table* table, std::string section, std::vector<std::string>& errors)
    : table_(table), section_(std::move(section)), errors_(errors) {}

std::string section_reader::qualified(std::string_view key) const {
  return section_.empty() ? std::string{key} : section_ + "." + std::string{key};
}

const toml::node* section_reader::lookup(std::string_view key) {
  seen_.emplace(key);
  return table_ ? table_->get(key) : nullptr;
}

void section_reader::type_error(std::string_view key, std::string_view want, const toml::node& got) {
  errors_.push_back("config key '" + qualified(key) + "' must be " + std::string{want} + ", got " +
                    std::string{type_name(got)});
}

void section_reader::error(std::string_view key, std::string_view message) {
  errors_.push_back("config key '" + qualified(key) + "': " + std::string{message});
}

void section_reader::read(std::string_view key, bool& out) {
  if (auto* n = lookup(key)) {
    if (auto v = n->value_exact<bool>())
      out = *v;
    else
      type_error(key, "a boolean", *n);
  }
}

void section_reader::read(std::string_view key, int64_t& out) {
  if (auto* n = lookup(key)) {
    if (auto v = n->value_exact<int64_t>())
      out = *v;
    else
      type_error(key, "an integer", *n);
  }
}

void section_reader::read(std::string_view key, int32_t& out) {
  int64_t wide = out;
  auto before = errors_.size();
  read(key, wide);
  if (errors_.size() != before) return;
  if (wide < std::numeric_limits<int32_t>::min() || wide > std::numeric_limits<int32_t>::max())
    error(key, "value " + std::to_string(wide) + " is out of range");
  else
    out = static_cast<int32_t>(wide);
}

void section_reader::read(std::string_view key, uint64_t& out) {
  int64_t wide = static_cast<int64_t>(out);
  auto before = errors_.size();
  read(key, wide);
  if (errors_.size() != before) return;
  if (wide < 0)
    error(key, "must not be negative");
  else
    out = static_cast<uint64_t>(wide);
}

void section_reader::read(std::string_view key, double& out) {
  if (auto* n = lookup(key)) {
    // Rationale: NaN compares false with every bound, so no range check would refuse it; and no
    // key means anything by an infinite value (a learning rate, a factor, a latency).
    if (auto v = n->value_exact<double>(); v && !std::isfinite(*v))
      error(key, std::string("must be a finite number, got ") + (std::isnan(*v) ? "nan" : *v > 0 ? "inf" : "-inf"));
    else if (v)
      out = *v;
    else if (auto i = n->value_exact<int64_t>())
      out = static_cast<double>(*i);
    else
      type_error(key, "a number", *n);
  }
}

void section_reader::read(std::string_view key, std::string& out) {
  if (auto* n = lookup(key)) {
    if (auto v = n->value_exact<std::string>())
      out = *v;
    else
      type_error(key, "a string", *n);
  }
}

void section_reader::read(std::string_view key, std::vector<std::string>& out) {
  auto* n = lookup(key);
  if (!n) return;
  auto* arr = n->as_array();
  if (!arr) return type_error(key, "an array of strings", *n);
  std::vector<std::string> values;
  for (auto& e : *arr) {
    auto v = e.value_exact<std::string>();
    if (!v) return type_error(key, "an array of strings", e);
    values.push_back(*v);
  }
  out = std::move(values);
}

void section_reader::read(std::string_view key, std::vector<std::pair<int64_t, double>>& out) {
  auto* n = lookup(key);
  if (!n) return;
  auto* arr = n->as_array();
  if (!arr) return type_error(key, "an array of [integer, number] pairs", *n);
  std::vector<std::pair<int64_t, double>> values;
  for (auto& e : *arr) {
    auto* pair = e.as_array();
    if (!pair || pair->size() != 2) return type_error(key, "an array of [integer, number] pairs", e);
    auto first = (*pair)[0].value_exact<int64_t>();
    auto second = (*pair)[1].value_exact<double>();
    if (!second)
      if (auto i = (*pair)[1].value_exact<int64_t>()) second = static_cast<double>(*i);
    if (!first || !second) return type_error(key, "an array of [integer, number] pairs", e);
    if (!std::isfinite(*second)) return error(key, "must be [integer, number] pairs of finite numbers");
    values.emplace_back(*first, *second);
  }
  out = std::move(values);
}

const toml::table* section_reader::subtable(std::string_view key) {
  auto* n = lookup(key);
  if (!n) return nullptr;
  auto* t = n->as_table();
  if (!t) type_error(key, "a table", *n);
  return t;
}

void section_reader::finish() {
  if (!table_) return;
  for (auto& [k, v] : *table_) {
    if (!seen_.contains(k.str())) errors_.push_back("unknown config key '" + qualified(k.str()) + "'");
  }
}

}  // namespace caf_agent::runtime
