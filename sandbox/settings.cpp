// sandbox/settings.cpp: see settings.hpp.
#include "sandbox/settings.hpp"

#include "sandbox/config.hpp"

namespace caf_agent::sandbox {

void sandbox_settings::apply_to(sandbox_config& episode) const {
  episode.isolation = isolation;
  episode.default_timeout_s = static_cast<double>(bash_timeout_s);
  episode.output_cap_bytes = static_cast<std::size_t>(max_output_bytes);
  episode.keep_workspace = keep_workspaces;
}

}  // namespace caf_agent::sandbox
