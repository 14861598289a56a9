// observe/report.cpp: see report.hpp.
#include "observe/report.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "observe/svg_plot.hpp"
#include "rollout/trajectory_store.hpp"

namespace caf_agent::observe {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<json> read_jsonl(const fs::path& p) {
  std::vector<json> out;
  std::ifstream in{p};
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) out.push_back(std::move(j));  // a torn last line is skipped
  }
  return out;
}

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * v);
  return buf;
}

std::string fixed(double v, int digits = 1) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// Reward tiers and rates over the run, in windows of episodes (by when they ended).
std::string training_plots(std::vector<messages::trajectory_record>& recs) {
  std::sort(recs.begin(), recs.end(), [](auto& a, auto& b) { return a.ended_at_ms < b.ended_at_ms; });
  // Rationale: 20 windows show a trend without each point resting on a handful of episodes.
  const size_t window = std::max<size_t>(1, recs.size() / 20);
  std::map<int, series> tiers{{3, {"r=3 (>compile)", "#1b9e77", {}, {}}},
                              {2, {"r=2 (>eager)", "#7570b3", {}, {}}},
                              {1, {"r=1 (correct)", "#e6ab02", {}, {}}},
                              {-1, {"r=-1 (failed)", "#d95f02", {}, {}}}};
  series mean{"mean reward", "#333", {}, {}}, pass{"pass", "#1b9e77", {}, {}}, eager{"> eager +5%", "#7570b3", {}, {}},
      compile{"> compile +5%", "#e7298a", {}, {}};
  for (size_t start = 0; start < recs.size(); start += window) {
    size_t end = std::min(recs.size(), start + window), judged = 0;
    double sum = 0, n_pass = 0, n_eager = 0, n_compile = 0;
    std::map<int, double> count;
    for (size_t i = start; i < end; ++i) {
      auto& r = recs[i];
      if (r.termination == messages::episode_end::aborted) continue;
      ++judged;
      sum += r.reward;
      count[r.reward] += 1;
      n_pass += r.correct;
      n_eager += r.correct && r.speedup_eager > 1.05;
      n_compile += r.correct && r.speedup_compile > 1.05;
    }
    if (judged == 0) continue;
    double x = static_cast<double>(end), j = static_cast<double>(judged);
    for (auto& [tier, s] : tiers) {
      s.x.push_back(x);
      s.y.push_back(count[tier] / j);
    }
    for (auto* s : {&mean, &pass, &eager, &compile}) s->x.push_back(x);
    mean.y.push_back(sum / j);
    pass.y.push_back(n_pass / j);
    eager.y.push_back(n_eager / j);
    compile.y.push_back(n_compile / j);
  }
  std::vector<series> tier_lines;
  for (auto& [t, s] : tiers) tier_lines.push_back(s);
  std::vector<std::string> labels{"-1", "1", "2", "3"};
  std::vector<double> overall(4, 0);
  for (auto& r : recs)
    if (r.termination != messages::episode_end::aborted) {
      auto it = std::find(labels.begin(), labels.end(), std::to_string(r.reward));
      if (it != labels.end()) overall[static_cast<size_t>(it - labels.begin())] += 1;
    }
  std::vector<double> turns, tokens;
  for (auto& r : recs) {
    turns.push_back(r.turns);
    tokens.push_back(static_cast<double>(r.tokens.size()));
  }
  return "<h2>Rewards</h2><div class=\"row\">" +
         bar_chart("reward-distribution", "reward (tier) distribution", labels, overall, "#1b9e77") +
         line_chart("tiers-over-run", "tiers over the run (share per window)", "episodes ended", "share", tier_lines) +
         "</div><div class=\"row\">" +
         line_chart("reward-over-run", "mean reward over the run", "episodes ended", "reward", {mean}) +
         line_chart("rates-over-run", "pass and faster rates", "episodes ended", "share", {pass, eager, compile}) +
         "</div><h2>Episodes</h2><div class=\"row\">" +
         histogram_chart("turns-per-episode", "turns per episode", "turns", turns, 20, "#66a61e") +
         histogram_chart("tokens-per-episode", "tokens per episode", "tokens", tokens, 20, "#a6761d") + "</div>";
}

/// GPU slots busy over time, from metrics.jsonl.
std::string gpu_plots(const std::vector<json>& lines) {
  series util{"busy / slots", "#1b9e77", {}, {}}, queued{"queued evaluations", "#d95f02", {}, {}};
  int64_t t0 = lines.empty() ? 0 : lines.front().value("at_ms", int64_t{0});
  for (auto& l : lines) {
    if (!l.contains("gpu") || !l["gpu"].contains("total")) continue;
    auto& t = l["gpu"]["total"];
    double x = static_cast<double>(l.value("at_ms", int64_t{0}) - t0) / 1000.0;
    double slots = t.value("slots", 0.0);
    util.x.push_back(x);
    util.y.push_back(slots > 0 ? t.value("busy", 0.0) / slots : 0.0);
    queued.x.push_back(x);
    queued.y.push_back(t.value("queued", 0.0));
  }
  return "<h2>GPU slots</h2><div class=\"row\">" +
         line_chart("gpu-utilization", "GPU slot utilization", "seconds since the first sample", "busy share", {util}) +
         line_chart("gpu-queue", "evaluations waiting for a slot", "seconds since the first sample", "queued",
                    {queued}) +
         "</div>";
}

/// Every numeric field of learner.jsonl against its step (sampler/trainer mismatch among them).
std::string learner_plots(const std::vector<json>& steps) {
  if (steps.empty()) return "<h2>Learner</h2><p>No learner diagnostics in this run (no learner.jsonl).</p>";
  std::map<std::string, series> fields;
  static const char* colors[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02"};
  double i = 0;
  for (auto& s : steps) {
    double x = s.contains("step") && s["step"].is_number() ? s["step"].get<double>() : i;
    i += 1;
    for (auto& [k, v] : s.items())
      if (k != "step" && v.is_number()) {
        auto& f = fields[k];
        f.name = k;
        f.x.push_back(x);
        f.y.push_back(v.get<double>());
      }
  }
  std::string out = "<h2>Learner</h2><div class=\"row\">";
  size_t n = 0;
  for (auto& [k, f] : fields) {
    // Rationale: 12 diagnostics fill a page; more are in learner.jsonl itself.
    if (n >= 12) break;
    f.color = colors[n % 6];
    out += line_chart("learner-" + k, k, "step", k, {f});
    ++n;
  }
  return out + "</div>";
}

std::string summary_table(const std::vector<messages::trajectory_record>& recs, const std::vector<json>& metrics) {
  size_t aborted = 0, judged = 0, pass = 0, eager = 0, compile = 0;
  double reward = 0, turns = 0, tokens = 0;
  std::map<std::string, size_t> terms;
  for (auto& r : recs) {
    ++terms[to_string(r.termination)];
    turns += r.turns;
    tokens += static_cast<double>(r.tokens.size());
    if (r.termination == messages::episode_end::aborted) {
      ++aborted;
      continue;
    }
    ++judged;
    reward += r.reward;
    pass += r.correct;
    eager += r.correct && r.speedup_eager > 1.05;
    compile += r.correct && r.speedup_compile > 1.05;
  }
  auto rate = [&](size_t k) { return judged ? pct(static_cast<double>(k) / static_cast<double>(judged)) : "-"; };
  auto n = static_cast<double>(std::max<size_t>(1, recs.size()));
  std::string out =
      "<table class=\"summary\"><tr><th>episodes</th><td>" + std::to_string(recs.size()) +
      "</td></tr><tr><th>aborted</th><td>" + std::to_string(aborted) + "</td></tr><tr><th>pass rate</th><td>" +
      rate(pass) + "</td></tr><tr><th>faster than eager (+5%)</th><td>" + rate(eager) +
      "</td></tr><tr><th>faster than torch.compile (+5%)</th><td>" + rate(compile) +
      "</td></tr><tr><th>mean reward</th><td>" + (judged ? fixed(reward / static_cast<double>(judged), 2) : "-") +
      "</td></tr><tr><th>turns per episode</th><td>" + fixed(turns / n) +
      "</td></tr><tr><th>tokens per episode</th><td>" + fixed(tokens / n, 0) + "</td></tr>";
  for (auto& [t, k] : terms)
    out += "<tr><th>termination: " + html_escape(t) + "</th><td>" + std::to_string(k) + "</td></tr>";
  if (!metrics.empty() && metrics.back().contains("episodes")) {
    auto& s = metrics.back()["episodes"];
    std::string stuck;
    if (s.contains("stuck_total"))
      for (auto& [reason, k] : s["stuck_total"].items()) stuck += html_escape(reason) + ": " + k.dump() + " ";
    out += "<tr><th>episodes flagged stuck</th><td>" + (stuck.empty() ? std::string{"none"} : stuck) + "</td></tr>";
  }
  return out + "</table>";
}

}  // namespace

std::optional<std::string> make_run_report(const fs::path& run_dir, std::string& error) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) {
    error = "'" + run_dir.string() + "' is not a directory";
    return std::nullopt;
  }
  rollout::scan_report scan;
  auto recs = rollout::trajectory_store::read_all(run_dir, &scan);
  auto metrics = read_jsonl(run_dir / "metrics.jsonl");
  auto learner = read_jsonl(run_dir / "learner.jsonl");
  if (recs.empty() && metrics.empty() && learner.empty()) {
    error = "'" + run_dir.string() +
            "' holds no trajectory records, metrics.jsonl or learner.jsonl (is it a run directory, " +
            "runs/.../trajectories-*?)";
    return std::nullopt;
  }
  std::string html =
      "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>caf-agent run report</title><style>"
      "body{font-family:sans-serif;margin:24px;color:#222}.row{display:flex;flex-wrap:wrap;gap:12px}"
      "svg.plot{border:1px solid #ddd;background:#fff}table.summary th{text-align:left;padding-right:24px}"
      "</style></head><body><h1>caf-agent run report</h1><p>" +
      html_escape(run_dir.string()) + ": " + std::to_string(recs.size()) + " records" +
      (scan.corrupt_frames ? ", " + std::to_string(scan.corrupt_frames) + " torn or corrupt frames skipped" : "") +
      ", " + std::to_string(metrics.size()) + " metrics samples</p>" + summary_table(recs, metrics) +
      training_plots(recs) + gpu_plots(metrics) + learner_plots(learner) + "</body></html>\n";
  return html;
}

std::string write_run_report(const fs::path& run_dir, const fs::path& out) {
  std::string error;
  auto html = make_run_report(run_dir, error);
  if (!html) return error;
  std::ofstream f{out, std::ios::binary | std::ios::trunc};
  if (!f) return "cannot write '" + out.string() + "'";
  f << *html;
  f.close();
  if (!f) return "writing '" + out.string() + "' failed";
  return {};
}

}  // namespace caf_agent::observe
