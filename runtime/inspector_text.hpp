#pragma once
/// runtime/inspector_text.hpp: the inspector's views as text (tables and the live view).
///
/// Input is the JSON the coordinator answers get_view with (observe/cluster_view.hpp);
/// `--json` prints that JSON instead.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace caf_agent::runtime {

/// True for a view the coordinator knows.
bool is_inspector_view(const std::string& what);

/// "nodes, actors, ..." for messages.
std::string inspector_views();

/// One view as a table.
std::string render_view_text(const std::string& what, const nlohmann::json& view);

/// The live view from the views {nodes, actors, episodes, gpu, queues, train}.
std::string render_dashboard(const nlohmann::json& views, int64_t now_ms);

}  // namespace caf_agent::runtime
