// rollout/baseline_report.cpp: see baseline_report.hpp.
#include "rollout/baseline_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <regex>

#include <nlohmann/json.hpp>

namespace caf_agent::rollout {

namespace {

// Rationale: the reward's 5% margin (a speedup counts only beyond it).
constexpr double margin = 1.05;

bool measured(double ms) {
  return std::isfinite(ms) && ms > 0;
}

bool eager_of(const baseline_row& r) {
  return r.answered && r.result.status == messages::eval_status::ok && measured(r.result.eager_ms);
}

double median(std::vector<double> xs) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  auto n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

double geomean(const std::vector<double>& xs) {
  if (xs.empty()) return 0;
  double s = 0;
  for (double x : xs) s += std::log(x);
  return std::exp(s / static_cast<double>(xs.size()));
}

std::string status_of(const baseline_row& r) {
  return r.answered ? std::string(messages::name_of(r.result.status)) : "not_answered";
}

baseline_group group_of(const std::vector<const baseline_row*>& rows) {
  baseline_group g;
  std::vector<double> eager, compile, ratio;
  for (auto* r : rows) {
    ++g.tasks;
    if (!eager_of(*r)) {
      ++g.not_measured[status_of(*r)];
      continue;
    }
    eager.push_back(r->result.eager_ms);
    if (!measured(r->result.compile_ms)) {
      ++g.compile_failed;
      continue;
    }
    compile.push_back(r->result.compile_ms);
    double x = r->result.eager_ms / r->result.compile_ms;
    ratio.push_back(x);
    g.compile_faster += x > margin;
    g.compile_slower += x < 1 / margin;
  }
  g.eager_measured = static_cast<int>(eager.size());
  g.compile_measured = static_cast<int>(compile.size());
  g.eager_ms_median = median(eager);
  g.eager_ms_geomean = geomean(eager);
  g.compile_ms_median = median(compile);
  g.eager_over_compile_geomean = geomean(ratio);
  return g;
}

std::string row_text(const std::string& name, const baseline_group& g) {
  std::string nm;
  for (auto& [k, v] : g.not_measured) nm += (nm.empty() ? "" : " ") + k + "=" + std::to_string(v);
  char buf[320];
  std::snprintf(buf, sizeof buf, "%-6s %6d %7d %8d %8d %10.3f %10.3f %11.3f %9.3fx %6d %6d  %s\n", name.c_str(),
                g.tasks, g.eager_measured, g.compile_measured, g.compile_failed, g.eager_ms_median, g.eager_ms_geomean,
                g.compile_ms_median, g.eager_over_compile_geomean, g.compile_faster, g.compile_slower,
                nm.empty() ? "-" : nm.c_str());
  return buf;
}

nlohmann::json group_json(const baseline_group& g) {
  return {{"tasks", g.tasks},
          {"eager_measured", g.eager_measured},
          {"compile_measured", g.compile_measured},
          {"compile_failed", g.compile_failed},
          {"not_measured", g.not_measured},
          {"eager_ms_median", g.eager_ms_median},
          {"eager_ms_geomean", g.eager_ms_geomean},
          {"compile_ms_median", g.compile_ms_median},
          {"eager_over_compile_geomean", g.eager_over_compile_geomean},
          {"compile_faster", g.compile_faster},
          {"compile_slower", g.compile_slower}};
}

}  // namespace

baseline_report make_baseline_report(const std::vector<baseline_row>& rows) {
  baseline_report out;
  std::map<int, std::vector<const baseline_row*>> levels;
  std::vector<const baseline_row*> all;
  static const std::regex device_re{R"(^baseline on (.+?) \(torch )"};
  for (auto& r : rows) {
    levels[r.task.level].push_back(&r);
    all.push_back(&r);
    std::smatch m;
    if (out.device.empty() && r.answered && std::regex_search(r.result.reason, m, device_re)) out.device = m[1];
  }
  for (auto& [lvl, rs] : levels) out.by_level[lvl] = group_of(rs);
  out.overall = group_of(all);
  return out;
}

std::string format_baseline_report(const baseline_report& report, const std::vector<baseline_row>& rows) {
  std::string out = "baselines measured by the judge on " +
                    (report.device.empty() ? "(no device recorded)" : report.device) +
                    "\nlevel   tasks   eager  compile  cmp_fail  eager_med   eager_geo compile_med eager/cmp  >5%f  "
                    ">5%s  not measured\n";
  for (auto& [lvl, g] : report.by_level) out += row_text("L" + std::to_string(lvl), g);
  out += row_text("all", report.overall);
  out +=
      "(times in ms: medians and geometric means over the measured tasks; eager/cmp: geometric mean of "
      "eager over torch.compile; >5%f/>5%s: tasks torch.compile is more than 5% faster/slower on)\n";
  bool header = false;
  for (auto& r : rows) {
    if (eager_of(r) && measured(r.result.compile_ms)) continue;
    if (!header) out += "not measured, or without a torch.compile time:\n";
    header = true;
    auto why = r.answered ? r.result.reason : std::string{"the run stopped before the pool answered"};
    if (why.size() > 400) why = why.substr(0, 400) + "...";
    out += "  " + r.task.task_id + ": " + (eager_of(r) ? std::string{"eager only"} : status_of(r)) + ": " + why + "\n";
  }
  return out;
}

std::string baseline_report_json(const baseline_report& report, const std::vector<baseline_row>& rows) {
  nlohmann::json j;
  j["format"] = "caf_agent_baselines";
  j["version"] = 1;
  j["device"] = report.device;
  for (auto& [lvl, g] : report.by_level) j["levels"][std::to_string(lvl)] = group_json(g);
  j["levels"]["all"] = group_json(report.overall);
  j["rows"] = nlohmann::json::array();
  auto num = [](double x) { return measured(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  for (auto& r : rows)
    j["rows"].push_back({{"task_id", r.task.task_id},
                         {"level", r.task.level},
                         {"status", status_of(r)},
                         {"eager_ms", eager_of(r) ? num(r.result.eager_ms) : nullptr},
                         {"compile_ms", eager_of(r) ? num(r.result.compile_ms) : nullptr},
                         {"reason", r.answered ? r.result.reason : ""},
                         {"slot", r.result.slot},
                         {"run_us", r.result.run_us}});
  return j.dump(1);
}

}  // namespace caf_agent::rollout
