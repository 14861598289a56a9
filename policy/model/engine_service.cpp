// policy/model/engine_service.cpp: see engine_service.hpp.
#include "policy/model/engine_service.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

namespace caf_agent::policy {

struct engine_service::impl {
  std::unique_ptr<generation_engine> engine;
  int32_t max_queued = 0;
  int32_t max_batch = 0;

  mutable std::mutex mtx;
  std::condition_variable wake;
  std::deque<std::pair<generation_request, service_callback>> queue;  // guarded by mtx
  bool stopping = false;                                              // guarded by mtx
  service_stats counters;                                             // guarded by mtx
  std::thread thread;

  // Engine-thread state.
  std::unordered_map<uint64_t, service_callback> in_engine;

  void run();
  void finish(uint64_t id, generation_result r) {
    auto it = in_engine.find(id);
    if (it == in_engine.end()) return;
    auto done = std::move(it->second);
    in_engine.erase(it);
    {
      std::lock_guard lock(mtx);
      ++counters.completed;
      counters.generated_tokens += r.tokens.size();
      --counters.outstanding;
    }
    done(std::move(r), {});
  }
  void fail_all_in_engine(const std::string& why) {
    for (auto& [id, done] : in_engine) {
      engine->cancel(id);
      {
        std::lock_guard lock(mtx);
        ++counters.failed;
        --counters.outstanding;
      }
      done({}, why);
    }
    in_engine.clear();
  }
};

void engine_service::impl::run() {
  for (;;) {
    std::deque<std::pair<generation_request, service_callback>> admitted;
    {
      std::unique_lock lock(mtx);
      wake.wait(lock, [&] { return stopping || !queue.empty() || !engine->idle(); });
      if (stopping) {
        admitted.swap(queue);
        lock.unlock();
        fail_all_in_engine("engine service stopped");
        for (auto& [req, done] : admitted) {
          {
            std::lock_guard l(mtx);
            ++counters.failed;
            --counters.outstanding;
          }
          done({}, "engine service stopped");
        }
        return;
      }
      admitted.swap(queue);
    }
    for (auto& [req, done] : admitted) {
      auto id = engine->submit(std::move(req));
      if (!id) {  // checked at submit(); only "engine busy" can get here, never with max_waiting >= max_queued
        {
          std::lock_guard lock(mtx);
          ++counters.failed;
          --counters.outstanding;
        }
        done({}, id.error().message);
        continue;
      }
      in_engine.emplace(id.value(), std::move(done));
    }
    if (engine->idle()) continue;
    const auto rows =
        static_cast<uint64_t>(std::min<size_t>(engine->running() + engine->waiting(), static_cast<size_t>(max_batch)));
    auto finished = engine->step();
    const auto engine_counters = engine->stats();  // on this thread, as engine::stats() asks
    {
      std::lock_guard lock(mtx);
      ++counters.steps;
      counters.batch_rows_total += rows;
      counters.engine = engine_counters;
    }
    if (!finished) {
      fail_all_in_engine(finished.error().message);
      continue;
    }
    for (auto& r : finished.value()) finish(r.id, std::move(r));
  }
}

result<std::unique_ptr<engine_service>> engine_service::open(const service_options& options) {
  if (options.max_queued < 1) return fail("engine service: max_queued must be >= 1");
  auto engine_opts = options.engine;
  // The service bounds the queue itself; the engine must never refuse what it admitted.
  engine_opts.max_waiting = std::max(engine_opts.max_waiting, options.max_queued);
  auto engine = generation_engine::open(engine_opts);
  if (!engine) return engine.error();
  auto p = std::make_unique<impl>();
  p->engine = std::move(engine.value());
  p->max_queued = options.max_queued;
  p->max_batch = engine_opts.max_batch;
  auto* raw = p.get();
  p->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<engine_service>(new engine_service(std::move(p)));
}

engine_service::engine_service(std::unique_ptr<impl> impl) : impl_(std::move(impl)) {}

engine_service::~engine_service() {
  {
    std::lock_guard lock(impl_->mtx);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

status engine_service::submit(generation_request request, service_callback done) {
  auto& s = *impl_;
  if (!done) return fail("engine service: submit needs a callback");
  if (auto valid = s.engine->check(request); !valid) {
    std::lock_guard lock(s.mtx);
    ++s.counters.rejected;
    return valid;
  }
  {
    std::lock_guard lock(s.mtx);
    if (s.stopping) {
      ++s.counters.rejected;
      return fail("engine service: stopped");
    }
    if (s.counters.outstanding >= s.max_queued) {
      ++s.counters.rejected;
      return fail("engine service: busy, " + std::to_string(s.counters.outstanding) +
                  " requests queued or running (max_queued " + std::to_string(s.max_queued) + ")");
    }
    ++s.counters.submitted;
    ++s.counters.outstanding;
    s.queue.emplace_back(std::move(request), std::move(done));
  }
  s.wake.notify_one();
  return {};
}

status engine_service::load_weights(const std::string& model_dir, uint64_t version) {
  return impl_->engine->load_weights(model_dir, version);
}

uint64_t engine_service::policy_version() const {
  return impl_->engine->policy_version();
}
int32_t engine_service::max_context() const {
  return impl_->engine->max_context();
}
int64_t engine_service::kv_capacity_tokens() const {
  return impl_->engine->kv_capacity_tokens();
}
int32_t engine_service::vocab_size() const {
  return impl_->engine->vocab_size();
}
int32_t engine_service::max_batch() const {
  return impl_->max_batch;
}

service_stats engine_service::stats() const {
  std::lock_guard lock(impl_->mtx);
  return impl_->counters;
}

}  // namespace caf_agent::policy
