#include "sandbox/tool_types.hpp"

namespace caf_agent::sandbox {

nlohmann::json to_json(const tool_result& r) {
  return {{"call_id", r.call_id},
          {"output", r.output},
          {"status", to_string(r.status)},
          {"elapsed_ms", r.elapsed_ms},
          {"exit_code", r.exit_code}};
}

}  // namespace caf_agent::sandbox
