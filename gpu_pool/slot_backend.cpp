// gpu_pool/slot_backend.cpp: see slot_backend.hpp.
#include "gpu_pool/slot_backend.hpp"

#include <algorithm>
#include <cmath>

#include "gpu_pool/worker_process.hpp"

namespace caf_agent::gpu_pool {

namespace {

class worker_slot final : public slot_backend {
 public:
  explicit worker_slot(const worker_slot_options& o) : opts_(o), worker_(make_config(o)) {}

  static worker_config make_config(const worker_slot_options& o) {
    worker_config c;
    c.python = o.python;
    c.package_dir = o.package_dir;
    c.device = o.device;
    c.threads = o.threads;
    c.stderr_path = o.stderr_path;
    if (!o.build_root.empty()) c.env["CAF_EVAL_BUILD_ROOT"] = o.build_root;
    return c;
  }

  slot_reply run(const messages::eval_request& req) override {
    eval_request w;
    w.job_id = std::to_string(req.job_id);
    w.mode = req.mode;
    w.task_name = req.task.task_id;
    w.model_py = req.task.model_py;
    w.files = req.files;
    w.seed_secret = std::to_string(req.seed) + ":" + std::to_string(req.job_id);
    w.device = opts_.device;
    auto deadline = std::chrono::milliseconds(req.deadline_ms > 0 ? req.deadline_ms : opts_.deadline_ms);
    auto outcome = worker_.evaluate(w, deadline);
    auto reply = reply_of(judge(outcome_of(outcome, w.mode)), req);
    if (!outcome.died_while_idle.empty())
      reply.notice = "eval " + outcome.died_while_idle + "; restarted it before job " + w.job_id;
    if (outcome.response && !outcome.response->infra_error)
      reply.result.cached_build = outcome.response->result.cached_build;
    return reply;
  }
  bool blocking() const override { return true; }
  void stop() override { worker_.stop(); }
  void abort() override { worker_.abort(); }
  int worker_pid() const override { return worker_.pid(); }

 private:
  worker_slot_options opts_;
  worker_process worker_;
};

class worker_builder final : public build_backend {
 public:
  explicit worker_builder(const worker_slot_options& o) : opts_(o), worker_(config(o)) {}

  static worker_config config(const worker_slot_options& o) {
    auto c = worker_slot::make_config(o);
    c.build_only = true;
    return c;
  }

  build_reply build(const messages::eval_request& req) override {
    build_reply out;
    build_request b;
    b.job_id = std::to_string(req.job_id);
    b.files = req.files;
    b.flavour = opts_.device.rfind("cuda", 0) == 0 ? "cuda" : "cpu";
    // The worker kills a compiler at its own build deadline (a verdict on the sources);
    // this deadline is the backstop for a builder that stops answering.
    auto deadline = std::chrono::milliseconds(req.deadline_ms > 0 ? req.deadline_ms : opts_.deadline_ms);
    auto outcome = worker_.build(b, deadline);
    if (!outcome.died_while_idle.empty())
      out.notice = "builder " + outcome.died_while_idle + "; restarted it before job " + b.job_id;
    if (outcome.response && !outcome.response->infra_error) {
      out.ok = outcome.response->ok;
      out.cached = outcome.response->cached;
      out.log = outcome.response->log;
    } else {
      out.infra_failure = true;
      out.log = outcome.response ? outcome.response->error
                                 : (outcome.failure ? outcome.failure->message : std::string{"unknown"});
    }
    return out;
  }
  void stop() override { worker_.stop(); }
  void abort() override { worker_.abort(); }

 private:
  worker_slot_options opts_;
  worker_process worker_;
};

class sim_slot final : public slot_backend {
 public:
  sim_slot(double mean_ms, double correct_rate, uint64_t seed) : correct_rate_(correct_rate), rng_(seed) {
    mu_ = std::log(std::max(1e-3, mean_ms)) - sigma_ * sigma_ / 2;
  }
  slot_reply run(const messages::eval_request& req) override {
    job_outcome o;
    o.mode = req.mode;
    o.v.correct = std::uniform_real_distribution<double>{0, 1}(rng_) < correct_rate_;
    o.v.reason = o.v.correct ? "sim: all checks passed" : "sim: check 3 mismatched";
    o.v.has_timings = true;
    o.v.times.eager_ms = 1.0;
    o.v.times.compile_ms = 0.8;
    o.v.times.candidate_ms = std::uniform_real_distribution<double>{0.5, 1.2}(rng_);
    auto out = reply_of(judge(o), req);
    double ms = std::lognormal_distribution<double>{mu_, sigma_}(rng_);
    out.delay = std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
    return out;
  }
  bool blocking() const override { return false; }

 private:
  double correct_rate_;
  double sigma_ = 0.3;
  double mu_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace

messages::eval_result result_of(const judgement& j, uint64_t job_id) {
  messages::eval_result r;
  r.job_id = job_id;
  r.status = j.status;
  r.correct = j.correct;
  r.reason = j.reason;
  r.reward = j.reward;
  r.candidate_ms = j.candidate_ms;
  r.eager_ms = j.eager_ms;
  r.compile_ms = j.compile_ms;
  return r;
}

slot_reply reply_of(const judgement& j, const messages::eval_request& req) {
  slot_reply out;
  out.result = result_of(j, req.job_id);
  out.infra_failure = j.slot_failure;
  out.retry = j.retry;
  return out;
}

std::unique_ptr<slot_backend> make_worker_slot(const worker_slot_options& opts) {
  return std::make_unique<worker_slot>(opts);
}

std::unique_ptr<build_backend> make_worker_builder(const worker_slot_options& opts) {
  return std::make_unique<worker_builder>(opts);
}

std::unique_ptr<slot_backend> make_sim_slot(double mean_ms, double correct_rate, uint64_t seed) {
  return std::make_unique<sim_slot>(mean_ms, correct_rate, seed);
}

}  // namespace caf_agent::gpu_pool
