#include "sandbox/tool_types.hpp"

namespace caf_agent::sandbox {

std::string_view to_string(tool_status status) {
  switch (status) {
    case tool_status::ok: return "ok";
    case tool_status::error: return "error";
    case tool_status::timeout: return "timeout";
    case tool_status::killed: return "killed";
    case tool_status::internal: return "internal";
  }
  return "internal";
}

nlohmann::json to_json(const tool_result& r) {
  return {{"call_id", r.call_id},       {"output", r.output},       {"status", std::string(to_string(r.status))},
          {"elapsed_ms", r.elapsed_ms}, {"exit_code", r.exit_code}};
}

}  // namespace caf_agent::sandbox
