// observe/registry.cpp: see registry.hpp.
#include "observe/registry.hpp"

#include <algorithm>
#include <chrono>

#include <unistd.h>

namespace caf_agent::observe {

namespace {

// Rationale: the last 8 reasons name a pattern (the same crash over and over) without
// letting a crash loop grow the heartbeat.
constexpr size_t kept_reasons = 8;

int64_t wall_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

void keep_reason(std::deque<std::string>& reasons, std::string reason) {
  // Rationale: a reason is for a human; 300 characters name it, more bloats the heartbeat.
  if (reason.size() > 300) reason = reason.substr(0, 300) + "...";
  reasons.push_back(std::move(reason));
  while (reasons.size() > kept_reasons) reasons.pop_front();
}

}  // namespace

void actor_cell::handled(type_key key, std::string (*name)(const void*), const void* ctx, int64_t mailbox, int64_t ns) {
  mailbox_.store(mailbox, std::memory_order_relaxed);
  if (mailbox > mailbox_peak_.load(std::memory_order_relaxed)) mailbox_peak_.store(mailbox, std::memory_order_relaxed);
  processed_.fetch_add(1, std::memory_order_relaxed);
  busy_ns_.fetch_add(ns, std::memory_order_relaxed);
  std::lock_guard lock{mutex_};
  hist_.add(ns / 1000);
  for (auto& t : types_)
    if (t.key == key) {
      ++t.count;
      t.ns += ns;
      return;
    }
  types_.push_back({key, name(ctx), 1, ns});
}

messages::actor_top actor_cell::top() const {
  return {kind_,
          id_,
          mailbox_.load(std::memory_order_relaxed),
          mailbox_peak_.load(std::memory_order_relaxed),
          processed_.load(std::memory_order_relaxed),
          busy_ns_.load(std::memory_order_relaxed) / 1000};
}

void actor_cell::add_to(messages::actor_kind_metrics& out, histogram& hist) const {
  out.mailbox_size += mailbox_.load(std::memory_order_relaxed);
  out.mailbox_peak = std::max(out.mailbox_peak, mailbox_peak_.load(std::memory_order_relaxed));
  out.processed += processed_.load(std::memory_order_relaxed);
  out.processing_us += busy_ns_.load(std::memory_order_relaxed) / 1000;
  std::lock_guard lock{mutex_};
  hist.merge(hist_);
  for (auto& t : types_) {
    out.handled[t.name] += t.count;
    out.handled_us[t.name] += t.ns / 1000;
  }
}

metrics_registry& metrics_registry::process() {
  static metrics_registry instance;
  return instance;
}

std::shared_ptr<actor_cell> metrics_registry::add(const std::string& kind, uint64_t id) {
  auto cell = std::make_shared<actor_cell>(kind, id);
  std::lock_guard lock{mutex_};
  auto& k = kinds_[kind];
  ++k.spawned;
  ++k.running;
  live_[cell.get()] = cell;
  return cell;
}

void metrics_registry::remove(const std::shared_ptr<actor_cell>& cell, const std::string& error) {
  if (!cell) return;
  std::lock_guard lock{mutex_};
  auto& k = kinds_[cell->kind()];
  --k.running;
  messages::actor_kind_metrics mine;
  cell->add_to(mine, k.ended_hist);
  k.ended.processed += mine.processed;
  k.ended.processing_us += mine.processing_us;
  k.ended.mailbox_peak = std::max(k.ended.mailbox_peak, mine.mailbox_peak);
  for (auto& [t, n] : mine.handled) k.ended.handled[t] += n;
  for (auto& [t, us] : mine.handled_us) k.ended.handled_us[t] += us;
  if (!error.empty()) {
    ++k.errors;
    keep_reason(k.reasons, "error: " + error);
  }
  live_.erase(cell.get());
}

void metrics_registry::note_restart(const std::string& kind, const std::string& reason) {
  if (!enabled()) return;
  std::lock_guard lock{mutex_};
  auto& k = kinds_[kind];
  ++k.restarts;
  keep_reason(k.reasons, "restart: " + reason);
}

void metrics_registry::episode_update(uint64_t id, const std::function<void(messages::episode_progress&)>& f) {
  if (!enabled()) return;
  std::lock_guard lock{mutex_};
  auto& e = episodes_[id];
  e.episode_id = id;
  f(e);
}

void metrics_registry::episode_done(uint64_t id) {
  std::lock_guard lock{mutex_};
  episodes_.erase(id);
}

void metrics_registry::turn_finished(int64_t us) {
  if (!enabled()) return;
  std::lock_guard lock{mutex_};
  turns_.add(us);
}

void metrics_registry::pool_update(const messages::pool_metrics& m) {
  if (!enabled()) return;
  std::lock_guard lock{mutex_};
  auto& p = pools_[m.name];
  auto waits = std::move(p.wait_buckets);
  p = m;
  p.wait_buckets = std::move(waits);
}

void metrics_registry::pool_wait(const std::string& name, int64_t us) {
  if (!enabled()) return;
  std::lock_guard lock{mutex_};
  pool_waits_[name].add(us);
}

messages::node_metrics metrics_registry::snapshot(size_t top_n) const {
  messages::node_metrics out;
  out.process = process_key();
  out.sampled_at_ms = wall_ms();
  std::lock_guard lock{mutex_};
  std::map<std::string, histogram> hists;
  std::map<std::string, messages::actor_kind_metrics> kinds;
  for (auto& [name, k] : kinds_) {
    auto& m = kinds[name];
    m = k.ended;
    m.kind = name;
    m.mailbox_size = 0;
    m.spawned = k.spawned;
    m.running = k.running;
    m.errors = k.errors;
    m.restarts = k.restarts;
    m.restart_reasons.assign(k.reasons.begin(), k.reasons.end());
    hists[name] = k.ended_hist;
  }
  std::vector<messages::actor_top> tops;
  for (auto& [ptr, cell] : live_) {
    cell->add_to(kinds[cell->kind()], hists[cell->kind()]);
    tops.push_back(cell->top());
  }
  for (auto& [name, m] : kinds) {
    m.processing_buckets = hists[name].to_vector();
    out.kinds.push_back(std::move(m));
  }
  // The busiest: by mailbox first (work piling up), then by time spent handling.
  auto by_mailbox = tops;
  auto n = std::min(top_n, tops.size());
  std::partial_sort(
      by_mailbox.begin(), by_mailbox.begin() + static_cast<long>(n), by_mailbox.end(), [](auto& a, auto& b) {
        return a.mailbox_size != b.mailbox_size ? a.mailbox_size > b.mailbox_size : a.mailbox_peak > b.mailbox_peak;
      });
  std::partial_sort(tops.begin(), tops.begin() + static_cast<long>(n), tops.end(),
                    [](auto& a, auto& b) { return a.busy_us > b.busy_us; });
  for (size_t i = 0; i < n; ++i) out.top.push_back(by_mailbox[i]);
  for (size_t i = 0; i < n; ++i)
    if (std::none_of(out.top.begin(), out.top.end(), [&](auto& t) { return t.id == tops[i].id; }))
      out.top.push_back(tops[i]);
  for (auto& [id, e] : episodes_) out.episodes.push_back(e);
  out.turn_buckets = turns_.to_vector();
  for (auto& [name, p] : pools_) {
    out.pools.push_back(p);
    if (auto it = pool_waits_.find(name); it != pool_waits_.end())
      out.pools.back().wait_buckets = it->second.to_vector();
  }
  return out;
}

void metrics_registry::reset() {
  std::lock_guard lock{mutex_};
  kinds_.clear();
  live_.clear();
  episodes_.clear();
  turns_ = {};
  pools_.clear();
  pool_waits_.clear();
}

std::string process_key() {
  static const std::string key = [] {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    return std::string{host} + ":" + std::to_string(getpid());
  }();
  return key;
}

}  // namespace caf_agent::observe
