#pragma once
/// runtime/inspector_text.hpp: the inspector's views as text (tables and the live view).
///
/// Input is the JSON the coordinator answers get_view with (observe/cluster_view.hpp);
/// `--json` prints that JSON instead.

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "messages/enums.hpp"

namespace caf_agent::runtime {

/// The views the live view shows, in the order it asks for them.
inline constexpr messages::view_kind dashboard_views[] = {messages::view_kind::nodes,    messages::view_kind::actors,
                                                          messages::view_kind::episodes, messages::view_kind::gpu,
                                                          messages::view_kind::queues,   messages::view_kind::train};

/// One view as a table (a view without a table, e.g. metrics: its JSON).
std::string render_view_text(messages::view_kind what, const nlohmann::json& view);

/// The live view from the dashboard_views (a view missing from `views` shows as empty).
std::string render_dashboard(const std::map<messages::view_kind, nlohmann::json>& views, int64_t now_ms);

}  // namespace caf_agent::runtime
