#pragma once
// A small inline-SVG plotter for the HTML report: one frame with linear axes (ticks, units,
// labels), lines, markers, bars and a legend. Output is plain SVG text, no script, no fonts.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rose::report {

// Text safe inside HTML/SVG element content and attribute values.
std::string escape_html(std::string_view text);

// Round tick positions covering [lo, hi] (steps of 1, 2 or 5 x 10^k), about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);
// The smallest range with round ends that holds [lo, hi]; a single point gets some width.
std::pair<double, double> nice_range(double lo, double hi);

struct AxisSpec {
  std::string label;  // with the unit, e.g. "TTFT (ms)"
  double min = 0, max = 1;
};

struct LineStyle {
  std::string color = "#1f77b4";
  bool dashed = false;
  double width = 2.0;
};

struct LegendEntry {
  std::string label;
  LineStyle style;
  bool filled_box = false;  // a colour box (bars, areas) instead of a line sample
};

class SvgPlot {
 public:
  // `id` names the chart (data-chart attribute, used by tests); `title` is drawn above it.
  SvgPlot(std::string id, std::string title, AxisSpec x, AxisSpec y, int width = 560,
          int height = 320);

  // `series` names the line (data-series attribute) so a test can find it and count its points.
  void line(const std::vector<std::pair<double, double>>& points, const LineStyle& style,
            const std::string& series = "");
  // A dot with a short label beside it (a percentile on a CDF); no label when empty.
  void marker(double x, double y, const std::string& color, const std::string& label);
  // A hollow ring around a point, with a label above it: singles out one point of a curve.
  void ring(double x, double y, const std::string& color, const std::string& label);
  // A filled rectangle in data coordinates (timeline bars, histogram bars).
  void rect(double x0, double y0, double x1, double y1, const std::string& color,
            const std::string& tooltip = "");
  // Text in the plot area at data coordinates.
  void note(double x, double y, const std::string& text);
  // Entries wrap onto more rows above the plot when they do not fit on one. Call before drawing.
  void legend(std::vector<LegendEntry> entries);
  // Replaces numeric y tick labels with category names at the given positions (bar charts).
  // Widens the left margin to fit the longest name. Call before drawing.
  void y_categories(std::vector<std::pair<double, std::string>> categories);

  std::string render() const;

  double px(double x) const;
  double py(double y) const;

 private:
  std::string axes() const;
  std::string legend_svg() const;
  // Where each legend entry starts (x, row), wrapping at the plot's right edge.
  std::vector<std::pair<double, int>> legend_layout() const;

  std::string id_, title_;
  AxisSpec x_, y_;
  int width_, height_;
  double left_ = 64, right_ = 16, top_ = 46, bottom_ = 46;  // title and legend above
  static constexpr double kLegendRow = 15;
  std::string body_;
  std::vector<LegendEntry> legend_;
  std::vector<std::pair<double, std::string>> y_categories_;
};

}  // namespace rose::report
