// rollout/replay_policy.cpp: the replay backend (see policy_backend.hpp).
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "rollout/policy_backend.hpp"

namespace caf_agent::rollout {

namespace {

class replay_policy final : public policy_backend {
 public:
  replay_policy(std::map<std::string, std::vector<std::string>> episodes, double latency_ms, replay_tokens tokens)
      : episodes_(std::move(episodes)), latency_ms_(latency_ms), tokens_(std::move(tokens)) {}

  backend_reply generate(const messages::generate_request& req) override {
    backend_reply r;
    r.completion.request_id = req.request_id;
    r.completion.finish_reason = messages::completion_finish::stop;
    auto it = episodes_.find(req.task_id);
    if (it == episodes_.end()) it = episodes_.find("*");
    if (it == episodes_.end()) {
      r.completion.finish_reason = messages::completion_finish::error;
      r.completion.error = "replay has no recorded episode for task '" + req.task_id + "'";
      return r;
    }
    auto turn = static_cast<size_t>(req.turn);
    r.completion.text = turn < it->second.size() ? it->second[turn] : "Recorded episode ends here.";
    if (tokens_.tok) {
      // The recorded text is the demonstration: its tokens are what the model should sample
      // after the generation prompt, ending the turn with the end-of-turn token. No sampler
      // ran, so there is no sampler logprob; 0 stands in (RFT does not read it).
      auto ids = tokens_.tok->encode(r.completion.text);
      r.completion.tokens.assign(ids.begin(), ids.end());
      r.completion.tokens.push_back(tokens_.im_end);
      r.completion.logprobs.assign(r.completion.tokens.size(), 0.0f);
    }
    r.delay = std::chrono::microseconds(static_cast<int64_t>(latency_ms_ * 1000));
    return r;
  }
  backend_mode mode() const override { return backend_mode::immediate; }
  std::string name() const override { return "replay"; }

 private:
  std::map<std::string, std::vector<std::string>> episodes_;
  double latency_ms_;
  replay_tokens tokens_;
};

}  // namespace

std::unique_ptr<policy_backend> make_replay_policy(const std::string& path, double latency_ms, std::string& error,
                                                   replay_tokens tokens) {
  if (tokens.tok && tokens.im_end < 0) {
    error = "replay: token mode needs the end-of-turn token's id";
    return nullptr;
  }
  std::ifstream in{path};
  if (!in) {
    error = "cannot read replay file '" + path + "'";
    return nullptr;
  }
  std::map<std::string, std::vector<std::string>> episodes;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    auto where = path + ":" + std::to_string(n) + ": ";
    if (j.is_discarded() || !j.is_object()) {
      error = where + "not a JSON object";
      return nullptr;
    }
    if (!j.contains("task_id") || !j["task_id"].is_string()) {
      error = where + "'task_id' must be a string";
      return nullptr;
    }
    if (!j.contains("turns") || !j["turns"].is_array()) {
      error = where + "'turns' must be an array of strings";
      return nullptr;
    }
    std::vector<std::string> turns;
    for (auto& t : j["turns"]) {
      if (!t.is_string()) {
        error = where + "'turns' must be an array of strings";
        return nullptr;
      }
      turns.push_back(t.get<std::string>());
    }
    episodes[j["task_id"].get<std::string>()] = std::move(turns);
  }
  if (episodes.empty()) {
    error = "replay file '" + path + "' has no episodes";
    return nullptr;
  }
  return std::make_unique<replay_policy>(std::move(episodes), latency_ms, std::move(tokens));
}

}  // namespace caf_agent::rollout
