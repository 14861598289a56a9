// actors/slot_backend.cpp: see slot_backend.hpp.
#include "actors/slot_backend.hpp"

#include <algorithm>
#include <cmath>

#include "gpu_pool/reward.hpp"
#include "gpu_pool/worker_process.hpp"

namespace caf_agent {

namespace {

gpu_pool::eval_mode mode_of(const std::string& m) {
  if (m == "final") return gpu_pool::eval_mode::final;
  if (m == "profile") return gpu_pool::eval_mode::profile;
  return gpu_pool::eval_mode::verify;
}

void fill_from_verdict(messages::eval_result& out, const gpu_pool::verdict& v,
                       const std::string& mode) {
  out.status = "ok";
  out.correct = v.correct;
  out.reason = v.reason;
  out.cached_build = v.cached_build;
  if (v.has_timings) {
    out.candidate_ms = v.times.candidate_ms;
    out.eager_ms = v.times.eager_ms;
    out.compile_ms = v.times.compile_ms;
  }
  if (std::find(v.flags.begin(), v.flags.end(), "task_error") != v.flags.end()) {
    // The judge refused the task itself (degenerate, too large, a reference that raises):
    // neither the policy's fault (no reward) nor the slot's (not an infra failure, so it
    // never counts towards quarantine).
    out.status = "task_error";
    return;
  }
  if (mode == "final") {
    auto r = gpu_pool::robust_reward({v.correct, out.candidate_ms, out.eager_ms, out.compile_ms});
    out.reward = r.reward;
    if (v.correct && !r.reason.empty()) out.reason += (out.reason.empty() ? "" : "; ") + r.reason;
  }
}

class worker_slot final : public slot_backend {
 public:
  explicit worker_slot(const worker_slot_options& o) : opts_(o), worker_(make_config(o)) {}

  static gpu_pool::worker_config make_config(const worker_slot_options& o) {
    gpu_pool::worker_config c;
    c.python = o.python;
    c.package_dir = o.package_dir;
    c.device = o.device;
    c.threads = o.threads;
    c.stderr_path = o.stderr_path;
    if (!o.build_root.empty()) c.env["CAF_EVAL_BUILD_ROOT"] = o.build_root;
    return c;
  }

  slot_reply run(const messages::eval_request& req) override {
    slot_reply out;
    out.result.job_id = req.job_id;
    gpu_pool::eval_request w;
    w.job_id = std::to_string(req.job_id);
    w.mode = mode_of(req.mode);
    w.task_name = req.task.task_id;
    w.model_py = req.task.model_py;
    w.files = req.files;
    w.seed_secret = std::to_string(req.seed) + ":" + std::to_string(req.job_id);
    w.device = opts_.device;
    auto deadline = std::chrono::milliseconds(req.deadline_ms > 0 ? req.deadline_ms : opts_.deadline_ms);
    auto outcome = worker_.evaluate(w, deadline);
    if (!outcome.died_while_idle.empty())
      out.notice = "eval " + outcome.died_while_idle + "; restarted it before job " + w.job_id;
    if (outcome.response && !outcome.response->infra_error) {
      fill_from_verdict(out.result, outcome.response->result, req.mode);
    } else if (outcome.response) {
      out.result.status = "infra_error";
      out.result.reason = "judge failure: " + outcome.response->error;
      out.infra_failure = true;
    } else if (outcome.failure && outcome.failure->code == gpu_pool::worker_error_code::timeout) {
      // Rationale: the worker runs each submission in its own child and reports a
      // child's crash as a verdict, so the worker itself dying is never the
      // submission's doing (it is infrastructure: OOM killer, operator, node
      // trouble); only a job that outlives its deadline is charged to the policy.
      fill_from_verdict(out.result, gpu_pool::verdict_for_failure(*outcome.failure), req.mode);
      out.result.reward = req.mode == "final" ? -1 : 0;
    } else {
      out.result.status = "infra_error";
      out.result.reason = "eval worker failure: " +
                          (outcome.failure ? outcome.failure->message : std::string{"unknown"});
      out.infra_failure = true;
    }
    return out;
  }
  bool blocking() const override { return true; }
  void stop() override { worker_.stop(); }
  void abort() override { worker_.abort(); }
  int worker_pid() const override { return worker_.pid(); }

 private:
  worker_slot_options opts_;
  gpu_pool::worker_process worker_;
};

class worker_builder final : public build_backend {
 public:
  explicit worker_builder(const worker_slot_options& o)
      : opts_(o), worker_(config(o)) {}

  static gpu_pool::worker_config config(const worker_slot_options& o) {
    auto c = worker_slot::make_config(o);
    c.build_only = true;
    return c;
  }

  build_reply build(const messages::eval_request& req) override {
    build_reply out;
    gpu_pool::build_request b;
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
  gpu_pool::worker_process worker_;
};

class sim_slot final : public slot_backend {
 public:
  sim_slot(double mean_ms, double correct_rate, uint64_t seed)
      : correct_rate_(correct_rate), rng_(seed) {
    mu_ = std::log(std::max(1e-3, mean_ms)) - sigma_ * sigma_ / 2;
  }
  slot_reply run(const messages::eval_request& req) override {
    slot_reply out;
    out.result.job_id = req.job_id;
    out.result.status = "ok";
    out.result.correct = std::uniform_real_distribution<double>{0, 1}(rng_) < correct_rate_;
    out.result.reason = out.result.correct ? "sim: all checks passed" : "sim: check 3 mismatched";
    out.result.eager_ms = 1.0;
    out.result.compile_ms = 0.8;
    out.result.candidate_ms = std::uniform_real_distribution<double>{0.5, 1.2}(rng_);
    if (req.mode == "final")
      out.result.reward = gpu_pool::robust_reward({out.result.correct, out.result.candidate_ms,
                                                   out.result.eager_ms, out.result.compile_ms})
                              .reward;
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

std::unique_ptr<slot_backend> make_worker_slot(const worker_slot_options& opts) {
  return std::make_unique<worker_slot>(opts);
}

std::unique_ptr<build_backend> make_worker_builder(const worker_slot_options& opts) {
  return std::make_unique<worker_builder>(opts);
}

std::unique_ptr<slot_backend> make_sim_slot(double mean_ms, double correct_rate, uint64_t seed) {
  return std::make_unique<sim_slot>(mean_ms, correct_rate, seed);
}

}  // namespace caf_agent
