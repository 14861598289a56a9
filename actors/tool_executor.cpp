// actors/tool_executor.cpp: see tool_executor.hpp.
#include "actors/tool_executor.hpp"

#include <chrono>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include <caf/all.hpp>

#include "actors/observed_actor.hpp"
#include "base/log.hpp"
#include "base/remove_tree.hpp"
#include "messages/type_ids.hpp"
#include "sandbox/episode_sandbox.hpp"
#include "sandbox/submission.hpp"
#include "sandbox/workspace_layout.hpp"

namespace caf_agent {
using sandbox_ptr = std::shared_ptr<sandbox::episode_sandbox>;
}  // namespace caf_agent

// Rationale: sandbox handles only travel between a router and its own executors,
// inside one process; they are never serialized.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(caf_agent::sandbox_ptr)

namespace caf_agent {

namespace {

using namespace messages;

/// A submission's files (path -> text), as the router's lookup answers them.
using files_map = std::map<std::string, std::string>;

// -- executor (detached: its calls block) ------------------------------------

tool_response run_tool(const sandbox_ptr& box, const tool_request& req) {
  tool_response out;
  out.call_id = req.call_id;
  sandbox::tool_call call;
  call.id = req.call_id;
  call.name = req.name;
  auto args = nlohmann::json::parse(req.arguments_json, nullptr, false);
  call.arguments = args.is_discarded() ? nlohmann::json::object() : args;
  auto r = box->execute(call);
  out.output = r.output;
  out.exit_code = r.exit_code;
  out.elapsed_ms = r.elapsed_ms;
  out.status = r.status;
  return out;
}

caf::behavior executor(caf::event_based_actor* self, tool_executor_options opts) {
  return {
      [=](tool_request& req, sandbox_ptr box) -> tool_response { return run_tool(box, req); },
      [=](atoms::open, uint64_t episode, task_spec& task) -> caf::message {
        std::string error;
        auto dir = sandbox::make_workspace(opts.sandbox.workspace_root, opts.template_dir, opts.harness_dir, episode,
                                           task.model_py, error);
        if (!error.empty()) return caf::make_message(error, sandbox_ptr{});
        sandbox::sandbox_config cfg;
        opts.sandbox.apply_to(cfg);
        cfg.workspace = dir;
        cfg.protected_paths = sandbox::protected_workspace_paths();
        for (auto& b : opts.extra_ro_binds) cfg.extra_ro_binds.push_back({b, b});
        if (!opts.path_env.empty()) cfg.path_env = opts.path_env;
        auto created = sandbox::episode_sandbox::create(std::move(cfg));
        if (!created.sandbox) {
          base::remove_tree(std::filesystem::path(dir).string());
          return caf::make_message("sandbox: " + created.error, sandbox_ptr{});
        }
        return caf::make_message(std::string{}, sandbox_ptr{std::move(created.sandbox)});
      },
      [=](atoms::close, sandbox_ptr box) -> bool {
        box->close();
        return true;
      },
      [=](atoms::lookup, sandbox_ptr box) -> caf::message {
        auto sub = sandbox::collect_submission(box->config().workspace.string());
        return caf::make_message(std::move(sub.error), std::move(sub.files));
      },
  };
}

// -- router ----------------------------------------------------------------

/// A queued job: given an idle executor, issues the typed request and calls
/// `release` when the executor is free again.
using job_fn = std::function<void(caf::actor exec, std::function<void()> release)>;

struct router_state {
  tool_executor_options opts;
  std::vector<caf::actor> idle;
  std::deque<job_fn> queue;
  std::map<uint64_t, sandbox_ptr> boxes;
  std::mt19937_64 rng{7};
  std::map<std::string, double> stats;
  std::map<uint64_t, caf::typed_response_promise<tool_response>> sim_waiting;
  uint64_t sim_seq = 0;
  static inline const char* name = "tool_router";
};

/// The router's own type: its protocol and the simulated calls' timers (sim mode).
using router_handle = tool_router_actor::extend<caf::reacts_to<atoms::done, uint64_t, tool_response>>;

using router_actor = observed_actor<router_state, router_handle::base>;

void pump(router_actor* self) {
  auto& st = self->state;
  while (!st.idle.empty() && !st.queue.empty()) {
    auto exec = st.idle.back();
    st.idle.pop_back();
    auto job = std::move(st.queue.front());
    st.queue.pop_front();
    job(exec, [self, exec] {
      self->state.idle.push_back(exec);
      pump(self);
    });
  }
}

/// Queues a request for an executor and relays its typed reply to the client.
/// The queue only grows past its capacity by episodes' single outstanding
/// calls, which rollout admission bounds.
template <class... Reply, class... Ts>
caf::typed_response_promise<Reply...> enqueue(router_actor* self, std::function<void(Reply&...)> on_reply, Ts... args) {
  auto promise = self->make_response_promise<Reply...>();
  auto msg = caf::make_message(std::move(args)...);
  self->state.queue.push_back([=](caf::actor exec, std::function<void()> release) mutable {
    self->request(exec, caf::infinite, msg)
        .then(
            [=](Reply&... xs) mutable {
              if (on_reply) on_reply(xs...);
              promise.deliver(xs...);
              release();
            },
            [=](caf::error& err) mutable {
              promise.deliver(err);
              release();
            });
  });
  auto& peak = self->state.stats["queue_peak"];
  peak = std::max(peak, double(self->state.queue.size()));
  pump(self);
  return promise;
}

tool_response sim_response(const tool_request& req) {
  tool_response r;
  r.call_id = req.call_id;
  r.status = tool_status::ok;
  r.output = req.name + ": ok (sim)";
  return r;
}

caf::typed_response_promise<std::string> on_open(router_actor* self, uint64_t episode, task_spec& task) {
  auto promise = self->make_response_promise<std::string>();
  auto msg = caf::make_message(atoms::open::value, episode, std::move(task));
  self->state.queue.push_back([=](caf::actor exec, std::function<void()> release) mutable {
    self->request(exec, caf::infinite, msg)
        .then(
            [=](std::string& error, sandbox_ptr& box) mutable {
              if (box) self->state.boxes[episode] = box;
              promise.deliver(error);
              release();
            },
            [=](caf::error& err) mutable {
              promise.deliver(err);
              release();
            });
  });
  pump(self);
  return promise;
}

caf::typed_response_promise<tool_response> on_sim_tool(router_actor* self, const tool_request& req) {
  auto& st = self->state;
  auto rp = self->make_response_promise<tool_response>();
  std::exponential_distribution<double> d{1.0 / std::max(0.001, st.opts.sim_latency_ms)};
  auto delay = std::chrono::microseconds(int64_t(d(st.rng) * 1000));
  auto id = ++st.sim_seq;
  st.sim_waiting.emplace(id, rp);
  self->delayed_send(self, delay, atoms::done::value, id, sim_response(req));
  return rp;
}

router_handle::behavior_type router(router_actor* self, tool_executor_options opts) {
  self->state.opts = opts;
  bool sim = opts.mode == tool_mode::sim;
  if (!sim)
    for (int i = 0; i < opts.executors; ++i)
      self->state.idle.push_back(self->spawn<caf::detached + caf::linked>(executor, opts));
  return {
      [=](atoms::open, uint64_t episode, task_spec& task) -> caf::typed_response_promise<std::string> {
        if (!sim) return on_open(self, episode, task);
        auto rp = self->make_response_promise<std::string>();
        rp.deliver(std::string{});
        return rp;
      },
      [=](tool_request& req) -> caf::typed_response_promise<tool_response> {
        self->state.stats["calls"] += 1;
        if (sim) return on_sim_tool(self, req);
        auto it = self->state.boxes.find(req.episode_id);
        if (it != self->state.boxes.end()) return enqueue<tool_response>(self, {}, req, it->second);
        tool_response r;
        r.call_id = req.call_id;
        r.status = tool_status::internal;
        r.output = "no sandbox is open for episode " + std::to_string(req.episode_id);
        auto rp = self->make_response_promise<tool_response>();
        rp.deliver(std::move(r));
        return rp;
      },
      [=](atoms::done, uint64_t id, tool_response& r) {
        auto it = self->state.sim_waiting.find(id);
        if (it == self->state.sim_waiting.end()) return;
        it->second.deliver(std::move(r));
        self->state.sim_waiting.erase(it);
      },
      [=](atoms::close, uint64_t episode) -> caf::typed_response_promise<bool> {
        auto it = self->state.boxes.find(episode);
        if (it != self->state.boxes.end()) {
          auto box = it->second;
          self->state.boxes.erase(it);
          return enqueue<bool>(self, {}, atoms::close::value, box);
        }
        auto rp = self->make_response_promise<bool>();
        rp.deliver(false);
        return rp;
      },
      [=](atoms::lookup, uint64_t episode) -> caf::typed_response_promise<std::string, files_map> {
        auto it = self->state.boxes.find(episode);
        if (it != self->state.boxes.end())
          return enqueue<std::string, files_map>(self, {}, atoms::lookup::value, it->second);
        auto rp = self->make_response_promise<std::string, files_map>();
        // Sim mode has no workspaces: an empty submission goes to the (sim) pool.
        rp.deliver(std::string{sim ? "" : "no sandbox is open for this episode"}, files_map{});
        return rp;
      },
      [=](atoms::stats) -> std::map<std::string, double> {
        auto s = self->state.stats;
        s["open_sandboxes"] = double(self->state.boxes.size());
        s["queued"] = double(self->state.queue.size());
        return s;
      },
  };
}

}  // namespace

tool_router_actor spawn_tool_executors(caf::actor_system& sys, tool_executor_options opts) {
  return sys.spawn(router, std::move(opts));
}

}  // namespace caf_agent
