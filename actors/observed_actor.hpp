#pragma once
/// actors/observed_actor.hpp: a stateful actor that counts what it handles.
///
/// `caf::stateful_actor<S, Base>` with one override: every message it consumes (requests,
/// responses, system messages) is timed and counted per message type into the actor's
/// cell of the process registry (observe/registry.hpp), with its mailbox depth. An
/// actor opts in by naming its type `observed_actor<S>` instead of
/// `caf::stateful_actor<S>` (a typed actor: `observed_actor<S, H::base>` instead of
/// `H::stateful_base<S>`, H its `caf::typed_actor` handle); its kind is `S::name`. Exits
/// with an error are counted with their reason. Nothing else changes: the behavior, spawn
/// and handles are CAF's.
///
/// Mailbox depth is what the actor's queue holds (CAF 0.17 moves new arrivals from its
/// lock-free inbox into the queue at the start of every scheduling round, so a backlog
/// shows within one round).

#include <chrono>
#include <memory>

#include <caf/stateful_actor.hpp>

#include "observe/registry.hpp"

namespace caf_agent {

namespace detail {

/// Registers `self` as an actor of `kind` and removes it when it exits (null when off).
std::shared_ptr<observe::actor_cell> observe_actor(caf::abstract_actor* self, const char* kind);

/// The key of the message's type (its first element; atoms by value).
observe::type_key message_key(const caf::type_erased_tuple& content);

/// The name of a key: a protocol message's name, an atom's text, else the C++ type.
std::string message_name(const void* key);

}  // namespace detail

/// A stateful actor whose messages are counted (see the file comment); `Base` is
/// `caf::event_based_actor` or a typed handle's `base` (`caf::typed_event_based_actor`).
template <class State, class Base = caf::event_based_actor>
class observed_actor : public caf::stateful_actor<State, Base> {
 public:
  using super = caf::stateful_actor<State, Base>;

  template <class... Ts>
  explicit observed_actor(caf::actor_config& cfg, Ts&&... xs) : super(cfg, std::forward<Ts>(xs)...) {
    cell_ = detail::observe_actor(this, State::name);
  }

  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    if (!cell_) return super::consume(x);
    auto key = detail::message_key(x.content());
    auto t0 = std::chrono::steady_clock::now();
    auto result = super::consume(x);
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    auto depth = static_cast<int64_t>(this->mailbox().queue().total_task_size());
    cell_->handled(key, &detail::message_name, &key, depth, ns);
    return result;
  }

 private:
  std::shared_ptr<observe::actor_cell> cell_;
};

}  // namespace caf_agent
