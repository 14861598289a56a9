// rollout/eval_report.cpp: see eval_report.hpp.
#include "rollout/eval_report.hpp"

#include <cmath>
#include <cstdio>

namespace caf_agent::rollout {

namespace {

struct accumulator {
  eval_group g;
  double log_eager = 0, log_compile = 0;
  int n_eager = 0, n_compile = 0;
  double turns = 0;

  void add(const messages::trajectory_record& r) {
    ++g.episodes;
    turns += r.turns;
    if (r.termination == messages::episode_end::aborted) {
      ++g.aborted;
      return;
    }
    g.correct += r.reward >= 1;
    g.faster_eager += r.reward >= 2;
    g.faster_compile += r.reward == 3;
    if (r.reward >= 1 && r.speedup_eager > 0) {
      log_eager += std::log(r.speedup_eager);
      ++n_eager;
    }
    if (r.reward >= 1 && r.speedup_compile > 0) {
      log_compile += std::log(r.speedup_compile);
      ++n_compile;
    }
  }

  eval_group done() const {
    auto out = g;
    out.geomean_speedup_eager = n_eager ? std::exp(log_eager / n_eager) : 0;
    out.geomean_speedup_compile = n_compile ? std::exp(log_compile / n_compile) : 0;
    out.mean_turns = g.episodes ? turns / g.episodes : 0;
    return out;
  }
};

std::string pct(int part, int whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%5.1f%%", whole ? 100.0 * part / whole : 0.0);
  return buf;
}

std::string row(const std::string& name, const eval_group& g) {
  int scored = g.episodes - g.aborted;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-8s %8d %7d %8s %10s %11s %9.3fx %11.3fx %7.1f\n", name.c_str(), g.episodes,
                g.aborted, pct(g.correct, scored).c_str(), pct(g.faster_eager, scored).c_str(),
                pct(g.faster_compile, scored).c_str(), g.geomean_speedup_eager, g.geomean_speedup_compile,
                g.mean_turns);
  return buf;
}

}  // namespace

eval_report make_eval_report(const std::vector<messages::trajectory_record>& records,
                             const std::map<std::string, int>& level_of) {
  std::map<int, accumulator> levels;
  accumulator all;
  eval_report out;
  for (auto& r : records) {
    auto it = level_of.find(r.task_id);
    levels[it == level_of.end() ? 0 : it->second].add(r);
    all.add(r);
    ++out.terminations[to_string(r.termination)];
  }
  for (auto& [lvl, acc] : levels) out.by_level[lvl] = acc.done();
  out.overall = all.done();
  return out;
}

std::string format_eval_report(const eval_report& report) {
  std::string out = "level    episodes aborted  correct >eager+5% >compile+5% geo(eager) geo(compile)  turns\n";
  for (auto& [lvl, g] : report.by_level) out += row("L" + std::to_string(lvl), g);
  out += row("all", report.overall);
  out += "terminations:";
  for (auto& [t, n] : report.terminations) out += " " + t + "=" + std::to_string(n);
  out +=
      "\n(rates are over episodes that were not aborted by an infrastructure failure; "
      "geometric means over correct episodes)\n";
  return out;
}

}  // namespace caf_agent::rollout
