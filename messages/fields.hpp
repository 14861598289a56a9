#pragma once
/// messages/fields.hpp: one field list per message, used by both CAF and msgpack.
///
/// CAF_AGENT_FIELDS(type, a, b, ...) inside a struct gives it
///   - a msgpack map form (MSGPACK_DEFINE_MAP), used for everything written to disk, and
///   - apply_fields(f), through which the generic `inspect` below serves CAF's
///     serializers and to_string, and
///   - field-wise equality.
/// Listing the fields once keeps the two forms from drifting apart.
///
/// Named enums (messages/enums.hpp) are written to msgpack as their names (below), so what
/// is on disk reads the same as when the fields were strings; an unknown name is a type
/// error. CAF's binary form carries their number (peers of one protocol_version agree).

#include <concepts>
#include <string_view>

#include <caf/meta/type_name.hpp>
#include <msgpack.hpp>

#include "messages/enums.hpp"

#define CAF_AGENT_FIELDS(type, ...)                  \
  MSGPACK_DEFINE_MAP(__VA_ARGS__)                    \
  static constexpr const char* message_name = #type; \
  template <class F>                                 \
  auto apply_fields(F&& f) {                         \
    return f(__VA_ARGS__);                           \
  }                                                  \
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
  return x.apply_fields([&](auto&... xs) { return f(caf::meta::type_name(T::message_name), xs...); });
}

}  // namespace caf_agent::messages

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  /// A named enum reads from its name (a msgpack string).
  template <caf_agent::messages::named_enum E>
  struct convert<E> {
    const msgpack::object& operator()(const msgpack::object& o, E& v) const {
      if (o.type != msgpack::type::STR) throw msgpack::type_error();
      auto e = caf_agent::messages::parse_name<E>(std::string_view(o.via.str.ptr, o.via.str.size));
      if (!e) throw msgpack::type_error();
      v = *e;
      return o;
    }
  };

  /// A named enum writes its name.
  template <caf_agent::messages::named_enum E>
  struct pack<E> {
    template <class Stream>
    msgpack::packer<Stream>& operator()(msgpack::packer<Stream>& o, const E& v) const {
      const auto name = caf_agent::messages::name_of(v);
      o.pack_str(static_cast<uint32_t>(name.size()));
      o.pack_str_body(name.data(), static_cast<uint32_t>(name.size()));
      return o;
    }
  };

  /// A named enum as an object: its name (static storage, so the zone need not copy it).
  template <caf_agent::messages::named_enum E>
  struct object_with_zone<E> {
    void operator()(msgpack::object::with_zone& o, const E& v) const {
      const auto name = caf_agent::messages::name_of(v);
      o.type = msgpack::type::STR;
      o.via.str.ptr = name.data();
      o.via.str.size = static_cast<uint32_t>(name.size());
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack
