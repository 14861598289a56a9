// actors/observed_actor.cpp: see observed_actor.hpp.
#include "actors/observed_actor.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <typeindex>
#include <unordered_map>

#include <caf/all.hpp>

#include "messages/type_ids.hpp"

namespace caf_agent::detail {

namespace {

const std::unordered_map<std::type_index, std::string>& known_names() {
  static const auto table = [] {
    std::unordered_map<std::type_index, std::string> t;
#define CAF_AGENT_NAME_OF(name) t.emplace(typeid(messages::name), #name);
    CAF_AGENT_MESSAGE_TYPES(CAF_AGENT_NAME_OF)
#undef CAF_AGENT_NAME_OF
    t.emplace(typeid(caf::down_msg), "down_msg");
    t.emplace(typeid(caf::exit_msg), "exit_msg");
    t.emplace(typeid(caf::error), "error");
    t.emplace(typeid(caf::timeout_msg), "timeout_msg");
    t.emplace(typeid(std::string), "string");
    t.emplace(typeid(bool), "bool");
    return t;
  }();
  return table;
}

}  // namespace

std::shared_ptr<observe::actor_cell> observe_actor(caf::abstract_actor* self, const char* kind) {
  auto& reg = observe::metrics_registry::process();
  if (!reg.enabled()) return nullptr;
  auto cell = reg.add(kind, self->id());
  self->attach_functor([cell](const caf::error& reason) {
    // Rationale: a shutdown (user_shutdown) or a lost link to a finished peer is how
    // actors end here, not a failure of theirs.
    bool failed = reason && reason != caf::exit_reason::user_shutdown && reason != caf::exit_reason::normal &&
                  reason != caf::exit_reason::kill && reason != caf::exit_reason::remote_link_unreachable;
    observe::metrics_registry::process().remove(cell, failed ? caf::to_string(reason) : std::string{});
  });
  return cell;
}

observe::type_key message_key(const caf::type_erased_tuple& content) {
  if (content.empty()) return {};
  auto rtti = content.type(0);
  observe::type_key key{rtti.second, 0};
  if (rtti.first == caf::type_nr<caf::atom_value>::value) {
    key.type = &typeid(caf::atom_value);
    key.atom = static_cast<uint64_t>(content.get_as<caf::atom_value>(0));
  } else if (rtti.first != 0 && !rtti.second) {
    key.type = reinterpret_cast<const void*>(static_cast<uintptr_t>(rtti.first));  // builtin type number
    key.atom = 1;
  }
  return key;
}

std::string message_name(const void* ptr) {
  auto& key = *static_cast<const observe::type_key*>(ptr);
  if (!key.type) return "empty";
  if (key.type == &typeid(caf::atom_value)) return caf::to_string(static_cast<caf::atom_value>(key.atom));
  if (key.atom == 1) {
    auto nr = reinterpret_cast<uintptr_t>(key.type);
    // CAF's names of its built-in types, e.g. "@down", "@str" (index: type number - 1).
    return nr > 0 && nr < caf::type_nrs ? caf::numbered_type_names[nr - 1] : "builtin";
  }
  auto& info = *static_cast<const std::type_info*>(key.type);
  auto& names = known_names();
  if (auto it = names.find(std::type_index{info}); it != names.end()) return it->second;
  int status = 0;
  char* demangled = abi::__cxa_demangle(info.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && demangled ? demangled : info.name();
  std::free(demangled);
  return out;
}

}  // namespace caf_agent::detail
