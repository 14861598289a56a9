#pragma once
/// observe/svg_plot.hpp: small inline-SVG charts for the run report (no scripts, no fonts
/// beyond the browser's default), so the report is one self-contained offline file.

#include <string>
#include <vector>

namespace caf_agent::observe {

/// One line of a line chart.
struct series {
  std::string name;
  std::string color;
  std::vector<double> x, y;
};

/// A line chart; `id` names the plot (data-plot attribute). Empty series: a "no data" note.
std::string line_chart(const std::string& id, const std::string& title, const std::string& x_label,
                       const std::string& y_label, const std::vector<series>& lines);

/// A bar chart of `values` under `labels`.
std::string bar_chart(const std::string& id, const std::string& title, const std::vector<std::string>& labels,
                      const std::vector<double>& values, const std::string& color);

/// A histogram of `values` in `bins` equal bins.
std::string histogram_chart(const std::string& id, const std::string& title, const std::string& x_label,
                            const std::vector<double>& values, int bins, const std::string& color);

/// Escapes text for HTML/SVG.
std::string html_escape(const std::string& s);

}  // namespace caf_agent::observe
