/// gpu_pool/worker_protocol.cpp: msgpack encode/decode (via nlohmann::json) and framing.
#include "gpu_pool/worker_protocol.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "base/named_enum.hpp"

namespace caf_agent::gpu_pool {
namespace {

using json = nlohmann::json;

/// A worker response's "status" (skills/eval_worker/caf_agent_eval/worker.py).
enum class response_status : uint8_t { ok, infra_error };
CAF_AGENT_ENUM_NAMES(response_status, "ok", "infra_error")

/// The response's status; nullopt when missing or not one of the names.
std::optional<response_status> status_of(const json& j) {
  auto it = j.find("status");
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return base::parse_name<response_status>(it->get<std::string>());
}

double num_or_nan(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::numeric_limits<double>::quiet_NaN();
  return it->get<double>();
}

std::string str_or_empty(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

template <class T>
void put(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

template <class T>
void get(const json& j, const char* key, std::optional<T>& v) {
  if (auto it = j.find(key); it != j.end() && !it->is_null()) v = it->get<T>();
}

json options_json(const eval_options& o) {
  json j = json::object();
  put(j, "atol", o.atol);
  put(j, "rtol", o.rtol);
  put(j, "num_checks", o.num_checks);
  put(j, "call_timeout_s", o.call_timeout_s);
  put(j, "build_timeout_s", o.build_timeout_s);
  json t = json::object();
  put(t, "budget_s", o.timing.budget_s);
  put(t, "max_iters", o.timing.max_iters);
  put(t, "min_iters", o.timing.min_iters);
  put(t, "fresh_baselines", o.timing.fresh_baselines);
  if (!t.empty()) j["timing"] = t;
  return j;
}

json verdict_json(const verdict& v) {
  json checks = json::array();
  for (const auto& c : v.checks) checks.push_back({{"index", c.index}, {"passed", c.passed}, {"reason", c.reason}});
  json j = {{"correct", v.correct},
            {"reason", v.reason},
            {"checks", checks},
            {"flags", v.flags},
            {"compile_log", v.compile_log},
            {"log", v.log},
            {"cached_build", v.cached_build}};
  j["timings"] = json::object();
  if (v.has_timings) {
    const auto& t = v.times;
    j["timings"] = {{"candidate_ms", t.candidate_ms},
                    {"candidate_wall_ms", t.candidate_wall_ms},
                    {"eager_ms", t.eager_ms},
                    {"compile_ms", t.compile_ms},
                    {"roofline_floor_ms", t.roofline_floor_ms},
                    {"iterations", t.iterations},
                    {"ci95", t.ci95}};
    j["speedup_eager"] = v.speedup_eager;
    j["speedup_compile"] = v.speedup_compile;
  }
  return j;
}

verdict verdict_from(const json& j) {
  verdict v;
  v.correct = j.value("correct", false);
  v.reason = str_or_empty(j, "reason");
  v.compile_log = str_or_empty(j, "compile_log");
  v.log = str_or_empty(j, "log");
  if (auto it = j.find("cached_build"); it != j.end() && it->is_boolean()) v.cached_build = it->get<bool>();
  if (auto it = j.find("flags"); it != j.end() && it->is_array())
    for (const auto& f : *it)
      if (f.is_string()) v.flags.push_back(f.get<std::string>());
  if (auto it = j.find("checks"); it != j.end() && it->is_array())
    for (const auto& c : *it)
      v.checks.push_back({c.value("index", 0), c.value("passed", false), str_or_empty(c, "reason")});
  if (auto it = j.find("timings"); it != j.end() && it->is_object() && it->contains("candidate_ms")) {
    const json& t = *it;
    v.has_timings = true;
    v.times.candidate_ms = num_or_nan(t, "candidate_ms");
    v.times.candidate_wall_ms = num_or_nan(t, "candidate_wall_ms");
    v.times.eager_ms = num_or_nan(t, "eager_ms");
    v.times.compile_ms = num_or_nan(t, "compile_ms");
    v.times.roofline_floor_ms = num_or_nan(t, "roofline_floor_ms");
    v.times.iterations = t.value("iterations", 0);
    if (auto ci = t.find("ci95"); ci != t.end() && ci->is_object())
      for (const auto& [name, pair] : ci->items())
        if (pair.is_array())
          for (const auto& x : pair)
            if (x.is_number()) v.times.ci95[name].push_back(x.get<double>());
  }
  double se = num_or_nan(j, "speedup_eager"), sc = num_or_nan(j, "speedup_compile");
  v.speedup_eager = std::isnan(se) ? 0.0 : se;
  v.speedup_compile = std::isnan(sc) ? 0.0 : sc;
  return v;
}

std::string to_msgpack(const json& j) {
  auto bytes = json::to_msgpack(j);
  return {bytes.begin(), bytes.end()};
}

/// The fields every worker response starts with; true when it is an infra error (complete).
template <class Response>
bool read_head(const json& j, Response& r) {
  r.job_id = str_or_empty(j, "job_id");
  if (status_of(j) != response_status::infra_error) return false;
  r.infra_error = true;
  r.error = str_or_empty(j, "error");
  return true;
}

std::optional<json> parse(std::string_view payload, std::string* error) {
  json j = json::from_msgpack(payload.begin(), payload.end(), true, false);
  if (j.is_discarded() || !j.is_object()) {
    if (error) *error = "payload is not a msgpack map";
    return std::nullopt;
  }
  return j;
}

}  // namespace

std::string encode_request(const eval_request& r) {
  json files = json::object();
  for (const auto& [path, text] : r.files) files[path] = text;
  json j = {{"op", "eval"},
            {"job_id", r.job_id},
            {"mode", messages::name_of(r.mode)},
            {"task", {{"name", r.task_name}, {"model_py", r.model_py}}},
            {"files", files},
            {"seed_secret", r.seed_secret},
            {"device", r.device},
            {"options", options_json(r.options)}};
  return to_msgpack(j);
}

std::optional<eval_request> decode_request(std::string_view payload, std::string* error) {
  auto j = parse(payload, error);
  if (!j) return std::nullopt;
  try {
    eval_request r;
    r.job_id = str_or_empty(*j, "job_id");
    r.mode = messages::parse_name<eval_mode>(str_or_empty(*j, "mode")).value_or(eval_mode::verify);
    const json& task = j->at("task");
    r.task_name = str_or_empty(task, "name");
    r.model_py = str_or_empty(task, "model_py");
    for (const auto& [k, v] : j->at("files").items()) r.files[k] = v.get<std::string>();
    r.seed_secret = str_or_empty(*j, "seed_secret");
    r.device = str_or_empty(*j, "device");
    const json& o = j->at("options");
    get(o, "atol", r.options.atol);
    get(o, "rtol", r.options.rtol);
    get(o, "num_checks", r.options.num_checks);
    get(o, "call_timeout_s", r.options.call_timeout_s);
    get(o, "build_timeout_s", r.options.build_timeout_s);
    if (auto t = o.find("timing"); t != o.end()) {
      get(*t, "budget_s", r.options.timing.budget_s);
      get(*t, "max_iters", r.options.timing.max_iters);
      get(*t, "min_iters", r.options.timing.min_iters);
      get(*t, "fresh_baselines", r.options.timing.fresh_baselines);
    }
    return r;
  } catch (const json::exception& e) {
    if (error) *error = std::string("malformed request: ") + e.what();
    return std::nullopt;
  }
}

std::string encode_response(const eval_response& r) {
  json j = {{"job_id", r.job_id}, {"status", r.infra_error ? response_status::infra_error : response_status::ok}};
  if (r.infra_error)
    j["error"] = r.error;
  else
    j["verdict"] = verdict_json(r.result);
  return to_msgpack(j);
}

std::optional<eval_response> decode_response(std::string_view payload, std::string* error) {
  auto j = parse(payload, error);
  if (!j) return std::nullopt;
  eval_response r;
  if (read_head(*j, r)) return r;
  if (status_of(*j) != response_status::ok || !j->contains("verdict") || !(*j)["verdict"].is_object()) {
    if (error) *error = "response has no status \"ok\" with a verdict map";
    return std::nullopt;
  }
  try {
    r.result = verdict_from((*j)["verdict"]);
  } catch (const json::exception& e) {
    if (error) *error = std::string("malformed verdict: ") + e.what();
    return std::nullopt;
  }
  return r;
}

bool has_kernel_sources(const std::map<std::string, std::string>& files) {
  // The translation units among skills/eval_worker/caf_agent_eval/static_checks.py's
  // CPP_SUFFIXES (headers alone compile to nothing).
  static const char* suffixes[] = {".cpp", ".cc", ".cu"};
  for (const auto& [path, text] : files) {
    if (path.rfind("kernels/", 0) != 0) continue;
    for (const char* suf : suffixes)
      if (path.ends_with(suf)) return true;
  }
  return false;
}

std::string encode_build_request(const build_request& r) {
  json files = json::object();
  for (const auto& [path, text] : r.files) files[path] = text;
  json j = {{"op", "build"}, {"job_id", r.job_id}, {"files", files}};
  if (!r.flavour.empty()) j["flavour"] = r.flavour;
  put(j, "timeout_s", r.timeout_s);
  return to_msgpack(j);
}

std::optional<build_response> decode_build_response(std::string_view payload, std::string* error) {
  auto j = parse(payload, error);
  if (!j) return std::nullopt;
  build_response r;
  if (read_head(*j, r)) return r;
  auto ok = j->find("ok");
  if (status_of(*j) != response_status::ok || ok == j->end() || !ok->is_boolean()) {
    if (error) *error = "build response has no status \"ok\" with a boolean \"ok\"";
    return std::nullopt;
  }
  r.ok = ok->get<bool>();
  r.cached = j->value("cached", false);
  r.log = str_or_empty(*j, "log");
  if (auto it = j->find("seconds"); it != j->end() && it->is_object())
    for (const auto& [step, secs] : it->items())
      if (secs.is_number()) r.seconds[step] = secs.get<double>();
  return r;
}

std::string encode_build_response(const build_response& r) {
  json j = {{"job_id", r.job_id}, {"status", r.infra_error ? response_status::infra_error : response_status::ok}};
  if (r.infra_error) {
    j["error"] = r.error;
  } else {
    j["ok"] = r.ok;
    j["cached"] = r.cached;
    j["log"] = r.log;
    j["seconds"] = r.seconds;
  }
  return to_msgpack(j);
}

std::string frame(std::string_view payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  std::string out;
  out.reserve(4 + payload.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  out.append(payload);
  return out;
}

void frame_reader::feed(std::string_view bytes) {
  buf_.append(bytes);
}

std::optional<std::string> frame_reader::next(std::string* error) {
  if (buf_.size() < 4) return std::nullopt;
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(buf_[i]);
  if (n > max_frame_bytes) {
    if (error) *error = "frame of " + std::to_string(n) + " bytes exceeds the limit";
    return std::nullopt;
  }
  if (buf_.size() < 4 + static_cast<std::size_t>(n)) return std::nullopt;
  std::string payload = buf_.substr(4, n);
  buf_.erase(0, 4 + static_cast<std::size_t>(n));
  return payload;
}

}  // namespace caf_agent::gpu_pool
