// tests/actors/gpu_pool_deterministic_test.cpp: the GPU pool manager and its slot actors on
// CAF's test coordinator, over scripted (non-blocking) slot backends whose jobs take one
// simulated second each: dispatch to free slots, a worker that dies mid-job (retry and
// quarantine as gpu_pool/judgement says), and queue-full back-pressure.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include <caf/all.hpp>

#include "actors/gpu_pool.hpp"
#include "gpu_pool/slot_backend.hpp"
#include "messages/type_ids.hpp"
#include "tests/actors/deterministic.hpp"

using namespace caf_agent;
using namespace caf_agent::messages;
using namespace std::chrono_literals;

namespace {

struct run_entry {
  int slot;
  uint64_t job;
};

/// What every slot ran, in order.
struct pool_trace {
  std::vector<run_entry> runs;
};

/// A slot backend whose job "runs" for one simulated second (the slot's delayed reply);
/// `crash(req)` says whether the worker dies under this job, `raise(req)` whether the backend
/// itself throws (which takes its slot actor down).
class scripted_slot : public gpu_pool::slot_backend {
 public:
  scripted_slot(int index, std::shared_ptr<pool_trace> trace, std::function<bool(const eval_request&)> crash,
                std::function<bool(const eval_request&)> raise = {})
      : index_(index), trace_(std::move(trace)), crash_(std::move(crash)), raise_(std::move(raise)) {}
  gpu_pool::slot_reply run(const eval_request& req) override {
    trace_->runs.push_back({index_, req.job_id});
    if (raise_ && raise_(req)) throw std::runtime_error("slot backend bug");
    gpu_pool::job_outcome o{gpu_pool::outcome::verdict, req.mode, {}, ""};
    if (crash_ && crash_(req)) {
      o.what = gpu_pool::outcome::worker_crashed;
      o.detail = "eval worker exited (signal 9) during job " + std::to_string(req.job_id);
    } else {
      o.v.correct = true;
      o.v.reason = "slot" + std::to_string(index_);
    }
    auto reply = gpu_pool::reply_of(gpu_pool::judge(o), req);
    reply.delay = std::chrono::seconds(1);
    return reply;
  }
  bool blocking() const override { return false; }

 private:
  int index_;
  std::shared_ptr<pool_trace> trace_;
  std::function<bool(const eval_request&)> crash_;
  std::function<bool(const eval_request&)> raise_;
};

/// An episode's side: sends requests, keeps every answer in arrival order.
struct client_log {
  std::vector<eval_result> results;
  std::vector<pool_credits> credits;
};

caf::behavior client(caf::event_based_actor* self, pool_actor pool, std::shared_ptr<client_log> log) {
  self->send(pool, atoms::subscribe::value);
  return {
      [=](eval_request& req) {
        self->request(pool, caf::infinite, std::move(req)).then([=](eval_result& r) { log->results.push_back(r); });
      },
      [=](pool_credits& c) { log->credits.push_back(c); },
  };
}

struct pool_test : caf_agent::testing::deterministic {
  std::shared_ptr<pool_trace> trace = std::make_shared<pool_trace>();
  std::shared_ptr<client_log> log = std::make_shared<client_log>();
  pool_actor pool;
  caf::actor episodes;

  void make_pool(int slots, size_t queue_capacity, int quarantine_after,
                 std::function<bool(int slot, const eval_request&)> crash = {},
                 std::function<bool(int slot, const eval_request&)> raise = {}) {
    std::vector<std::unique_ptr<gpu_pool::slot_backend>> backends;
    for (int i = 0; i < slots; ++i) {
      std::function<bool(const eval_request&)> c, t;
      if (crash) c = [crash, i](const eval_request& r) { return crash(i, r); };
      if (raise) t = [raise, i](const eval_request& r) { return raise(i, r); };
      backends.push_back(std::make_unique<scripted_slot>(i, trace, c, t));
    }
    gpu_pool::pool_config c;
    c.queue_capacity = static_cast<int32_t>(queue_capacity);
    c.quarantine_after_failures = quarantine_after;
    pool = spawn_gpu_pool(sys(), c, std::move(backends));
    run();
    episodes = sys().spawn(client, pool, log);
    run();
  }

  void submit(uint64_t job, eval_mode mode = eval_mode::verify) {
    eval_request r;
    r.job_id = job;
    r.episode_id = job;  // one job per episode
    r.mode = mode;
    r.files = {{"model_new.py", "# submission"}};
    caf::anon_send(episodes, std::move(r));
    run();
  }

  std::vector<uint64_t> answered() const {
    std::vector<uint64_t> out;
    for (auto& r : log->results) out.push_back(r.job_id);
    return out;
  }

  std::map<std::string, double> stats() {
    auto out = std::make_shared<std::map<std::string, double>>();
    sys().spawn([=, p = pool](caf::event_based_actor* probe) {
      probe->request(p, caf::infinite, atoms::stats::value).then([=](std::map<std::string, double>& m) {
        *out = std::move(m);
      });
    });
    run();
    return *out;
  }
};

TEST_F(pool_test, jobs_go_to_free_slots_and_wait_for_one_otherwise) {
  make_pool(2, 8, 3);
  submit(1);
  submit(2);
  submit(3);
  ASSERT_EQ(trace->runs.size(), 2u) << "one job per slot";
  EXPECT_EQ(trace->runs[0].slot, 0);
  EXPECT_EQ(trace->runs[1].slot, 1);
  auto s = stats();
  EXPECT_EQ(s["busy"], 2);
  EXPECT_EQ(s["queued"], 1);
  EXPECT_TRUE(log->results.empty()) << "nothing is answered before its slot is done";
  fire_next_timer();  // slot 0 finishes job 1 and takes job 3
  EXPECT_EQ(answered(), (std::vector<uint64_t>{1}));
  ASSERT_EQ(trace->runs.size(), 3u);
  EXPECT_EQ(trace->runs[2].slot, 0);
  EXPECT_EQ(trace->runs[2].job, 3u);
  fire_timers();
  EXPECT_EQ(answered(), (std::vector<uint64_t>{1, 2, 3}));
  for (auto& r : log->results) {
    EXPECT_EQ(r.status, eval_status::ok);
    EXPECT_TRUE(r.correct);
  }
  EXPECT_EQ(stats()["jobs_done"], 3);
}

TEST_F(pool_test, finals_go_before_intermediate_evaluations) {
  make_pool(1, 8, 3);
  submit(1);
  submit(2);
  submit(3, eval_mode::final);
  fire_timers();
  ASSERT_EQ(trace->runs.size(), 3u);
  EXPECT_EQ(trace->runs[1].job, 3u) << "the final evaluation skips the queue";
  EXPECT_EQ(answered(), (std::vector<uint64_t>{1, 3, 2}));
}

TEST_F(pool_test, a_worker_that_dies_mid_job_is_retried_once) {
  int crashes_left = 1;
  make_pool(2, 8, 3, [&](int slot, const eval_request&) { return slot == 0 && crashes_left-- > 0; });
  submit(1);
  fire_timers();
  ASSERT_EQ(trace->runs.size(), 2u) << "the job ran again";
  EXPECT_EQ(trace->runs[0].job, 1u);
  EXPECT_EQ(trace->runs[1].job, 1u);
  ASSERT_EQ(log->results.size(), 1u) << "one answer for the job";
  EXPECT_EQ(log->results[0].status, eval_status::ok);
  EXPECT_TRUE(log->results[0].correct);
  EXPECT_EQ(stats()["infra_failures"], 1);
}

TEST_F(pool_test, a_second_worker_death_is_infrastructure_and_repeated_ones_quarantine_the_slot) {
  make_pool(2, 8, 2, [](int slot, const eval_request&) { return slot == 0; });
  submit(1, eval_mode::final);
  submit(2, eval_mode::final);  // slot 1 takes it; job 1's retry gets slot 0 again
  fire_timers();
  ASSERT_EQ(log->results.size(), 2u);
  auto r1 = log->results[0].job_id == 1 ? log->results[0] : log->results[1];
  auto r2 = log->results[0].job_id == 2 ? log->results[0] : log->results[1];
  EXPECT_EQ(r1.status, eval_status::infra_error) << r1.reason;
  EXPECT_EQ(r1.reward, 0) << "an infrastructure failure is never scored";
  EXPECT_EQ(r2.status, eval_status::ok);
  int on_slot0 = 0;
  for (auto& e : trace->runs) on_slot0 += e.slot == 0;
  EXPECT_EQ(on_slot0, 2) << "job 1 and its one retry";
  auto s = stats();
  EXPECT_EQ(s["healthy"], 1) << "two failures in a row quarantine slot 0";
  ASSERT_FALSE(log->credits.empty());
  EXPECT_EQ(log->credits.back().healthy_slots, 1);
  // Later jobs go to the healthy slot only.
  auto before = trace->runs.size();
  submit(3);
  submit(4);
  fire_timers();
  ASSERT_EQ(trace->runs.size(), before + 2);
  for (size_t i = before; i < trace->runs.size(); ++i) EXPECT_EQ(trace->runs[i].slot, 1);
  EXPECT_EQ(log->results.size(), 4u);
}

TEST_F(pool_test, with_every_slot_quarantined_a_job_is_refused_as_infrastructure) {
  make_pool(1, 8, 1, [](int, const eval_request&) { return true; });
  submit(1);
  fire_timers();
  ASSERT_EQ(log->results.size(), 1u);
  EXPECT_EQ(log->results[0].status, eval_status::infra_error);
  EXPECT_EQ(stats()["healthy"], 0);
  submit(2);
  ASSERT_EQ(log->results.size(), 2u) << "answered at once, not queued forever";
  EXPECT_EQ(log->results[1].status, eval_status::infra_error);
}

TEST_F(pool_test, a_full_queue_parks_requests_until_a_credit_returns) {
  make_pool(1, 1, 3);
  submit(1);  // runs
  submit(2);  // queued: no credits left
  EXPECT_EQ(log->credits.back().free_credits, 0);
  submit(3);  // parked with its promise
  submit(4);
  EXPECT_TRUE(log->results.empty()) << "parked requests are neither refused nor failed";
  auto s = stats();
  EXPECT_EQ(s["queued"], 1);
  EXPECT_EQ(s["parked"], 2);
  EXPECT_EQ(log->credits.back().free_credits, 0);
  EXPECT_EQ(log->credits.back().queued, 3);
  fire_next_timer();
  EXPECT_EQ(answered(), (std::vector<uint64_t>{1}));
  // The queued job took the free slot; parked requests enter the queue at the next
  // completion, so the slot never idles while work waits.
  ASSERT_EQ(trace->runs.size(), 2u);
  EXPECT_EQ(trace->runs[1].job, 2u);
  s = stats();
  EXPECT_EQ(s["busy"], 1);
  EXPECT_EQ(s["parked"] + s["queued"], 2);
  fire_timers();
  EXPECT_EQ(answered(), (std::vector<uint64_t>{1, 2, 3, 4})) << "FIFO, each once";
  EXPECT_EQ(log->credits.back().free_credits, 1);
  EXPECT_EQ(log->credits.back().queued, 0);
  EXPECT_EQ(log->credits.back().busy_slots, 0);
}

TEST_F(pool_test, a_duplicate_job_id_is_rejected_and_the_first_still_answered) {
  make_pool(1, 8, 3);
  submit(1);
  submit(1);
  ASSERT_EQ(log->results.size(), 1u);
  EXPECT_EQ(log->results[0].status, eval_status::rejected);
  fire_timers();
  ASSERT_EQ(log->results.size(), 2u);
  EXPECT_EQ(log->results[1].status, eval_status::ok);
}

TEST_F(pool_test, a_slot_actor_that_dies_leaves_the_pool_and_its_job_runs_elsewhere) {
  make_pool(2, 8, 3, {}, [](int slot, const eval_request&) { return slot == 0; });
  submit(1, eval_mode::final);  // slot 0's backend throws: the slot actor is gone
  ASSERT_GE(trace->runs.size(), 2u) << "the job was given to the other slot at once";
  EXPECT_EQ(trace->runs[0].slot, 0);
  EXPECT_EQ(trace->runs[1].slot, 1);
  EXPECT_EQ(trace->runs[1].job, 1u);
  fire_timers();
  ASSERT_EQ(log->results.size(), 1u) << "one answer for the job";
  EXPECT_EQ(log->results[0].status, eval_status::ok);
  EXPECT_TRUE(log->results[0].correct);
  auto s = stats();
  EXPECT_EQ(s["healthy"], 1) << "the dead slot is out for good";
  EXPECT_EQ(s["busy"], 0);
  ASSERT_FALSE(log->credits.empty());
  EXPECT_EQ(log->credits.back().healthy_slots, 1);
  // Later jobs go to the live slot only, and none waits for the dead one.
  auto before = trace->runs.size();
  submit(2);
  submit(3);
  fire_timers();
  ASSERT_EQ(trace->runs.size(), before + 2);
  for (size_t i = before; i < trace->runs.size(); ++i) EXPECT_EQ(trace->runs[i].slot, 1);
  EXPECT_EQ(answered(), (std::vector<uint64_t>{1, 2, 3}));
}

TEST_F(pool_test, a_job_whose_slots_die_twice_is_answered_as_infrastructure) {
  make_pool(2, 8, 3, {}, [](int, const eval_request& r) { return r.job_id == 1; });
  submit(1, eval_mode::final);
  ASSERT_EQ(log->results.size(), 1u) << "answered, not left waiting for a dead slot";
  EXPECT_EQ(log->results[0].status, eval_status::infra_error);
  EXPECT_EQ(log->results[0].reward, 0) << "an infrastructure failure is never scored";
  EXPECT_NE(log->results[0].reason.find("eval slot failure"), std::string::npos) << log->results[0].reason;
  ASSERT_EQ(trace->runs.size(), 2u) << "the job and its one retry";
  EXPECT_EQ(stats()["healthy"], 0);
  submit(2);
  ASSERT_EQ(log->results.size(), 2u) << "with no slot left a job is refused at once";
  EXPECT_EQ(log->results[1].status, eval_status::infra_error);
  fire_timers();
  EXPECT_EQ(log->results.size(), 2u);
}

}  // namespace
