// observe/cluster_view.cpp: see cluster_view.hpp.
#include "observe/cluster_view.hpp"

#include <algorithm>
#include <sstream>

#include "observe/histogram.hpp"

namespace caf_agent::observe {

namespace {

using nlohmann::json;

histogram hist_of(const std::vector<int64_t>& buckets) {
  histogram h;
  h.merge(buckets);
  return h;
}

double ms(double us) {
  return us / 1000.0;
}

/// The median turn (ms) over every live process, and how many turns it rests on.
std::pair<double, int64_t> median_turn(const std::vector<const messages::node_metrics*>& procs) {
  histogram h;
  for (auto* p : procs) h.merge(p->turn_buckets);
  return {h.total > 0 ? ms(h.quantile(0.5)) : -1.0, h.total};
}

std::string label_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

void cluster_view::on_metrics(const std::string& node_id, messages::node_metrics m) {
  if (m.process.empty()) return;  // a node without metrics (older build): nothing to add
  process_of_[node_id] = m.process;
  auto key = m.process;
  by_process_[key] = std::move(m);
}

std::vector<const messages::node_metrics*> cluster_view::live(const view_inputs& in) const {
  std::set<std::string> alive;
  for (auto& n : in.snapshot.nodes)
    if (n.state == messages::node_state::up || n.state == messages::node_state::stale)
      if (auto it = process_of_.find(n.info.node_id); it != process_of_.end()) alive.insert(it->second);
  std::vector<const messages::node_metrics*> out;
  if (!in.own.process.empty()) out.push_back(&in.own);
  for (auto& [key, m] : by_process_)
    if (alive.contains(key) && key != in.own.process) out.push_back(&m);
  return out;
}

std::vector<messages::episode_progress> cluster_view::episodes(const view_inputs& in) const {
  std::map<uint64_t, messages::episode_progress> all;
  for (auto* p : live(in))
    for (auto& e : p->episodes) all[e.episode_id] = e;
  std::vector<messages::episode_progress> out;
  for (auto& [id, e] : all) out.push_back(e);
  return out;
}

std::vector<stuck_flag> cluster_view::check_stuck(const view_inputs& in) {
  auto procs = live(in);
  auto [median, samples] = median_turn(procs);
  current_ = detect_stuck(episodes(in), in.now_ms, median, samples, opts_);
  std::vector<stuck_flag> fresh;
  for (auto& f : current_)
    if (seen_[f.episode_id].insert(f.reason).second) {
      ++stuck_counts_[f.reason];
      fresh.push_back(f);
    }
  return fresh;
}

json cluster_view::render(messages::view_kind what, const view_inputs& in) const {
  using messages::view_kind;
  switch (what) {
    case view_kind::nodes:
      return nodes(in);
    case view_kind::actors:
      return actors(in);
    case view_kind::episodes:
      return episode_view(in);
    case view_kind::gpu:
      return gpu(in);
    case view_kind::queues:
      return queues(in);
    case view_kind::run:
      return run(in);
    case view_kind::train:
      return {{"trainer", nullptr}, {"message", "no trainer"}};
    case view_kind::metrics:
      return {{"at_ms", in.now_ms},
              {"nodes", nodes(in)},
              {"actors", actors(in)["kinds"]},
              {"episodes", episode_view(in)["summary"]},
              {"gpu", gpu(in)},
              {"run", run(in)}};
    case view_kind::episode:
    case view_kind::prometheus:
      break;
  }
  return {{"error", "view '" + to_string(what) + "' is not rendered from the heartbeats"}};
}

json cluster_view::nodes(const view_inputs& in) const {
  json out = json::array();
  std::map<std::string, int64_t> episodes_of;
  for (auto& e : episodes(in)) ++episodes_of[e.node_id];
  for (auto& n : in.snapshot.nodes) {
    json j{{"node_id", n.info.node_id}, {"role", n.info.role},
           {"state", n.state},          {"host", n.info.host},
           {"pid", n.info.pid},         {"cores", n.info.cores},
           {"gpus", n.info.gpus},       {"heartbeat_age_ms", in.now_ms - n.last_seen_ms},
           {"reason", n.reason},        {"actor_counts", n.info.actor_counts},
           {"notes", n.info.notes},     {"episodes", episodes_of[n.info.node_id]}};
    auto it = process_of_.find(n.info.node_id);
    if (it != process_of_.end()) {
      j["process"] = it->second;
      if (auto m = by_process_.find(it->second); m != by_process_.end()) {
        int64_t running = 0, mailbox = 0;
        for (auto& k : m->second.kinds) {
          running += k.running;
          mailbox += k.mailbox_size;
        }
        j["running_actors"] = running;
        j["mailbox_size"] = mailbox;
      }
    }
    out.push_back(std::move(j));
  }
  return out;
}

json cluster_view::actors(const view_inputs& in) const {
  std::map<std::string, messages::actor_kind_metrics> kinds;
  std::map<std::string, histogram> hists;
  json tops = json::array();
  json procs = json::array();
  for (auto* p : live(in)) {
    procs.push_back(p->process);
    for (auto& k : p->kinds) {
      auto& t = kinds[k.kind];
      t.kind = k.kind;
      t.running += k.running;
      t.spawned += k.spawned;
      t.mailbox_size += k.mailbox_size;
      t.mailbox_peak = std::max(t.mailbox_peak, k.mailbox_peak);
      t.processed += k.processed;
      t.processing_us += k.processing_us;
      t.errors += k.errors;
      t.restarts += k.restarts;
      for (auto& r : k.restart_reasons) t.restart_reasons.push_back(p->process + ": " + r);
      for (auto& [m, n] : k.handled) t.handled[m] += n;
      for (auto& [m, n] : k.handled_us) t.handled_us[m] += n;
      hists[k.kind].merge(k.processing_buckets);
    }
    for (auto& a : p->top)
      tops.push_back({{"process", p->process},
                      {"kind", a.kind},
                      {"id", a.id},
                      {"mailbox_size", a.mailbox_size},
                      {"mailbox_peak", a.mailbox_peak},
                      {"processed", a.processed},
                      {"busy_us", a.busy_us}});
  }
  json out = json::array();
  for (auto& [name, k] : kinds) {
    auto& h = hists[name];
    out.push_back({{"kind", name},
                   {"caf.system.running-actors", k.running},
                   {"spawned", k.spawned},
                   {"caf.actor.mailbox-size", k.mailbox_size},
                   {"mailbox_peak", k.mailbox_peak},
                   {"processed", k.processed},
                   {"caf.actor.processing-time",
                    {{"total_us", k.processing_us}, {"p50_us", h.quantile(0.5)}, {"p99_us", h.quantile(0.99)}}},
                   {"errors", k.errors},
                   {"restarts", k.restarts},
                   {"restart_reasons", k.restart_reasons},
                   {"handled", k.handled},
                   {"handled_us", k.handled_us}});
  }
  std::sort(tops.begin(), tops.end(), [](const json& a, const json& b) {
    return a["mailbox_size"] != b["mailbox_size"] ? a["mailbox_size"] > b["mailbox_size"] : a["busy_us"] > b["busy_us"];
  });
  return {{"processes", procs}, {"kinds", out}, {"top", tops}};
}

json cluster_view::episode_view(const view_inputs& in) const {
  auto list = episodes(in);
  auto [median, samples] = median_turn(live(in));
  std::map<uint64_t, std::vector<const stuck_flag*>> flags;
  for (auto& f : current_) flags[f.episode_id].push_back(&f);
  // Rationale: a 150-turn episode moves through these bands; the split shows whether
  // the fleet is early or deep in its episodes.
  std::map<std::string, int64_t> by_turn{{"0-9", 0}, {"10-49", 0}, {"50-99", 0}, {"100+", 0}};
  std::map<std::string, int64_t> by_version, by_phase;
  int64_t tokens = 0;
  json rows = json::array();
  for (auto& e : list) {
    by_turn[e.turn < 10 ? "0-9" : e.turn < 50 ? "10-49" : e.turn < 100 ? "50-99" : "100+"]++;
    by_version[std::to_string(e.policy_version)]++;
    auto colon = e.phase.find(':');
    by_phase[colon == std::string::npos ? e.phase : e.phase.substr(0, colon)]++;
    tokens += e.tokens;
    json reasons = json::array();
    for (auto* f : flags[e.episode_id]) reasons.push_back({{"reason", f->reason}, {"detail", f->detail}});
    rows.push_back({{"episode_id", e.episode_id},
                    {"task_id", e.task_id},
                    {"node_id", e.node_id},
                    {"turn", e.turn},
                    {"max_turns", e.max_turns},
                    {"tokens", e.tokens},
                    {"policy_version", e.policy_version},
                    {"phase", e.phase},
                    {"age_ms", in.now_ms - e.started_at_ms},
                    {"idle_ms", in.now_ms - e.last_progress_ms},
                    {"turn_ms", e.turn_started_ms > 0 ? in.now_ms - e.turn_started_ms : 0},
                    {"tool_calls", e.tool_calls},
                    {"tool_ms_mean", e.tool_calls > 0 ? e.tool_ms / e.tool_calls : 0.0},
                    {"repeats", e.repeats},
                    {"last_call", e.last_call},
                    {"stuck", reasons}});
  }
  json stuck = json::array();
  for (auto& f : current_)
    stuck.push_back({{"episode_id", f.episode_id}, {"node_id", f.node_id}, {"reason", f.reason}, {"detail", f.detail}});
  json summary{{"in_flight", list.size()},  {"by_turn", by_turn},         {"by_policy_version", by_version},
               {"by_phase", by_phase},      {"tokens_in_flight", tokens}, {"turn_median_ms", median},
               {"turns_finished", samples}, {"stuck_now", stuck.size()},  {"stuck_total", stuck_counts_}};
  return {{"summary", summary}, {"episodes", rows}, {"stuck", stuck}, {"run", run(in)}};
}

json cluster_view::gpu(const view_inputs& in) const {
  json pools = json::array();
  int64_t slots = 0, busy = 0, queued = 0, quarantined = 0;
  histogram all;
  for (auto* p : live(in))
    for (auto& pm : p->pools) {
      auto h = hist_of(pm.wait_buckets);
      all.merge(h);
      slots += pm.slots;
      busy += pm.busy;
      queued += pm.queued;
      quarantined += pm.slots - pm.healthy;
      pools.push_back({{"process", p->process},
                       {"name", pm.name},
                       {"slots", pm.slots},
                       {"busy", pm.busy},
                       {"idle", pm.healthy - pm.busy},
                       {"quarantined", pm.slots - pm.healthy},
                       {"queued", pm.queued},
                       {"building", pm.building},
                       {"jobs_done", pm.jobs_done},
                       {"infra_failures", pm.infra_failures},
                       {"waits", h.total},
                       {"wait_p50_ms", ms(h.quantile(0.5))},
                       {"wait_p90_ms", ms(h.quantile(0.9))},
                       {"wait_p99_ms", ms(h.quantile(0.99))}});
    }
  return {{"pools", pools},
          {"total",
           {{"slots", slots},
            {"busy", busy},
            {"queued", queued},
            {"quarantined", quarantined},
            {"wait_p50_ms", ms(all.quantile(0.5))},
            {"wait_p99_ms", ms(all.quantile(0.99))}}}};
}

json cluster_view::queues(const view_inputs& in) const {
  auto a = actors(in);
  json mailboxes = json::array();
  for (auto& k : a["kinds"])
    mailboxes.push_back(
        {{"kind", k["kind"]}, {"mailbox_size", k["caf.actor.mailbox-size"]}, {"mailbox_peak", k["mailbox_peak"]}});
  json pools = json::array();
  for (auto& p : gpu(in)["pools"])
    pools.push_back({{"process", p["process"]},
                     {"name", p["name"]},
                     {"queued", p["queued"]},
                     {"building", p["building"]},
                     {"wait_p90_ms", p["wait_p90_ms"]}});
  auto& r = in.run;
  json driver{{"active", r.active},
              {"not_started", std::max<int64_t>(0, r.planned - r.started)},
              {"in_flight", r.started - r.recorded}};
  return {{"mailboxes", mailboxes}, {"top", a["top"]}, {"pools", pools}, {"driver", driver}};
}

json cluster_view::run(const view_inputs& in) const {
  auto& r = in.run;
  const auto judged = r.recorded - r.aborted;
  auto rate = [&](int64_t n) { return judged > 0 ? static_cast<double>(n) / static_cast<double>(judged) : 0.0; };
  json rewards = json::object();
  for (auto& [reward, n] : r.rewards) rewards[std::to_string(reward)] = n;
  return {
      {"active", r.active},
      {"store_dir", r.store_dir},
      {"mode", r.mode},
      {"planned", r.planned},
      {"started", r.started},
      {"recorded", r.recorded},
      {"aborted", r.aborted},
      {"rewards", rewards},
      {"terminations", r.terminations},
      {"pass_rate", rate(r.correct)},
      {"faster_eager_rate", rate(r.faster_eager)},
      {"faster_compile_rate", rate(r.faster_compile)},
      {"turns_mean", r.recorded > 0 ? static_cast<double>(r.turns_total) / static_cast<double>(r.recorded) : 0.0},
      {"tokens_mean", r.recorded > 0 ? static_cast<double>(r.tokens_total) / static_cast<double>(r.recorded) : 0.0}};
}

std::string cluster_view::prometheus(const view_inputs& in) const {
  std::ostringstream out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  };
  auto procs = live(in);
  family("caf_system_running_actors", "gauge", "Running actors by kind (CAF 1.x caf.system.running-actors).");
  for (auto* p : procs)
    for (auto& k : p->kinds)
      out << "caf_system_running_actors{process=\"" << label_escape(p->process) << "\",name=\"" << k.kind << "\"} "
          << k.running << "\n";
  family("caf_actor_mailbox_size", "gauge",
         "Messages waiting in the actors' mailboxes, by kind (caf.actor.mailbox-size).");
  for (auto* p : procs)
    for (auto& k : p->kinds)
      out << "caf_actor_mailbox_size{process=\"" << label_escape(p->process) << "\",name=\"" << k.kind << "\"} "
          << k.mailbox_size << "\n";
  family("caf_actor_processing_time_seconds", "histogram", "Time to handle one message (caf.actor.processing-time).");
  for (auto* p : procs)
    for (auto& k : p->kinds) {
      auto labels = "process=\"" + label_escape(p->process) + "\",name=\"" + k.kind + "\"";
      int64_t cumulative = 0;
      for (size_t i = 0; i < bucket_bounds_us.size() && i < k.processing_buckets.size(); ++i) {
        cumulative += k.processing_buckets[i];
        out << "caf_actor_processing_time_seconds_bucket{" << labels << ",le=\"" << bucket_bounds_us[i] / 1e6 << "\"} "
            << cumulative << "\n";
      }
      out << "caf_actor_processing_time_seconds_bucket{" << labels << ",le=\"+Inf\"} " << k.processed << "\n";
      out << "caf_actor_processing_time_seconds_sum{" << labels << "} " << k.processing_us / 1e6 << "\n";
      out << "caf_actor_processing_time_seconds_count{" << labels << "} " << k.processed << "\n";
    }
  family("caf_actor_messages_handled_total", "counter", "Messages handled by kind and message type.");
  for (auto* p : procs)
    for (auto& k : p->kinds)
      for (auto& [type, n] : k.handled)
        out << "caf_actor_messages_handled_total{process=\"" << label_escape(p->process) << "\",name=\"" << k.kind
            << "\",type=\"" << label_escape(type) << "\"} " << n << "\n";
  family("caf_actor_errors_total", "counter", "Actors that exited with an error, by kind.");
  family("caf_actor_restarts_total", "counter", "Restarts of what an actor owns (eval workers), by kind.");
  for (auto* p : procs)
    for (auto& k : p->kinds) {
      out << "caf_actor_errors_total{process=\"" << label_escape(p->process) << "\",name=\"" << k.kind << "\"} "
          << k.errors << "\n";
      out << "caf_actor_restarts_total{process=\"" << label_escape(p->process) << "\",name=\"" << k.kind << "\"} "
          << k.restarts << "\n";
    }
  family("caf_agent_nodes", "gauge", "Cluster nodes by state.");
  std::map<std::string, int64_t> states{{"up", 0}, {"stale", 0}, {"down", 0}, {"left", 0}};
  for (auto& n : in.snapshot.nodes) ++states[to_string(n.state)];
  for (auto& [s, n] : states) out << "caf_agent_nodes{state=\"" << s << "\"} " << n << "\n";
  family("caf_agent_gpu_slots", "gauge", "GPU pool slots by state.");
  family("caf_agent_gpu_queued", "gauge", "Evaluations waiting for a slot.");
  family("caf_agent_gpu_wait_seconds", "histogram", "Wait of an evaluation for a slot.");
  for (auto* p : procs)
    for (auto& pm : p->pools) {
      auto labels = "process=\"" + label_escape(p->process) + "\",pool=\"" + pm.name + "\"";
      out << "caf_agent_gpu_slots{" << labels << ",state=\"busy\"} " << pm.busy << "\n";
      out << "caf_agent_gpu_slots{" << labels << ",state=\"idle\"} " << pm.healthy - pm.busy << "\n";
      out << "caf_agent_gpu_slots{" << labels << ",state=\"quarantined\"} " << pm.slots - pm.healthy << "\n";
      out << "caf_agent_gpu_queued{" << labels << "} " << pm.queued << "\n";
      int64_t cumulative = 0;
      for (size_t i = 0; i < bucket_bounds_us.size() && i < pm.wait_buckets.size(); ++i) {
        cumulative += pm.wait_buckets[i];
        out << "caf_agent_gpu_wait_seconds_bucket{" << labels << ",le=\"" << bucket_bounds_us[i] / 1e6 << "\"} "
            << cumulative << "\n";
      }
      auto h = hist_of(pm.wait_buckets);
      out << "caf_agent_gpu_wait_seconds_bucket{" << labels << ",le=\"+Inf\"} " << h.total << "\n";
      out << "caf_agent_gpu_wait_seconds_count{" << labels << "} " << h.total << "\n";
    }
  family("caf_agent_episodes_in_flight", "gauge", "Episodes running now.");
  out << "caf_agent_episodes_in_flight " << episodes(in).size() << "\n";
  family("caf_agent_episodes_stuck", "gauge", "Episodes flagged stuck now, by reason.");
  std::map<std::string, int64_t> now{{"no_progress", 0}, {"repeated_call", 0}, {"slow_turn", 0}};
  for (auto& f : current_) ++now[f.reason];
  for (auto& [r, n] : now) out << "caf_agent_episodes_stuck{reason=\"" << r << "\"} " << n << "\n";
  family("caf_agent_episodes_stuck_total", "counter", "Episodes ever flagged stuck, by reason.");
  for (auto& [r, n0] : now) {
    auto it = stuck_counts_.find(r);
    out << "caf_agent_episodes_stuck_total{reason=\"" << r << "\"} " << (it == stuck_counts_.end() ? 0 : it->second)
        << "\n";
  }
  auto& r = in.run;
  family("caf_agent_run_episodes", "gauge", "The run's episodes: planned, started, recorded, aborted.");
  out << "caf_agent_run_episodes{state=\"planned\"} " << r.planned << "\n"
      << "caf_agent_run_episodes{state=\"started\"} " << r.started << "\n"
      << "caf_agent_run_episodes{state=\"recorded\"} " << r.recorded << "\n"
      << "caf_agent_run_episodes{state=\"aborted\"} " << r.aborted << "\n";
  family("caf_agent_run_rewards_total", "counter", "Judged episodes by reward tier.");
  for (auto& [reward, n] : r.rewards) out << "caf_agent_run_rewards_total{reward=\"" << reward << "\"} " << n << "\n";
  return out.str();
}

}  // namespace caf_agent::observe
