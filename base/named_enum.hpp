#pragma once
/// base/named_enum.hpp: enums whose values have names (header-only, standard library only, so
/// every layer may use it: the protocol's enums in messages/enums.hpp, the config's closed sets
/// such as policy::policy_backend).
///
/// `CAF_AGENT_ENUM_NAMES(E, names...)`, written in E's namespace, lists the names once, in the
/// order of the values; `name_of` and `parse_name` convert, `names_list` joins them for an error
/// message, `to_string` serves CAF's to_string and log text, and the JSON hooks (nlohmann's
/// adl_serializer finds them) write the name and reject an unknown one naming the names.
///
/// Rationale: the names are found through an argument-dependent function the macro defines
/// beside E, not through a class specialized per enum, so an enum of any namespace can have
/// names without reopening this one.

#include <array>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace caf_agent::base {

/// An enum whose values have names (CAF_AGENT_ENUM_NAMES was written for it).
template <class E>
concept named_enum = std::is_enum_v<E> && requires(E e) {
  caf_agent_enum_names(e);
};

/// The names of a named enum, in the order of its values (static storage).
template <named_enum E>
struct enum_names {
  static constexpr auto names = caf_agent_enum_names(E{});
};

/// The name of e ("?" for a value outside the list, which only a cast can make).
template <named_enum E>
constexpr std::string_view name_of(E e) {
  const auto& names = enum_names<E>::names;
  const auto i = static_cast<std::size_t>(e);
  return i < names.size() ? names[i] : std::string_view{"?"};
}

/// The value named s, or nullopt when s names none.
template <named_enum E>
constexpr std::optional<E> parse_name(std::string_view s) {
  const auto& names = enum_names<E>::names;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

/// The names of E joined by ", " (for error messages naming what is allowed).
template <named_enum E>
std::string names_list() {
  std::string out;
  for (auto n : enum_names<E>::names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

/// The value named s; otherwise std::invalid_argument "<what> has no value \"s\" (one of: ...)".
template <named_enum E>
E parse_name_or_throw(std::string_view s, std::string_view what) {
  if (auto v = parse_name<E>(s)) return *v;
  throw std::invalid_argument(std::string{what} + " has no value \"" + std::string{s} +
                              "\" (one of: " + names_list<E>() + ")");
}

}  // namespace caf_agent::base

/// Gives enum E (written in E's namespace) its names, one string per value in order, with
/// `to_string` and the JSON hooks (written as the name; an unknown name throws naming the names).
#define CAF_AGENT_ENUM_NAMES(E, ...)                                                  \
  constexpr auto caf_agent_enum_names(E) {                                            \
    return std::to_array<std::string_view>({__VA_ARGS__});                            \
  }                                                                                   \
  inline std::string to_string(E e) {                                                 \
    return std::string(::caf_agent::base::name_of(e));                                \
  }                                                                                   \
  template <class Json>                                                               \
  void to_json(Json& j, const E& e) {                                                 \
    j = std::string(::caf_agent::base::name_of(e));                                   \
  }                                                                                   \
  template <class Json>                                                               \
  void from_json(const Json& j, E& e) {                                               \
    e = ::caf_agent::base::parse_name_or_throw<E>(j.template get<std::string>(), #E); \
  }
