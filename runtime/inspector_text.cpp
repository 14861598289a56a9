// runtime/inspector_text.cpp: see inspector_text.hpp.
#include "runtime/inspector_text.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace caf_agent::runtime {

namespace {

using nlohmann::json;

std::string fmt(const char* f, auto... xs) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, xs...);
  return buf;
}

int64_t i64(const json& j, const char* k) {
  return j.contains(k) && j[k].is_number() ? j[k].get<int64_t>() : 0;
}
double f64(const json& j, const char* k) {
  return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0;
}
std::string str(const json& j, const char* k) {
  return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : "";
}

std::string age(int64_t ms) {
  if (ms < 1000) return std::to_string(ms) + "ms";
  if (ms < 120000) return fmt("%.1fs", ms / 1000.0);
  return fmt("%lldm", static_cast<long long>(ms / 60000));
}

std::string clip(std::string s, size_t n) {
  for (auto& c : s)
    if (c == '\n' || c == '\t') c = ' ';
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

std::string nodes_text(const json& v, size_t limit = 1000) {
  std::string out =
      fmt("%-40s %-10s %-6s %9s %7s %8s %8s\n", "NODE", "ROLE", "STATE", "HEARTBEAT", "ACTORS", "MAILBOX", "EPISODES");
  size_t n = 0;
  for (auto& node : v) {
    if (n++ >= limit) break;
    out += fmt("%-40s %-10s %-6s %9s %7lld %8lld %8lld\n", clip(str(node, "node_id"), 40).c_str(),
               str(node, "role").c_str(), str(node, "state").c_str(), age(i64(node, "heartbeat_age_ms")).c_str(),
               (long long)i64(node, "running_actors"), (long long)i64(node, "mailbox_size"),
               (long long)i64(node, "episodes"));
    if (!str(node, "reason").empty() && str(node, "state") != "up") out += "    reason: " + str(node, "reason") + "\n";
  }
  return out;
}

std::string kinds_text(const json& v, size_t limit = 1000) {
  std::string out = fmt("%-20s %7s %8s %8s %8s %10s %9s %9s %6s %8s\n", "KIND", "RUNNING", "SPAWNED", "MAILBOX", "PEAK",
                        "HANDLED", "P50(us)", "P99(us)", "ERRORS", "RESTARTS");
  std::vector<json> kinds(v["kinds"].begin(), v["kinds"].end());
  std::sort(kinds.begin(), kinds.end(), [](auto& a, auto& b) { return i64(a, "processed") > i64(b, "processed"); });
  size_t n = 0;
  for (auto& k : kinds) {
    if (n++ >= limit) break;
    auto& t = k["caf.actor.processing-time"];
    out += fmt("%-20s %7lld %8lld %8lld %8lld %10lld %9.0f %9.0f %6lld %8lld\n", clip(str(k, "kind"), 20).c_str(),
               (long long)i64(k, "caf.system.running-actors"), (long long)i64(k, "spawned"),
               (long long)i64(k, "caf.actor.mailbox-size"), (long long)i64(k, "mailbox_peak"),
               (long long)i64(k, "processed"), f64(t, "p50_us"), f64(t, "p99_us"), (long long)i64(k, "errors"),
               (long long)i64(k, "restarts"));
  }
  return out;
}

std::string top_text(const json& top, size_t limit) {
  std::string out =
      fmt("%-20s %10s %8s %8s %10s %10s  %s\n", "TOP ACTOR", "ID", "MAILBOX", "PEAK", "HANDLED", "BUSY(ms)", "PROCESS");
  size_t n = 0;
  for (auto& a : top) {
    if (n++ >= limit) break;
    out += fmt("%-20s %10llu %8lld %8lld %10lld %10.1f  %s\n", clip(str(a, "kind"), 20).c_str(),
               (unsigned long long)i64(a, "id"), (long long)i64(a, "mailbox_size"), (long long)i64(a, "mailbox_peak"),
               (long long)i64(a, "processed"), i64(a, "busy_us") / 1000.0, str(a, "process").c_str());
  }
  return out;
}

std::string gpu_text(const json& v) {
  std::string out = fmt("%-24s %-10s %5s %4s %4s %5s %6s %6s %8s %8s %8s %8s\n", "PROCESS", "POOL", "SLOTS", "BUSY",
                        "IDLE", "QUAR", "QUEUED", "BUILD", "DONE", "WAITp50", "WAITp90", "WAITp99");
  for (auto& p : v["pools"])
    out += fmt("%-24s %-10s %5lld %4lld %4lld %5lld %6lld %6lld %8lld %7.0fms %7.0fms %7.0fms\n",
               clip(str(p, "process"), 24).c_str(), clip(str(p, "name"), 10).c_str(), (long long)i64(p, "slots"),
               (long long)i64(p, "busy"), (long long)i64(p, "idle"), (long long)i64(p, "quarantined"),
               (long long)i64(p, "queued"), (long long)i64(p, "building"), (long long)i64(p, "jobs_done"),
               f64(p, "wait_p50_ms"), f64(p, "wait_p90_ms"), f64(p, "wait_p99_ms"));
  if (v["pools"].empty()) out += "no GPU pool has reported\n";
  return out;
}

std::string run_text(const json& r) {
  if (!r.value("active", false)) return "no run is driven by this coordinator\n";
  std::string rewards;
  for (auto& [k, n] : r["rewards"].items())
    rewards += (rewards.empty() ? "" : "  ") + ("r=" + k) + ": " + std::to_string(n.get<int64_t>());
  return fmt("run %s: %lld planned, %lld started, %lld recorded (%lld aborted); pass %.1f%%, >eager %.1f%%, "
             ">compile %.1f%%; turns %.1f, tokens %.0f per episode\n",
             str(r, "mode").c_str(), (long long)i64(r, "planned"), (long long)i64(r, "started"),
             (long long)i64(r, "recorded"), (long long)i64(r, "aborted"), 100 * f64(r, "pass_rate"),
             100 * f64(r, "faster_eager_rate"), 100 * f64(r, "faster_compile_rate"), f64(r, "turns_mean"),
             f64(r, "tokens_mean")) +
         "rewards: " + (rewards.empty() ? std::string{"none yet"} : rewards) + "\n";
}

std::string episodes_text(const json& v, size_t limit) {
  auto& s = v["summary"];
  std::string bands;
  for (auto& [k, n] : s["by_turn"].items()) bands += " " + k + ":" + std::to_string(n.get<int64_t>());
  std::string versions;
  for (auto& [k, n] : s["by_policy_version"].items()) versions += " v" + k + ":" + std::to_string(n.get<int64_t>());
  std::string stuck_total;
  for (auto& [k, n] : s["stuck_total"].items()) stuck_total += " " + k + ":" + std::to_string(n.get<int64_t>());
  std::string out =
      fmt("%lld episodes in flight; turns%s; policy%s; %lld tokens; median turn %.0f ms over %lld turns\n",
          (long long)i64(s, "in_flight"), bands.c_str(), versions.c_str(), (long long)i64(s, "tokens_in_flight"),
          f64(s, "turn_median_ms"), (long long)i64(s, "turns_finished"));
  out += fmt("stuck now: %lld; flagged so far:%s\n", (long long)i64(s, "stuck_now"),
             stuck_total.empty() ? " none" : stuck_total.c_str());
  out += fmt("%8s %-24s %-28s %9s %7s %4s %-14s %8s %8s %5s  %s\n", "EPISODE", "TASK", "NODE", "TURN", "TOKENS", "VER",
             "PHASE", "IDLE", "TOOLms", "REP", "STUCK");
  std::vector<json> rows(v["episodes"].begin(), v["episodes"].end());
  // Stuck first, then the longest idle.
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) {
    auto sa = a["stuck"].size(), sb = b["stuck"].size();
    return sa != sb ? sa > sb : i64(a, "idle_ms") > i64(b, "idle_ms");
  });
  size_t n = 0;
  for (auto& e : rows) {
    if (n++ >= limit) break;
    std::string why;
    for (auto& f : e["stuck"]) why += (why.empty() ? "" : ",") + str(f, "reason");
    out += fmt("%8lld %-24s %-28s %4lld/%-4lld %7lld %4lld %-14s %8s %8.0f %5lld  %s\n",
               (long long)i64(e, "episode_id"), clip(str(e, "task_id"), 24).c_str(),
               clip(str(e, "node_id"), 28).c_str(), (long long)i64(e, "turn"), (long long)i64(e, "max_turns"),
               (long long)i64(e, "tokens"), (long long)i64(e, "policy_version"), clip(str(e, "phase"), 14).c_str(),
               age(i64(e, "idle_ms")).c_str(), f64(e, "tool_ms_mean"), (long long)i64(e, "repeats"), why.c_str());
  }
  if (rows.size() > limit) out += fmt("... %zu more\n", rows.size() - limit);
  for (auto& f : v["stuck"])
    out += fmt("  stuck: episode %lld (%s): %s\n", (long long)i64(f, "episode_id"), str(f, "reason").c_str(),
               str(f, "detail").c_str());
  return out;
}

std::string queues_text(const json& v) {
  std::string out = "mailboxes by kind:\n";
  for (auto& m : v["mailboxes"])
    out += fmt("  %-20s now %6lld  peak %6lld\n", str(m, "kind").c_str(), (long long)i64(m, "mailbox_size"),
               (long long)i64(m, "mailbox_peak"));
  out += "GPU pool queues:\n";
  for (auto& p : v["pools"])
    out +=
        fmt("  %-24s %-10s queued %4lld  building %4lld  wait p90 %.0f ms\n", str(p, "process").c_str(),
            str(p, "name").c_str(), (long long)i64(p, "queued"), (long long)i64(p, "building"), f64(p, "wait_p90_ms"));
  auto& d = v["driver"];
  out += d.value("active", false) ? fmt("driver: %lld episodes not started, %lld in flight\n",
                                        (long long)i64(d, "not_started"), (long long)i64(d, "in_flight"))
                                  : std::string{"driver: no run\n"};
  return out + top_text(v["top"], 10);
}

std::string train_text(const json& v) {
  if (v.contains("trainer") && v["trainer"].is_null()) return str(v, "message") + "\n";
  return v.dump(2) + "\n";
}

std::string transcript_text(const json& v) {
  std::string out = fmt("episode %lld %s on %s: %lld turns so far\n", (long long)i64(v, "episode_id"),
                        str(v, "task_id").c_str(), str(v, "node_id").c_str(), (long long)i64(v, "turns"));
  size_t i = 0;
  for (auto& a : v["assistant"]) out += fmt("--- assistant %zu ---\n", ++i) + a.get<std::string>() + "\n";
  i = 0;
  for (auto& o : v["observations"]) out += fmt("--- observation %zu ---\n", ++i) + o.get<std::string>() + "\n";
  return out;
}

}  // namespace

std::string render_view_text(messages::view_kind what, const json& v) {
  using messages::view_kind;
  if (v.is_object() && v.contains("error")) return "error: " + str(v, "error") + "\n";
  switch (what) {
    case view_kind::nodes:
      return nodes_text(v);
    case view_kind::actors:
      return kinds_text(v) + "\n" + top_text(v["top"], 20);
    case view_kind::episodes:
      return run_text(v["run"]) + episodes_text(v, 1000);
    case view_kind::gpu:
      return gpu_text(v);
    case view_kind::queues:
      return queues_text(v);
    case view_kind::train:
      return train_text(v);
    case view_kind::run:
      return run_text(v);
    case view_kind::episode:
      return transcript_text(v);
    case view_kind::metrics:
    case view_kind::prometheus:
      break;
  }
  return v.dump(2) + "\n";
}

std::string render_dashboard(const std::map<messages::view_kind, json>& views, int64_t now_ms) {
  using messages::view_kind;
  // A copy of each view (a missing one is null), so that reading an absent key gives null.
  auto view = [&](view_kind k) {
    auto it = views.find(k);
    return it == views.end() ? json() : it->second;
  };
  json episodes = view(view_kind::episodes), actors = view(view_kind::actors);
  auto section = [](const char* title) { return std::string{"\n== "} + title + " ==\n"; };
  std::string out = "caf-agent inspector (every 1 s; Ctrl-C quits)\n";
  out += run_text(episodes["run"]);
  out += section("nodes") + nodes_text(view(view_kind::nodes), 12);
  out += section("actors by kind") + kinds_text(actors, 10);
  out += section("busiest actors") + top_text(actors["top"], 5);
  out += section("GPU slots") + gpu_text(view(view_kind::gpu));
  out += section("episodes") + episodes_text(episodes, 10);
  out += section("learner") + train_text(view(view_kind::train));
  return out;
}

}  // namespace caf_agent::runtime
