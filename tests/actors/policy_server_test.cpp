// tests/actors/policy_server_test.cpp: the one policy server over a fake backend of each mode.
// Immediate and asynchronous backends run on CAF's test coordinator (tests/actors/
// deterministic.hpp): a simulated latency is waited out on the simulated clock, an
// asynchronous reply comes from another thread and is delivered from the actor's own. A
// blocking backend needs the server's detached workers, so it runs on the real scheduler.
// Failure paths: a backend's error completion, a refused publication, a duplicate reply.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include <caf/all.hpp>

#include "actors/policy_server.hpp"
#include "messages/type_ids.hpp"
#include "tests/actors/deterministic.hpp"

using namespace caf_agent;
using namespace caf_agent::messages;
using namespace std::chrono_literals;
using rollout::backend_mode;
using rollout::backend_reply;

namespace {

generate_request request(uint64_t id, int32_t turn = 0) {
  generate_request r;
  r.request_id = id;
  r.episode_id = 1;
  r.turn = turn;
  return r;
}

/// Answers at once with "turn N" and a simulated latency; a publication fails with
/// `publish_error` when set.
class immediate_backend final : public rollout::policy_backend {
 public:
  std::chrono::microseconds delay{0};
  std::string publish_error;

  backend_reply generate(const generate_request& req) override {
    backend_reply r;
    r.completion.request_id = req.request_id;
    r.completion.text = "turn " + std::to_string(req.turn);
    r.delay = delay;
    return r;
  }
  backend_mode mode() const override { return backend_mode::immediate; }
  std::string name() const override { return "immediate"; }
  std::string publish_weights(const std::string& path, uint64_t version) override {
    return publish_error.empty() ? policy_backend::publish_weights(path, version) : publish_error;
  }
};

/// Holds every request's callback until the test completes it from a thread of its own.
class async_backend final : public rollout::policy_backend {
 public:
  backend_reply generate(const generate_request&) override {
    ADD_FAILURE() << "the server must submit() to an asynchronous backend, not generate()";
    return {};
  }
  void submit(generate_request req, rollout::reply_callback done) override {
    std::lock_guard lock{mutex_};
    held_.emplace_back(std::move(req), std::move(done));
  }
  backend_mode mode() const override { return backend_mode::asynchronous; }
  std::string name() const override { return "async"; }
  std::map<std::string, double> stats() const override {
    std::lock_guard lock{mutex_};
    return {{"held", double(held_.size())}};
  }

  size_t held() const {
    std::lock_guard lock{mutex_};
    return held_.size();
  }
  const generate_request& request_at(size_t i) const { return held_.at(i).first; }
  /// Calls request i's callback with `c` on another thread (joined before it returns).
  std::thread::id complete(size_t i, completion c) {
    std::thread::id id;
    std::thread t([&] {
      id = std::this_thread::get_id();
      held_.at(i).second({std::move(c), {}});
    });
    t.join();
    return id;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<generate_request, rollout::reply_callback>> held_;
};

completion reply_of(uint64_t request_id, std::string text) {
  completion c;
  c.request_id = request_id;
  c.text = std::move(text);
  c.policy_version = 4;
  return c;
}

struct policy_server_test : caf_agent::testing::deterministic {
  std::map<std::string, double> stats(const policy_actor& server) {
    return ask<std::map<std::string, double>>(server, atoms::stats::value);
  }
};

TEST_F(policy_server_test, an_immediate_reply_waits_out_its_latency_on_the_clock) {
  auto backend = std::make_shared<immediate_backend>();
  backend->delay = 50ms;
  auto server = spawn_policy_server(sys(), backend);
  run();
  self->send(server, weights_published{3, "/weights/v3"});
  run();
  EXPECT_EQ(self_receive<std::string>(), std::string{});
  self->send(server, request(11, 2));
  run();
  EXPECT_FALSE(self_receive<completion>()) << "answered before its latency";
  EXPECT_EQ(stats(server).at("pending"), 1);
  advance(49ms);
  EXPECT_FALSE(self_receive<completion>()) << "answered 1 ms early";
  advance(1ms);
  auto c = self_receive<completion>();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->request_id, 11u);
  EXPECT_EQ(c->text, "turn 2");
  EXPECT_EQ(c->latency_us, 50000) << "the simulated latency is the completion's";
  EXPECT_EQ(c->policy_version, 3u) << "a backend's reply without a version reports the published one";
  EXPECT_EQ(stats(server).at("pending"), 0);
}

TEST_F(policy_server_test, an_immediate_reply_without_latency_comes_in_order_without_a_timer) {
  auto server = spawn_policy_server(sys(), std::make_shared<immediate_backend>());
  run();
  self->send(server, request(1, 0));
  self->send(server, request(2, 1));
  run();
  auto first = self_receive<completion>(), second = self_receive<completion>();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->request_id, 1u);
  EXPECT_EQ(second->request_id, 2u);
  EXPECT_EQ(first->latency_us, 0);
  EXPECT_FALSE(fire_next_timer()) << "no timer for a reply without latency";
}

TEST_F(policy_server_test, a_refused_publication_answers_its_error_and_keeps_the_version) {
  auto backend = std::make_shared<immediate_backend>();
  backend->publish_error = "weights v2: bad checkpoint";
  auto server = spawn_policy_server(sys(), backend);
  run();
  self->send(server, weights_published{2, "/broken"});
  run();
  EXPECT_EQ(self_receive<std::string>(), std::string{"weights v2: bad checkpoint"});
  self->send(server, request(5));
  run();
  auto c = self_receive<completion>();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->policy_version, 0u);
}

TEST_F(policy_server_test, an_asynchronous_reply_from_another_thread_is_delivered_by_the_actor) {
  auto backend = std::make_shared<async_backend>();
  auto server = spawn_policy_server(sys(), backend);
  run();
  self->send(server, request(21));
  self->send(server, request(22));
  run();
  ASSERT_EQ(backend->held(), 2u) << "both requests are with the backend at once";
  auto st = stats(server);
  EXPECT_EQ(st.at("pending"), 2);
  EXPECT_EQ(st.at("held"), 2) << "the backend's own counters are in the answer";
  // The second finishes first: its reply goes out alone, the first still waits.
  EXPECT_NE(backend->complete(1, reply_of(22, "second")), std::this_thread::get_id());
  EXPECT_FALSE(self_receive<completion>()) << "not delivered on the backend's thread";
  run();
  auto c = self_receive<completion>();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->request_id, 22u);
  EXPECT_EQ(c->text, "second");
  EXPECT_EQ(c->policy_version, 4u) << "the backend's version is kept";
  EXPECT_FALSE(self_receive<completion>());
  EXPECT_EQ(stats(server).at("pending"), 1);
}

TEST_F(policy_server_test, a_backend_error_completion_reaches_the_caller_and_a_duplicate_is_dropped) {
  auto backend = std::make_shared<async_backend>();
  auto server = spawn_policy_server(sys(), backend);
  run();
  self->send(server, request(31));
  run();
  ASSERT_EQ(backend->held(), 1u);
  completion failure;
  failure.request_id = 31;
  failure.finish_reason = completion_finish::error;
  failure.error = "libtorch engine: device lost";
  backend->complete(0, failure);
  run();
  auto c = self_receive<completion>();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->finish_reason, completion_finish::error);
  EXPECT_EQ(c->error, "libtorch engine: device lost");
  // A backend that calls back twice: the request was answered, the second reply goes nowhere.
  backend->complete(0, reply_of(31, "late"));
  run();
  EXPECT_FALSE(self_receive<completion>());
  EXPECT_EQ(stats(server).at("pending"), 0);
}

/// Blocks every generate() until `width` calls are running at once (or 5 s passed), so a
/// server that runs them one after another is caught; notes the threads they ran on.
class blocking_backend final : public rollout::policy_backend {
 public:
  explicit blocking_backend(int width) : width_(width) {}
  std::string publish_error;

  backend_reply generate(const generate_request& req) override {
    std::unique_lock lock{mutex_};
    threads_.insert(std::this_thread::get_id());
    ++running_;
    // Rationale: 5 s is far beyond a scheduling delay; a server with fewer workers fails.
    const bool together = changed_.wait_for(lock, 5s, [&] { return running_ >= width_; });
    changed_.notify_all();
    backend_reply r;
    r.completion.request_id = req.request_id;
    if (req.turn < 0) {
      r.completion.finish_reason = completion_finish::error;
      r.completion.error = "openai server: connection refused";
    } else {
      r.completion.text = together ? "together" : "alone";
    }
    return r;
  }
  backend_mode mode() const override { return backend_mode::blocking; }
  std::string name() const override { return "blocking"; }
  std::string publish_weights(const std::string& path, uint64_t version) override {
    std::lock_guard lock{mutex_};
    threads_.insert(std::this_thread::get_id());
    return publish_error.empty() ? policy_backend::publish_weights(path, version) : publish_error;
  }
  std::set<std::thread::id> threads() {
    std::lock_guard lock{mutex_};
    return threads_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int width_;
  int running_ = 0;
  std::set<std::thread::id> threads_;
};

struct blocking_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  blocking_fixture() {
    cfg.add_message_types<caf::id_block::caf_agent>();
    cfg.set("logger.console-verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
  }
  /// The server's answer to a publication (a CAF error as text, "unanswered" after 10 s).
  std::string publish(const policy_actor& server, uint64_t version, const std::string& path) {
    caf::scoped_actor self{*sys};
    std::string out = "unanswered";
    self->request(server, 10s, weights_published{version, path})
        .receive([&](std::string& e) { out = e; }, [&](caf::error& e) { out = to_string(e); });
    return out;
  }
};

TEST(policy_server_blocking, requests_run_on_detached_workers_side_by_side) {
  blocking_fixture f;
  auto backend = std::make_shared<blocking_backend>(2);
  auto server = spawn_policy_server(*f.sys, backend, 2);
  EXPECT_EQ(f.publish(server, 5, "/weights/v5"), "");
  caf::scoped_actor self{*f.sys};
  self->send(server, request(41, 0));
  self->send(server, request(42, -1));  // this one fails in the backend
  std::map<uint64_t, completion> got;
  for (int i = 0; i < 2; ++i) self->receive([&](completion& c) { got[c.request_id] = c; }, caf::after(10s) >> [] {});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[41].text, "together") << "two workers answer two requests at once";
  EXPECT_EQ(got[41].policy_version, 5u) << "the version published on the worker";
  EXPECT_EQ(got[42].finish_reason, completion_finish::error);
  EXPECT_EQ(got[42].error, "openai server: connection refused");
  auto threads = backend->threads();
  EXPECT_EQ(threads.size(), 2u) << "two worker threads ran the backend";
  EXPECT_FALSE(threads.contains(std::this_thread::get_id()));
  caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
}

TEST(policy_server_blocking, a_refused_publication_runs_on_a_worker_and_answers_its_error) {
  blocking_fixture f;
  auto backend = std::make_shared<blocking_backend>(1);
  backend->publish_error = "openai server reload: 500";
  auto server = spawn_policy_server(*f.sys, backend, 1);
  EXPECT_EQ(f.publish(server, 6, "/weights/v6"), "openai server reload: 500");
  EXPECT_EQ(backend->weights_version(), 0u);
  auto threads = backend->threads();
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_FALSE(threads.contains(std::this_thread::get_id()));
  caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
}

}  // namespace
