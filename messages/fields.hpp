#pragma once
/// messages/fields.hpp: one field list per message, used by both CAF and msgpack.
///
/// CAF_AGENT_FIELDS(type, a, b, ...) inside a struct gives it
///   - a msgpack map form (MSGPACK_DEFINE_MAP), used for everything written to disk, and
///   - apply_fields(f), through which the generic `inspect` below serves CAF's
///     serializers and to_string, and
///   - field-wise equality.
/// Listing the fields once keeps the two forms from drifting apart.

#include <concepts>

#include <caf/meta/type_name.hpp>
#include <msgpack.hpp>

#define CAF_AGENT_FIELDS(type, ...)                                 \
  MSGPACK_DEFINE_MAP(__VA_ARGS__)                                   \
  static constexpr const char* message_name = #type;                \
  template <class F>                                                \
  auto apply_fields(F&& f) {                                        \
    return f(__VA_ARGS__);                                          \
  }                                                                 \
  friend bool operator==(const type&, const type&) = default;

namespace caf_agent::messages {

/// A type declared with CAF_AGENT_FIELDS.
template <class T>
concept has_fields = requires(T& x) {
  { T::message_name } -> std::convertible_to<const char*>;
};

/// CAF's inspector hook for every message type (found by argument-dependent lookup).
template <class Inspector, has_fields T>
typename Inspector::result_type inspect(Inspector& f, T& x) {
  return x.apply_fields(
      [&](auto&... xs) { return f(caf::meta::type_name(T::message_name), xs...); });
}

}  // namespace caf_agent::messages
