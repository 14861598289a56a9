// rollout/sim_policy.cpp: the sim backend (see policy_backend.hpp).
#include <cmath>
#include <mutex>

#include "rollout/policy_backend.hpp"

namespace caf_agent::rollout {

namespace {

std::string tool_call(const std::string& name, const std::string& args_json) {
  return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args_json + "}\n</tool_call>";
}

/// The scripted turn `turn` of an episode.
std::string scripted_turn(const sim_policy_options& o, int turn, bool malformed) {
  if (turn + 1 >= o.finish_after) return "The kernel is correct and faster; done.";
  if (malformed)
    return "Let me try this.\n<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": }\n</tool_call>";
  if (turn == 0) return "I will read the task first.\n" + tool_call("Read", "{\"file_path\": \"model.py\"}");
  if (turn % o.profile_every == 0) return tool_call("Bash", "{\"command\": \"profile\"}");
  if (turn % o.verify_every == 0) return tool_call("Bash", "{\"command\": \"verify\"}");
  switch (turn % 4) {
    case 1:
      return tool_call("Write",
                       "{\"file_path\": \"kernels/k.cpp\", \"content\": \"// v" + std::to_string(turn) + "\\n\"}");
    case 2:
      return tool_call("Bash", "{\"command\": \"./compile\"}");
    case 3:
      return tool_call("Grep", "{\"pattern\": \"forward\", \"path\": \".\"}");
    default:
      return tool_call("Read", "{\"file_path\": \"kernels/k.cpp\"}");
  }
}

class sim_policy final : public policy_backend {
 public:
  explicit sim_policy(sim_policy_options o) : opts_(o), rng_(o.seed) {
    // Lognormal with the requested mean: mu = ln(mean) - sigma^2 / 2.
    mu_ = std::log(std::max(1e-3, o.latency_ms_mean)) - o.latency_sigma * o.latency_sigma / 2;
  }

  backend_reply generate(const messages::generate_request& req) override {
    double ms = 0;
    bool malformed = false;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      ms = std::lognormal_distribution<double>{mu_, opts_.latency_sigma}(rng_);
      malformed = std::uniform_real_distribution<double>{0, 1}(rng_) < opts_.malformed_rate;
    }
    backend_reply r;
    r.completion.request_id = req.request_id;
    r.completion.text = scripted_turn(opts_, req.turn, malformed);
    r.completion.finish_reason = messages::completion_finish::stop;
    r.delay = std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
    return r;
  }
  backend_mode mode() const override { return backend_mode::immediate; }
  std::string name() const override { return "sim"; }

 private:
  sim_policy_options opts_;
  std::mutex mutex_;
  std::mt19937_64 rng_;
  double mu_ = 0;
};

}  // namespace

std::unique_ptr<policy_backend> make_sim_policy(sim_policy_options opts) {
  return std::make_unique<sim_policy>(opts);
}

}  // namespace caf_agent::rollout
