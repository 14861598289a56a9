// observe/svg_plot.cpp: see svg_plot.hpp.
#include "observe/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace caf_agent::observe {

namespace {

// Rationale: 640x300 fits two plots side by side on a laptop screen and prints on A4.
constexpr double width = 640, height = 300, left = 60, right = 150, top = 36, bottom = 46;
constexpr double plot_w = width - left - right, plot_h = height - top - bottom;

std::string num(double v) {
  char buf[32];
  if (std::fabs(v) >= 1000 || v == std::floor(v))
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string open_svg(const std::string& id, const std::string& title) {
  return "<svg class=\"plot\" data-plot=\"" + html_escape(id) + "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         num(width) + "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
         "\"><text x=\"" + num(width / 2) + "\" y=\"20\" text-anchor=\"middle\" font-weight=\"bold\">" +
         html_escape(title) + "</text>";
}

std::string no_data(const std::string& id, const std::string& title) {
  return open_svg(id, title) + "<text class=\"no-data\" x=\"" + num(width / 2) + "\" y=\"" + num(height / 2) +
         "\" text-anchor=\"middle\" fill=\"#888\">no data in this run</text></svg>";
}

/// Axes with ticks for [x0,x1] x [y0,y1].
std::string axes(double x0, double x1, double y0, double y1, const std::string& xl, const std::string& yl) {
  std::string out = "<g class=\"axes\" stroke=\"#444\" font-size=\"11\">";
  out += "<line x1=\"" + num(left) + "\" y1=\"" + num(top + plot_h) + "\" x2=\"" + num(left + plot_w) + "\" y2=\"" +
         num(top + plot_h) + "\"/>";
  out += "<line x1=\"" + num(left) + "\" y1=\"" + num(top) + "\" x2=\"" + num(left) + "\" y2=\"" + num(top + plot_h) +
         "\"/>";
  for (int i = 0; i <= 4; ++i) {
    double fy = top + plot_h - plot_h * i / 4, vy = y0 + (y1 - y0) * i / 4;
    out +=
        "<line x1=\"" + num(left - 4) + "\" y1=\"" + num(fy) + "\" x2=\"" + num(left) + "\" y2=\"" + num(fy) + "\"/>";
    out += "<text stroke=\"none\" x=\"" + num(left - 6) + "\" y=\"" + num(fy + 4) + "\" text-anchor=\"end\">" +
           num(vy) + "</text>";
    double fx = left + plot_w * i / 4, vx = x0 + (x1 - x0) * i / 4;
    out += "<text stroke=\"none\" x=\"" + num(fx) + "\" y=\"" + num(top + plot_h + 16) + "\" text-anchor=\"middle\">" +
           num(vx) + "</text>";
  }
  out += "<text stroke=\"none\" x=\"" + num(left + plot_w / 2) + "\" y=\"" + num(height - 8) +
         "\" text-anchor=\"middle\">" + html_escape(xl) + "</text>";
  out += "<text stroke=\"none\" transform=\"translate(14," + num(top + plot_h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + html_escape(yl) + "</text></g>";
  return out;
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string line_chart(const std::string& id, const std::string& title, const std::string& x_label,
                       const std::string& y_label, const std::vector<series>& lines) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = -INFINITY;
  for (auto& s : lines)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
    }
  if (!(x1 >= x0)) return no_data(id, title);
  if (x1 == x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  std::string out = open_svg(id, title) + axes(x0, x1, y0, y1, x_label, y_label);
  int legend = 0;
  for (auto& s : lines) {
    if (s.x.empty()) continue;
    std::string d;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      double px = left + (s.x[i] - x0) / (x1 - x0) * plot_w, py = top + plot_h - (s.y[i] - y0) / (y1 - y0) * plot_h;
      d += (d.empty() ? "M" : " L") + num(px) + "," + num(py);
    }
    if (s.x.size() == 1) d += " l1,0";
    out += "<path class=\"series\" d=\"" + d + "\" fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"2\"/>";
    double ly = top + 10 + 18 * legend++;
    out += "<rect x=\"" + num(left + plot_w + 12) + "\" y=\"" + num(ly - 8) + "\" width=\"12\" height=\"4\" fill=\"" +
           s.color + "\"/><text x=\"" + num(left + plot_w + 30) + "\" y=\"" + num(ly) + "\" font-size=\"12\">" +
           html_escape(s.name) + "</text>";
  }
  return out + "</svg>";
}

std::string bar_chart(const std::string& id, const std::string& title, const std::vector<std::string>& labels,
                      const std::vector<double>& values, const std::string& color) {
  double vmax = 0;
  for (auto v : values) vmax = std::max(vmax, v);
  if (values.empty() || vmax <= 0) return no_data(id, title);
  std::string out = open_svg(id, title) + axes(0, static_cast<double>(values.size()), 0, vmax, "", "");
  double w = plot_w / static_cast<double>(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    double h = values[i] / vmax * plot_h;
    out += "<rect class=\"bar\" x=\"" + num(left + w * i + w * 0.15) + "\" y=\"" + num(top + plot_h - h) +
           "\" width=\"" + num(w * 0.7) + "\" height=\"" + num(std::max(h, 0.5)) + "\" fill=\"" + color + "\"/>";
    out += "<text x=\"" + num(left + w * i + w / 2) + "\" y=\"" + num(top + plot_h - h - 4) +
           "\" text-anchor=\"middle\" font-size=\"11\">" + num(values[i]) + "</text>";
    out += "<text x=\"" + num(left + w * i + w / 2) + "\" y=\"" + num(top + plot_h + 30) +
           "\" text-anchor=\"middle\" font-size=\"11\">" + html_escape(labels[i]) + "</text>";
  }
  return out + "</svg>";
}

std::string histogram_chart(const std::string& id, const std::string& title, const std::string& x_label,
                            const std::vector<double>& values, int bins, const std::string& color) {
  if (values.empty()) return no_data(id, title);
  auto [lo_it, hi_it] = std::minmax_element(values.begin(), values.end());
  double lo = *lo_it, hi = *hi_it;
  if (hi <= lo) hi = lo + 1;
  std::vector<double> counts(static_cast<size_t>(bins), 0);
  for (auto v : values) {
    auto b = static_cast<size_t>(std::min<double>(bins - 1, std::floor((v - lo) / (hi - lo) * bins)));
    counts[b] += 1;
  }
  double cmax = *std::max_element(counts.begin(), counts.end());
  std::string out = open_svg(id, title) + axes(lo, hi, 0, cmax, x_label, "episodes");
  double w = plot_w / bins;
  for (int i = 0; i < bins; ++i) {
    double h = counts[static_cast<size_t>(i)] / cmax * plot_h;
    if (h <= 0) continue;
    out += "<rect class=\"bar\" x=\"" + num(left + w * i + 1) + "\" y=\"" + num(top + plot_h - h) + "\" width=\"" +
           num(std::max(w - 2, 1.0)) + "\" height=\"" + num(h) + "\" fill=\"" + color + "\"/>";
  }
  return out + "</svg>";
}

}  // namespace caf_agent::observe
