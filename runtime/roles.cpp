// runtime/roles.cpp: see roles.hpp.
#include "runtime/roles.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include <caf/all.hpp>

#include "actors/gpu_pool.hpp"
#include "actors/policy_server.hpp"
#include "actors/rollout_manager.hpp"
#include "actors/tool_executor.hpp"
#include "base/log.hpp"
#include "messages/type_ids.hpp"
#include "policy/text/chat_template.hpp"
#include "policy/text/json.hpp"
#include "runtime/learner_role.hpp"
#include "runtime/process.hpp"
#include "sandbox/episode_sandbox.hpp"

#ifdef CAF_AGENT_HAS_LIBTORCH_POLICY
#include "policy/model/engine_service.hpp"
#include "rollout/engine_policy.hpp"
#include "serving/engine_chat_service.hpp"
#include "serving/openai_server.hpp"
#endif

namespace caf_agent::runtime {

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in{p};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The system prompt: rollout.skill_file, else the workspace's SKILL.md.
std::string system_prompt(const rollout_config& r) {
  return read_text(r.skill_file.empty() ? fs::path{r.skills_dir} / "workspace" / "SKILL.md" : fs::path{r.skill_file});
}

/// The schemas of the tools the prompt describes: every tool the sandbox serves, or those named
/// in rollout.prompt_tools (in that order). The sandbox serves all of them either way.
std::optional<policy::json_array> prompt_tool_schemas(const rollout_config& r, std::string& error) {
  auto all = sandbox::episode_sandbox::tool_schemas();
  auto chosen = nlohmann::json::array();
  std::string names;
  for (auto& t : all) names += (names.empty() ? "" : ", ") + t["function"]["name"].get<std::string>();
  for (auto& name : r.prompt_tools) {
    auto it =
        std::find_if(all.begin(), all.end(), [&](const nlohmann::json& t) { return t["function"]["name"] == name; });
    if (it == all.end()) {
      error = "rollout.prompt_tools: '" + name + "' is not a tool (" + names + ")";
      return std::nullopt;
    }
    chosen.push_back(*it);
  }
  auto schemas = policy::parse_json((r.prompt_tools.empty() ? all : chosen).dump());
  if (!schemas || !schemas->is_array()) return policy::json_array{};
  return schemas->as_array();
}

caf::actor peer(const std::map<std::string, caf::actor>& peers, const std::string& name) {
  auto it = peers.find(name);
  return it == peers.end() ? caf::actor{} : it->second;
}

std::string start_gpu_pool(caf::actor_system& sys, const app_config& cfg, const std::string& node_id,
                           const std::map<std::string, caf::actor>& peers, role_actors& out) {
  std::vector<std::unique_ptr<gpu_pool::slot_backend>> backends;
  auto& g = cfg.gpu_pool;
  // One eval worker process: a slot's (device = its GPU) or a builder's (CPU cores; the device
  // picks the flavour, cuda: nvcc). They share one build root, so a slot's job finds its
  // library built by a builder.
  auto worker = [&](int gpu, int32_t threads, const std::string& log_name) {
    gpu_pool::worker_slot_options w;
    w.python = g.worker_python;
    w.package_dir = cfg.rollout.skills_dir + "/eval_worker";
    w.device = g.device == gpu_pool::pool_device::cuda ? "cuda:" + std::to_string(gpu) : "cpu";
    w.threads = threads;
    w.deadline_ms = g.job_deadline_s * 1000;
    w.stderr_path = cfg.runtime.run_dir + "/" + log_name;
    w.build_root = fs::absolute(fs::path{cfg.runtime.run_dir} / "eval-build").string();
    return w;
  };
  for (int i = 0; i < g.slots; ++i) {
    if (g.backend == gpu_pool::pool_backend::sim)
      backends.push_back(gpu_pool::make_sim_slot(cfg.policy.sim_eval_ms_mean, 0.7, 1000 + i));
    else
      backends.push_back(
          gpu_pool::make_worker_slot(worker(i, g.cpu_threads_per_slot, "eval-worker-" + std::to_string(i) + ".log")));
  }
  std::vector<std::unique_ptr<gpu_pool::build_backend>> builders;
  for (int i = 0; g.backend != gpu_pool::pool_backend::sim && i < g.builders(); ++i)
    builders.push_back(
        gpu_pool::make_worker_builder(worker(i % g.slots, 1, "eval-builder-" + std::to_string(i) + ".log")));
  if (g.backend != gpu_pool::pool_backend::sim && !fs::exists(g.worker_python))
    return "gpu_pool.worker_python '" + g.worker_python + "' does not exist (run ./x setup)";
  std::error_code ec;
  fs::create_directories(cfg.runtime.run_dir, ec);
  const auto builder_count = static_cast<int32_t>(builders.size());
  // A role's actors and peers are kept untyped, by name (pool_of converts back).
  auto pool = caf::actor_cast<caf::actor>(spawn_gpu_pool(sys, g, std::move(backends), std::move(builders)));
  out.actors.push_back(pool);
  out.named["gpu_pool"] = pool;
  out.counts["gpu_pool_manager"] = 1;
  out.counts[g.backend == gpu_pool::pool_backend::sim ? "sim_slots" : "eval_slots"] = g.slots;
  if (builder_count > 0) out.counts["eval_builders"] = builder_count;
  if (auto coord = peer(peers, "coordinator"))
    caf::send_as(pool, coord,
                 messages::service_announce{node_id, messages::service_name(messages::service_kind::gpu_pool)});
  return {};
}

std::shared_ptr<rollout::policy_backend> make_backend(const app_config& cfg, std::string& error) {
  auto& p = cfg.policy;
  if (p.backend == policy::backend_kind::sim) {
    rollout::sim_policy_options o;
    o.latency_ms_mean = p.sim_latency_ms_mean;
    return rollout::make_sim_policy(o);
  }
  if (p.backend == policy::backend_kind::openai) {
    rollout::openai_policy_options o;
    o.base_url = p.base_url;
    o.model = p.model_name;
    o.timeout_ms = p.request_timeout_ms;
    o.max_retries = p.max_retries;
    if (!p.api_key_env.empty()) {
      const char* key = std::getenv(p.api_key_env.c_str());
      if (!key) {
        error = "policy.api_key_env: the environment variable " + p.api_key_env + " is not set";
        return nullptr;
      }
      o.api_key = key;
    }
    auto tools = prompt_tool_schemas(cfg.rollout, error);
    if (!tools) return nullptr;
    o.tools = std::move(*tools);
    return rollout::make_openai_policy(o, error);
  }
  error = "policy.backend '" + to_string(p.backend) + "' is not available in this build";
  return nullptr;
}

/// A node's policy server and what episodes need to talk to it.
struct policy_endpoint {
  policy_actor server;
  std::shared_ptr<const policy::tokenizer> tokenizer;  ///< token-level backends only
  policy::chat_format chat_format;                     ///< the checkpoint's template, with `tokenizer`
  int64_t context_limit = 0;                           ///< 0: no limit beyond the config's
  bool render_messages = false;                        ///< chat backends take messages_json
  std::string description;
#ifdef CAF_AGENT_HAS_LIBTORCH_POLICY
  std::shared_ptr<policy::engine_service> engine;  ///< libtorch: shared with the HTTP server
#endif
};

/// The replay backend. Token-level when `policy.model_dir` holds a tokenizer.json (the
/// default's small model after ./x setup): episodes then keep the exact token sequence of the
/// recorded conversation under that checkpoint's chat template, with the loss mask on the
/// recorded assistant turns, so `trajectory_tool batch --stage rft` can train on it. Without
/// a tokenizer there the replay stays text-level (records without tokens), and says so.
std::string start_replay_policy(caf::actor_system& sys, const app_config& cfg, policy_endpoint& out) {
  auto& p = cfg.policy;
  rollout::replay_tokens tokens;
  const auto tok_path = fs::path{p.model_dir} / "tokenizer.json";
  std::string mode = "text-level (no " + tok_path.string() + ")";
  if (!p.model_dir.empty() && fs::exists(tok_path)) {
    auto tok = policy::tokenizer::from_file(tok_path.string());
    if (!tok) return "policy.model_dir: " + tok.error().message;
    auto chat_format = policy::checkpoint_chat_format(p.model_dir);
    if (!chat_format) return "policy.model_dir: " + chat_format.error().message;
    auto im_end = tok.value().token_to_id(chat_format->im_end);
    if (!im_end) return "policy.model_dir: the tokenizer has no " + chat_format->im_end + " token";
    out.tokenizer = std::make_shared<const policy::tokenizer>(std::move(tok.value()));
    out.chat_format = std::move(chat_format.value());
    tokens = {out.tokenizer, *im_end};
    mode = "token-level with the chat format of " + p.model_dir;
  }
  std::string error;
  std::shared_ptr<rollout::policy_backend> backend =
      rollout::make_replay_policy(p.replay_path, 0, error, std::move(tokens));
  if (!backend) return error;
  out.description = "replay " + p.replay_path + ", " + mode;
  out.server = spawn_policy_server(sys, backend, 1);
  return {};
}

std::string start_policy(caf::actor_system& sys, const app_config& cfg, policy_endpoint& out) {
  auto& p = cfg.policy;
  if (p.backend == policy::backend_kind::libtorch) {
#ifdef CAF_AGENT_HAS_LIBTORCH_POLICY
    auto tok = policy::tokenizer::from_file((fs::path{p.model_dir} / "tokenizer.json").string());
    if (!tok) return "policy.model_dir: " + tok.error().message;
    auto chat_format = policy::checkpoint_chat_format(p.model_dir);
    if (!chat_format) return "policy.model_dir: " + chat_format.error().message;
    auto im_end = tok.value().token_to_id(chat_format->im_end);
    if (!im_end)
      return "policy.model_dir: the tokenizer has no " + chat_format->im_end + " token (the chat format " +
             chat_format->name + " needs it)";
    policy::service_options o;
    o.engine.model_dir = p.model_dir;
    o.engine.device = p.device;
    o.engine.dtype = p.dtype;
    o.engine.max_batch = p.max_batch;
    o.engine.max_context = p.max_context;
    o.engine.prefix_cache = p.prefix_cache;
    o.engine.prefill_chunk = p.prefill_chunk;
    o.engine.prefill_wait_steps = p.prefill_wait_steps;
    o.engine.cache_attention = p.cache_attention;
    o.engine.kv_layout = p.kv_layout;
    o.engine.kv_block_size = p.kv_block_size;
    o.engine.kv_cache_tokens = p.kv_cache_tokens;
    o.engine.kv_cache_dtype = p.kv_cache_dtype;
    o.engine.cuda_graphs = p.cuda_graphs;
    o.engine.overlap = p.overlap;
    o.engine.flash_decode_shares = p.flash_decode_shares;
    o.engine.decode_gemv_rows = p.decode_gemv_rows;
    o.engine.decode_mma_rows = p.decode_mma_rows;
    o.engine.programmatic_launch = p.programmatic_launch;
    o.max_queued = std::max<int32_t>(cfg.rollout.max_concurrent_episodes * 2, p.max_batch * 4);
    // Rationale: roles started in one process (the local role runs inference and rollout side
    // by side) share one engine per model and settings instead of loading the model twice;
    // each role keeps its own policy server actor in front of it.
    static std::mutex shared_mutex;
    static std::map<std::string, std::weak_ptr<policy::engine_service>> shared_engines;
    const auto key = p.model_dir + "|" + p.device + "|" + to_string(p.dtype) + "|" + std::to_string(p.max_batch) + "|" +
                     std::to_string(p.max_context) + "|" + (p.prefix_cache ? "cache" : "no-cache") + "|" +
                     std::to_string(p.prefill_chunk) + "|" + to_string(p.cache_attention) + "|" +
                     to_string(p.kv_layout) + "|" + std::to_string(p.kv_block_size) + "|" +
                     std::to_string(p.kv_cache_tokens) + "|" + to_string(p.kv_cache_dtype) + "|" +
                     (p.cuda_graphs ? "graphs" : "eager") + "|" + (p.overlap ? "overlap" : "plain") + "|" +
                     std::to_string(p.prefill_wait_steps) + "|" + std::to_string(p.decode_mma_rows);
    std::shared_ptr<policy::engine_service> service;
    bool shared = false;
    {
      std::lock_guard lock(shared_mutex);
      service = shared_engines[key].lock();
      shared = service != nullptr;
      if (!service) {
        auto engine = policy::engine_service::open(o);
        if (!engine) return "policy.model_dir: " + engine.error().message;
        // When the last role lets the engine go: what it did, once per engine.
        service = std::shared_ptr<policy::engine_service>(engine.value().release(), [](policy::engine_service* e) {
          const auto x = e->stats();
          if (x.steps > 0)
            log_info("policy", "engine ran " + std::to_string(x.steps) +
                                   " steps: " + std::to_string(x.engine.decode_steps) + " decode (" +
                                   std::to_string(x.engine.overlapped_steps) + " overlapped, " +
                                   std::to_string(x.engine.overlap_dropped_rows) + " rows dropped), " +
                                   std::to_string(x.engine.prefilled_tokens) + " prompt tokens prefilled, " +
                                   std::to_string(x.engine.reused_tokens) + " found cached");
          delete e;
        });
        shared_engines[key] = service;
      }
    }
    out.tokenizer = std::make_shared<const policy::tokenizer>(std::move(tok.value()));
    out.chat_format = std::move(chat_format.value());
    out.context_limit = service->max_context();
    out.description = "libtorch " + p.model_dir + " on " + p.device + " (" + to_string(p.dtype) + ", batch " +
                      std::to_string(p.max_batch) + ", context " + std::to_string(service->max_context()) + ")" +
                      (shared ? ", the engine this process already loaded" : "");
    out.engine = service;
    std::shared_ptr<rollout::policy_backend> script;
    if (!p.script.empty()) {  // teacher-forced replies: the engine's real passes over a recording's tokens
      std::string error;
      script = rollout::make_replay_policy(p.script, 0, error, {out.tokenizer, *im_end});
      if (!script) return "policy.script: " + error;
      out.description += ", replies teacher-forced from " + p.script;
    }
    out.server = spawn_policy_server(
        sys, rollout::make_engine_policy(std::move(service), out.tokenizer, *im_end, std::move(script)));
    return {};
#else
    return "policy.backend 'libtorch' needs a build with LibTorch (CAF_AGENT_WITH_TORCH=ON)";
#endif
  }
  std::string error;
  if (p.backend == policy::backend_kind::replay) return start_replay_policy(sys, cfg, out);
  auto backend = make_backend(cfg, error);
  if (!backend) return error;
  out.description = backend->name();
  out.render_messages = p.backend == policy::backend_kind::openai;
  out.server = spawn_policy_server(sys, backend, p.backend == policy::backend_kind::openai ? p.concurrency : 1);
  return {};
}

messages::sampling_params sampling_of(const policy_config& p) {
  messages::sampling_params s;
  s.temperature = static_cast<float>(p.temperature);
  s.top_p = static_cast<float>(p.top_p);
  s.top_k = p.top_k;
  s.max_new_tokens = p.max_new_tokens;
  s.seed = p.seed;
  return s;
}

std::string start_rollout(caf::actor_system& sys, const app_config& cfg, const std::string& node_id,
                          const std::map<std::string, caf::actor>& peers, role_actors& out) {
  std::string tools_error;
  auto schemas = prompt_tool_schemas(cfg.rollout, tools_error);
  if (!schemas) return tools_error;
  policy_endpoint pol;
  if (auto error = start_policy(sys, cfg, pol); !error.empty()) return error;
  auto& r = cfg.rollout;
  tool_executor_options t;
  t.executors = r.tool_executors;
  t.mode = cfg.policy.backend == policy::backend_kind::sim ? tool_mode::sim : tool_mode::sandbox;
  t.sandbox = r.tool_sandbox(cfg.sandbox);
  t.template_dir = r.skills_dir + "/workspace";
  t.harness_dir = r.skills_dir + "/eval_worker/caf_agent_eval";
  auto venv = fs::absolute(fs::path{cfg.gpu_pool.worker_python}).parent_path().parent_path();
  if (fs::exists(venv / "pyvenv.cfg")) {
    t.extra_ro_binds.push_back(venv.string());
    t.path_env = (venv / "bin").string() + ":/usr/local/bin:/usr/bin:/bin";
  }
  auto tools = spawn_tool_executors(sys, t);
  if (t.mode == tool_mode::sandbox) {
    const auto& cg = sandbox::probe_cgroups();
    out.notes.push_back(cg.mode == sandbox::cgroup_mode::none
                            ? "sandbox: no per-episode cgroup: " + cg.detail
                            : "sandbox: per-episode cgroups (" + to_string(cg.mode) + "), " + cg.detail);
    log_info("rollout", out.notes.back());
  }
  auto policy = pol.server;
  log_info("rollout", "policy: " + pol.description);
  if (auto coord = peer(peers, "coordinator"))
    caf::send_as(caf::actor_cast<caf::actor>(policy), coord,
                 messages::service_announce{node_id, messages::service_name(messages::service_kind::policy)});
  rollout_manager_options m;
  m.rollout = r;
#ifdef CAF_AGENT_HAS_LIBTORCH_POLICY
  if (pol.engine) {  // used with rollout.kv_admission
    m.kv_capacity_tokens = pol.engine->kv_capacity_tokens();
    m.kv_initial_context = pol.engine->max_context();  // the cautious start
  }
#endif
  m.node_id = node_id;
  m.coordinator = peer(peers, "coordinator");
  m.pool = pool_of(peer(peers, "gpu_pool"));
  m.env.policy = policy;
  m.env.tools = tools;
  m.env.system_text = system_prompt(r);
  m.env.tool_schemas = std::move(*schemas);
  m.env.context_limit_tokens =
      pol.context_limit > 0 ? std::min<int64_t>(r.context_limit_tokens, pol.context_limit) : r.context_limit_tokens;
  m.env.tokenizer = pol.tokenizer;
  m.env.chat_format = pol.chat_format;
  m.env.render_messages = pol.render_messages;
  m.env.sampling = sampling_of(cfg.policy);
  m.env.observation_limit_bytes = r.observation_limit_bytes;
  m.env.policy_timeout_ms = cfg.policy.request_timeout_ms;
  m.env.eval_timeout_ms = cfg.gpu_pool.job_deadline_s * 1000 * 4;
  if (cfg.train.plays_demonstrations()) {
    // The trainer's RFT stage plays these recordings on this node (start_episode::policy);
    // token-level with policy.model_dir's tokenizer, like the replay backend.
    auto demo_cfg = cfg;
    demo_cfg.policy.replay_path = cfg.train.rft.demonstrations;
    policy_endpoint demo;
    if (auto error = start_replay_policy(sys, demo_cfg, demo); !error.empty())
      return "train.rft.demonstrations: " + error;
    if (!demo.tokenizer)
      return "train.rft.demonstrations: needs policy.model_dir with a tokenizer.json (token-level records to train on)";
    log_info("rollout", "demonstrations: " + demo.description);
    m.demonstrations = demo.server;
    out.actors.push_back(caf::actor_cast<caf::actor>(demo.server));
  }
  auto manager = caf::actor_cast<caf::actor>(spawn_rollout_manager(sys, m));
  out.actors.insert(out.actors.end(),
                    {manager, caf::actor_cast<caf::actor>(policy), caf::actor_cast<caf::actor>(tools)});
  out.named["rollout_manager"] = manager;
  out.counts["rollout_manager"] = 1;
  out.counts["policy_server"] = 1;
  out.counts["tool_executors"] = t.mode == tool_mode::sim ? 0 : r.tool_executors;
  out.counts["max_episodes"] = r.max_concurrent_episodes;
  return {};
}

}  // namespace

std::string start_role(caf::actor_system& sys, messages::node_role role, const app_config& cfg,
                       const std::map<std::string, caf::actor>& peers, role_actors& out) {
  auto node_id = (peers.contains("local") ? "local/" : "") + make_node_id(role);
  out.counts["node_agent"] = 1;
  if (role == messages::node_role::gpu_pool) return start_gpu_pool(sys, cfg, node_id, peers, out);
  if (role == messages::node_role::rollout) return start_rollout(sys, cfg, node_id, peers, out);
  if (role == messages::node_role::inference) {
    policy_endpoint pol;
    if (auto error = start_policy(sys, cfg, pol); !error.empty()) return error;
    log_info("inference", "policy: " + pol.description);
#ifdef CAF_AGENT_HAS_LIBTORCH_POLICY
    if (pol.engine) {  // serve the same engine over OpenAI-compatible HTTP
      auto tok = policy::tokenizer::from_file((fs::path{cfg.policy.model_dir} / "tokenizer.json").string());
      if (!tok) return "policy.model_dir: " + tok.error().message;
      auto name =
          cfg.policy.model_name.empty() ? fs::path{cfg.policy.model_dir}.filename().string() : cfg.policy.model_name;
      // The checkpoint's own template (a template this renderer cannot reproduce is refused).
      auto format = policy::checkpoint_chat_format(cfg.policy.model_dir);
      if (!format) return "policy.model_dir: " + format.error().message;
      const auto chat_format_name = format->name;
      auto chat =
          serving::engine_chat_service::create(pol.engine, std::move(tok.value()), name, std::move(format.value()));
      if (!chat) return "inference: " + chat.error().message;
      std::shared_ptr<serving::chat_service> service = std::move(chat.value());
      serving::server_options so;
      so.host = cfg.policy.serve_host;
      so.port = static_cast<uint16_t>(cfg.policy.serve_port);
      auto http = serving::openai_server::start(*service, so);
      if (!http) return "policy.serve_port: " + http.error().message;
      std::shared_ptr<serving::openai_server> server = std::move(http.value());
      log_info("inference", "serving model '" + name + "' (chat format " + chat_format_name +
                                ") over OpenAI-compatible HTTP at " + server->base_url());
      out.resources.push_back(service);  // released after the server (reverse order)
      out.resources.push_back(server);
      out.counts["http_server"] = 1;
    }
#endif
    if (auto coord = peer(peers, "coordinator"))
      caf::send_as(caf::actor_cast<caf::actor>(pol.server), coord,
                   messages::service_announce{node_id, messages::service_name(messages::service_kind::policy)});
    out.actors.push_back(caf::actor_cast<caf::actor>(pol.server));
    out.named["policy"] = caf::actor_cast<caf::actor>(pol.server);
    out.counts["policy_server"] = 1;
    return {};
  }
  if (role == messages::node_role::learner) return start_learner_role(sys, cfg, node_id, peers, out);
  return "role '" + to_string(role) + "' has no actors to start";
}

void stop_role(caf::actor_system& sys, role_actors& actors) {
  caf::scoped_actor self{sys};
  for (auto& a : actors.actors) {
    self->monitor(a);
    self->send_exit(a, caf::exit_reason::user_shutdown);
  }
  for (size_t i = 0; i < actors.actors.size(); ++i)
    self->receive([](caf::down_msg&) {}, caf::after(std::chrono::seconds(10)) >> [] {});
  actors.actors.clear();
  while (!actors.resources.empty()) actors.resources.pop_back();
}

}  // namespace caf_agent::runtime
