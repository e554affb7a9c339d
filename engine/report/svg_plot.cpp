#include "engine/report/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/common/error.h"

namespace rose::report {

std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

double nice_step(double span, int target) {
  const double raw = span / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (factor * magnitude >= raw) return factor * magnitude;
  }
  return 10.0 * magnitude;
}

// A tick label with no more decimals than the step needs.
std::string tick_label(double value, double step) {
  const int decimals = std::max(0, int(std::ceil(-std::log10(step) - 1e-9)));
  if (std::fabs(value) < step * 1e-6) value = 0.0;  // no "-0"
  if (std::fabs(value) >= 10000 && decimals == 0) return fmt::format("{:.0f}", value);
  return fmt::format("{:.{}f}", value, decimals);
}

std::string coordinate(double v) { return fmt::format("{:.1f}", v); }

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return {lo};
  const double step = nice_step(hi - lo, target);
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(t);
  }
  return ticks;
}

std::pair<double, double> nice_range(double lo, double hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0.0, 1.0};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double pad = lo == 0.0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad, hi += pad;
    if (lo < 0.0 && hi - pad >= 0.0) lo = 0.0;
  }
  const double step = nice_step(hi - lo, 5);
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step};
}

SvgPlot::SvgPlot(std::string id, std::string title, AxisSpec x, AxisSpec y, int width, int height)
    : id_(std::move(id)),
      title_(std::move(title)),
      x_(std::move(x)),
      y_(std::move(y)),
      width_(width),
      height_(height) {
  if (!(x_.max > x_.min)) x_.max = x_.min + 1.0;
  if (!(y_.max > y_.min)) y_.max = y_.min + 1.0;
}

double SvgPlot::px(double x) const {
  const double t = std::clamp((x - x_.min) / (x_.max - x_.min), 0.0, 1.0);
  return left_ + t * (width_ - left_ - right_);
}

double SvgPlot::py(double y) const {
  const double t = std::clamp((y - y_.min) / (y_.max - y_.min), 0.0, 1.0);
  return height_ - bottom_ - t * (height_ - top_ - bottom_);
}

void SvgPlot::line(const std::vector<std::pair<double, double>>& points, const LineStyle& style,
                   const std::string& series) {
  if (points.empty()) return;
  body_ += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{}{} points=\"",
                       style.color, style.width, style.dashed ? " stroke-dasharray=\"6 4\"" : "",
                       series.empty() ? "" : " data-series=\"" + escape_html(series) + "\"");
  for (const auto& [x, y] : points) body_ += coordinate(px(x)) + "," + coordinate(py(y)) + " ";
  body_ += "\"/>\n";
}

void SvgPlot::marker(double x, double y, const std::string& color, const std::string& label) {
  body_ += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"/>\n", coordinate(px(x)),
                       coordinate(py(y)), color);
  if (label.empty()) return;
  body_ += fmt::format("<text class=\"mark\" x=\"{}\" y=\"{}\">{}</text>\n", coordinate(px(x) + 5),
                       coordinate(py(y) + 12), escape_html(label));
}

void SvgPlot::ring(double x, double y, const std::string& color, const std::string& label) {
  body_ += fmt::format(
      "<circle cx=\"{}\" cy=\"{}\" r=\"8\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
      coordinate(px(x)), coordinate(py(y)), color);
  // Above the point and anchored at its end when it sits in the right half, so it stays inside.
  const bool right_half = px(x) > (left_ + width_ - right_) / 2;
  body_ += fmt::format("<text class=\"mark\" x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>\n",
                       coordinate(px(x)), coordinate(py(y) - 12), right_half ? "end" : "start",
                       escape_html(label));
}

void SvgPlot::rect(double x0, double y0, double x1, double y1, const std::string& color,
                   const std::string& tooltip) {
  const double left = std::min(px(x0), px(x1)), right = std::max(px(x0), px(x1));
  const double top = std::min(py(y0), py(y1)), bottom = std::max(py(y0), py(y1));
  // At least a hairline, so a very short phase stays visible.
  body_ += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\">",
                       coordinate(left), coordinate(top), coordinate(std::max(0.6, right - left)),
                       coordinate(std::max(0.6, bottom - top)), color);
  if (!tooltip.empty()) body_ += "<title>" + escape_html(tooltip) + "</title>";
  body_ += "</rect>\n";
}

void SvgPlot::note(double x, double y, const std::string& text) {
  body_ += fmt::format("<text class=\"note\" x=\"{}\" y=\"{}\">{}</text>\n", coordinate(px(x)),
                       coordinate(py(y)), escape_html(text));
}

std::string SvgPlot::axes() const {
  std::string out;
  const double x0 = left_, x1 = width_ - right_, y0 = height_ - bottom_, y1 = top_;
  const std::vector<double> xticks = nice_ticks(x_.min, x_.max, 6);
  const double xstep = xticks.size() > 1 ? xticks[1] - xticks[0] : 1.0;
  for (double t : xticks) {
    out += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/><text class=\"tick\" "
        "x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        coordinate(px(t)), coordinate(y0), coordinate(y1), coordinate(y0 + 15),
        tick_label(t, xstep));
  }
  if (y_categories_.empty()) {
    const std::vector<double> yticks = nice_ticks(y_.min, y_.max, 5);
    const double ystep = yticks.size() > 1 ? yticks[1] - yticks[0] : 1.0;
    for (double t : yticks) {
      out += fmt::format(
          "<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/><text class=\"tick\" "
          "x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
          coordinate(x0), coordinate(py(t)), coordinate(x1), coordinate(x0 - 5),
          coordinate(py(t) + 4), tick_label(t, ystep));
    }
  } else {
    for (const auto& [y, name] : y_categories_) {
      out += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
                         coordinate(x0 - 5), coordinate(py(y) + 4), escape_html(name));
    }
  }
  out += fmt::format(
      "<line class=\"axis\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/><line class=\"axis\" "
      "x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{3}\"/>\n",
      coordinate(x0), coordinate(y0), coordinate(x1), coordinate(y1));
  out += fmt::format("<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     coordinate((x0 + x1) / 2), height_ - 8, escape_html(x_.label));
  out += fmt::format(
      "<text class=\"label\" transform=\"translate(12,{}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      coordinate((y0 + y1) / 2), escape_html(y_.label));
  return out;
}

namespace {

double legend_entry_width(const LegendEntry& entry) {
  return 26 + 6.2 * double(entry.label.size());
}

}  // namespace

void SvgPlot::legend(std::vector<LegendEntry> entries) {
  ROSE_ASSERT(body_.empty());  // it moves the plot area, so it comes before any drawing
  legend_ = std::move(entries);
  const std::vector<std::pair<double, int>> layout = legend_layout();
  const int rows = layout.empty() ? 1 : layout.back().second + 1;
  top_ = 46 + kLegendRow * (rows - 1);
}

void SvgPlot::y_categories(std::vector<std::pair<double, std::string>> categories) {
  ROSE_ASSERT(body_.empty());  // it moves the plot area, so it comes before any drawing
  y_categories_ = std::move(categories);
  size_t longest = 0;
  for (const auto& [y, name] : y_categories_) longest = std::max(longest, name.size());
  left_ = std::max(left_, 14 + 6.0 * double(longest));
}

std::vector<std::pair<double, int>> SvgPlot::legend_layout() const {
  std::vector<std::pair<double, int>> layout;
  const double start = left_ + 8, end = width_ - right_;
  double x = start;
  int row = 0;
  for (const LegendEntry& entry : legend_) {
    if (x > start && x + legend_entry_width(entry) > end) x = start, ++row;
    layout.emplace_back(x, row);
    x += legend_entry_width(entry);
  }
  return layout;
}

std::string SvgPlot::legend_svg() const {
  std::string out;
  const std::vector<std::pair<double, int>> layout = legend_layout();
  for (size_t i = 0; i < legend_.size(); ++i) {
    const LegendEntry& entry = legend_[i];
    const double x = layout[i].first, y = 36 + kLegendRow * layout[i].second;
    if (entry.filled_box) {
      out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"9\" fill=\"{}\"/>",
                         coordinate(x), coordinate(y - 8), entry.style.color);
    } else {
      out += fmt::format(
          "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" "
          "stroke-width=\"2\"{}/>",
          coordinate(x), coordinate(y - 4), coordinate(x + 14), coordinate(y - 4),
          entry.style.color, entry.style.dashed ? " stroke-dasharray=\"4 3\"" : "");
    }
    out += fmt::format("<text class=\"legend\" x=\"{}\" y=\"{}\">{}</text>\n", coordinate(x + 18),
                       coordinate(y), escape_html(entry.label));
  }
  return out;
}

std::string SvgPlot::render() const {
  std::string out = fmt::format(
      "<svg class=\"chart\" data-chart=\"{}\" data-x-min=\"{}\" data-x-max=\"{}\" "
      "data-y-min=\"{}\" data-y-max=\"{}\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\">\n<title>{}</title>\n",
      escape_html(id_), x_.min, x_.max, y_.min, y_.max, width_, height_, width_, height_,
      escape_html(title_), escape_html(title_));
  out += fmt::format("<text class=\"title\" x=\"{}\" y=\"14\">{}</text>\n", coordinate(left_),
                     escape_html(title_));
  out += axes();
  out += body_;
  out += legend_svg();
  out += "</svg>\n";
  return out;
}

}  // namespace rose::report
