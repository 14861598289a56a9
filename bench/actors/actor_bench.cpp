// bench/actors/actor_bench.cpp: local request/response messages per second
// between two CAF actors on this machine.
//
// Two shapes: one request in flight at a time (latency-bound), and a window of
// `window` requests in flight (throughput). A request and its response count as
// one round trip; messages = 2 x round trips.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <caf/all.hpp>

#include "messages/type_ids.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

caf::behavior responder() {
  return {[](int32_t x) { return x + 1; }};
}

struct driver_state {
  caf::actor target;
  int64_t remaining = 0;
  int64_t in_flight = 0;
  caf::response_promise done;
  static inline const char* name = "bench_driver";
};

void issue(caf::stateful_actor<driver_state>* self) {
  auto& st = self->state;
  if (st.remaining == 0) return;
  --st.remaining;
  ++st.in_flight;
  self->request(st.target, caf::infinite, int32_t{1}).then([=](int32_t) {
    --self->state.in_flight;
    issue(self);
    if (self->state.in_flight == 0 && self->state.remaining == 0) self->state.done.deliver(true);
  });
}

caf::behavior driver(caf::stateful_actor<driver_state>* self, caf::actor target) {
  self->state.target = target;
  return {[=](int64_t total, int64_t window) -> caf::result<bool> {
    self->state.remaining = total;
    self->state.done = self->make_response_promise();
    for (int64_t i = 0; i < window && self->state.remaining > 0; ++i) issue(self);
    return self->state.done;
  }};
}

double run(caf::actor_system& sys, int64_t total, int64_t window) {
  auto target = sys.spawn(responder);
  auto d = sys.spawn(driver, target);
  caf::scoped_actor self{sys};
  auto start = clock_type::now();
  self->request(d, caf::infinite, total, window).receive([](bool) {}, [](caf::error&) {});
  double secs = std::chrono::duration<double>(clock_type::now() - start).count();
  self->send_exit(d, caf::exit_reason::user_shutdown);
  self->send_exit(target, caf::exit_reason::user_shutdown);
  return static_cast<double>(total) / secs;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t total = argc > 1 ? std::atoll(argv[1]) : 1000000;
  caf::actor_system_config cfg;
  cfg.add_message_types<caf::id_block::caf_agent>();
  caf::actor_system sys{cfg};
  run(sys, total / 10, 1);  // warm-up
  for (int64_t window : {1, 16, 256}) {
    double rt = run(sys, total, window);
    std::printf("window=%-4lld round_trips/s=%12.0f messages/s=%12.0f\n", static_cast<long long>(window), rt, 2 * rt);
  }
  return 0;
}
