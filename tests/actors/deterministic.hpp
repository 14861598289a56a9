#pragma once
/// tests/actors/deterministic.hpp: a GoogleTest fixture that runs actors on CAF's test
/// coordinator (scheduler.policy = "testing"): one thread, message order under the test's
/// control, timers on a simulated clock, no sleeps.
///
/// - `run()` delivers messages until no actor has one (timers do not fire);
/// - `fire_next_timer()` / `fire_timers()` / `advance(t)` move the simulated clock
///   (request timeouts, delayed sends) and then run;
/// - `expect<Ts...>(to, from)` checks that `to`'s next message is Ts... (from `from`, when
///   given), delivers it and returns a copy; `next_is<Ts...>(to)` only looks;
/// - `self` is a hidden scoped actor for sending (what it receives, `self_receive` reads).
///
/// Actors under test must not be detached (a detached actor has its own thread): the fakes
/// beside them are event-based actors written in the test. A fake that holds a response
/// promise delivers it in one of its own handlers (the test sends it a message): CAF 0.17
/// crashes when a promise is delivered from outside its actor.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "messages/type_ids.hpp"

namespace caf_agent::testing {

/// A field that is a string or a named enum, as text (the tests compare names).
inline std::string name_of_field(const std::string& s) {
  return s;
}
template <class E>
requires std::is_enum_v<E> std::string name_of_field(E e) {
  return to_string(e);
}

/// The fixture: derive a test struct from it (TEST_F).
class deterministic : public ::testing::Test {
 public:
  /// Rationale: a test that delivers this many messages without going idle is looping.
  static constexpr size_t max_events = 100000;

  deterministic()
      : sys_(configure(cfg_)),
        sched_(dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())),
        self(sys_, true) {
    // Actors a test leaves alive (fakes holding each other) must not block the teardown.
    sys_.await_actors_before_shutdown(false);
  }

  ~deterministic() override { run(); }

  caf::actor_system& sys() { return sys_; }
  caf::scheduler::test_coordinator& sched() { return sched_; }

  /// Delivers messages until no actor has one; returns how many. Timers do not fire.
  size_t run() {
    size_t n = 0;
    while (sched_.try_run_once())
      if (++n >= max_events) {
        ADD_FAILURE() << "no idle point after " << n << " messages";
        break;
      }
    return n;
  }

  /// True when no actor has a message waiting.
  bool idle() const { return !sched_.has_job(); }

  /// Fires the earliest pending timer (a request timeout, a delayed send), then runs.
  bool fire_next_timer() {
    if (!sched_.trigger_timeout()) return false;
    run();
    return true;
  }

  /// Fires every pending timer (in time order, also those the firing ones start), then runs.
  size_t fire_timers() {
    size_t n = 0;
    while (fire_next_timer()) ++n;
    return n;
  }

  /// Moves the clock on by `t` (firing what falls due), then runs.
  size_t advance(caf::timespan t) {
    auto n = sched_.advance_time(t);
    run();
    return n;
  }

  /// The next message waiting for `to` as text ("" when none).
  std::string next_message(const caf::actor& to) {
    auto* e = peek(to);
    return e ? e->content().stringify() : std::string{};
  }

  /// True when `to`'s next message is of types Ts... (nothing is delivered).
  template <class... Ts>
  bool next_is(const caf::actor& to) {
    auto* e = peek(to);
    return e && e->content().match_elements<Ts...>();
  }

  /// Checks that `to`'s next message is Ts... (sent by `from` unless null), delivers it
  /// and returns a copy. A failed check fails the test and returns default values.
  template <class... Ts>
  std::tuple<Ts...> expect(const caf::actor& to, const caf::actor& from = {}) {
    std::tuple<Ts...> out;
    auto* e = peek(to);
    if (!e) {
      ADD_FAILURE() << "expected a message of " << type_names<Ts...>() << " for " << to.id() << ": none waits";
      return out;
    }
    if (!e->content().match_elements<Ts...>()) {
      ADD_FAILURE() << "expected " << type_names<Ts...>() << " for " << to.id() << ", next is "
                    << e->content().stringify();
      return out;
    }
    if (from && e->sender != caf::actor_cast<caf::strong_actor_ptr>(from))
      ADD_FAILURE() << "message " << e->content().stringify() << " for " << to.id() << " came from "
                    << (e->sender ? std::to_string(e->sender->id()) : std::string{"nobody"}) << ", not " << from.id();
    out = copy<Ts...>(e->content(), std::index_sequence_for<Ts...>{});
    sched_.run_once();
    return out;
  }

  /// The one message Ts... waiting for `to`, as a single value.
  template <class T>
  T expect_one(const caf::actor& to, const caf::actor& from = {}) {
    return std::get<0>(expect<T>(to, from));
  }

  /// What the scoped self has received of type T (nullopt when nothing matching waits).
  template <class T>
  std::optional<T> self_receive() {
    std::optional<T> out;
    self->receive([&](T& x) { out = std::move(x); }, caf::after(std::chrono::seconds(0)) >> [] {});
    return out;
  }

  /// What `to` answers to `xs...`: asked by a probe actor, answered within run() (a default
  /// T when no answer comes).
  template <class T, class Handle, class... Ts>
  T ask(const Handle& to, Ts... xs) {
    auto out = std::make_shared<T>();
    sys_.spawn([=](caf::event_based_actor* probe) {
      probe->request(to, caf::infinite, xs...).then([=](T& x) { *out = std::move(x); });
    });
    run();
    return *out;
  }

  /// Ends `a` with `reason` and delivers what follows from it.
  void stop(const caf::actor& a, caf::exit_reason reason = caf::exit_reason::user_shutdown) {
    caf::anon_send_exit(a, reason);
    run();
  }

 private:
  static caf::actor_system_config& configure(caf::actor_system_config& cfg) {
    cfg.add_message_types<caf::id_block::caf_agent>();
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.file-verbosity", caf::atom("quiet"));
    cfg.set("logger.console-verbosity", caf::atom("quiet"));
    return cfg;
  }

  /// The next mailbox element of `to` (its job moved to the front of the queue), or null.
  caf::mailbox_element* peek(const caf::actor& to) {
    if (!to || !sched_.prioritize(to)) return nullptr;
    auto* sa = dynamic_cast<caf::scheduled_actor*>(caf::actor_cast<caf::abstract_actor*>(to));
    return sa ? sa->mailbox().peek() : nullptr;
  }

  template <class... Ts, size_t... Is>
  static std::tuple<Ts...> copy(const caf::type_erased_tuple& xs, std::index_sequence<Is...>) {
    return std::tuple<Ts...>{xs.get_as<Ts>(Is)...};
  }

  template <class... Ts>
  static std::string type_names() {
    std::string out;
    ((out += (out.empty() ? "" : ", ") + std::string{typeid(Ts).name()}), ...);
    return out;
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;

 public:
  caf::scoped_actor self;
};

}  // namespace caf_agent::testing
