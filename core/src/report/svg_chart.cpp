#include <cotune/core/report/html.hpp>
#include <cotune/core/report/svg_chart.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace cotune::core::report {
namespace {

constexpr double kMarginLeft = 64, kMarginRight = 16, kMarginTop = 30, kMarginBottom = 44;

// The round step (1, 2 or 5 times a power of ten) that cuts `span` into about `target` pieces.
double nice_step(double span, int target) {
  double raw = span / std::max(1, target);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double norm = raw / mag;
  double step = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
  return step * mag;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

Scale Scale::fit(const std::vector<double>& values, ScaleKind kind) {
  Scale s;
  s.kind = kind;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values) {
    if (!s.shows(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (kind == ScaleKind::kLog) {
    if (!(lo <= hi)) return {kind, 1, 10};
    double a = std::floor(std::log10(lo)), b = std::ceil(std::log10(hi));
    if (b <= a) b = a + 1;  // one value, or all equal to a power of ten
    return {kind, std::pow(10.0, a), std::pow(10.0, b)};
  }
  if (!(lo <= hi)) return {kind, 0, 1};
  if (lo == hi) {
    double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  double step = nice_step(hi - lo, 5);
  return {kind, std::floor(lo / step) * step, std::ceil(hi / step) * step};
}

bool Scale::shows(double v) const { return std::isfinite(v) && (kind == ScaleKind::kLinear || v > 0); }

double Scale::fraction(double v) const {
  if (kind == ScaleKind::kLog) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  return (v - lo) / (hi - lo);
}

std::vector<double> Scale::ticks(int target) const {
  std::vector<double> out;
  if (kind == ScaleKind::kLog) {
    int a = static_cast<int>(std::floor(std::log10(lo) + 1e-9)), b = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
    int every = std::max(1, (b - a + target - 1) / std::max(1, target));
    const bool minor = (b - a) <= 2;
    for (int e = a; e <= b; e += every) {
      double d = std::pow(10.0, e);
      for (double m : minor ? std::vector<double>{1, 2, 5} : std::vector<double>{1}) {
        double t = d * m;
        if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) out.push_back(t);
      }
    }
    return out;
  }
  double step = nice_step(hi - lo, target);
  // Each tick is a whole multiple of step, counted by an integer rather than summed step by step
  // (a sum gathers rounding error).
  const double first = std::ceil(lo / step - 1e-9);
  for (long long i = 0; (first + double(i)) * step <= hi + step * 1e-9; ++i) {
    const double t = (first + double(i)) * step;
    out.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return out;
}

std::string tick_label(double v) {
  char buf[32];
  double a = std::abs(v);
  if (v == 0) return "0";
  if (a >= 1e5 || a < 1e-3) std::snprintf(buf, sizeof buf, "%.3g", v);
  else std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string ramp_color(double t) {
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0);
  // From blue (#1f77b4) to orange (#ff7f0e).
  int r = static_cast<int>(0x1f + (0xff - 0x1f) * t), g = static_cast<int>(0x77 + (0x7f - 0x77) * t),
      b = static_cast<int>(0xb4 + (0x0e - 0xb4) * t);
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}

Chart::Chart(std::string title, std::string x_label, std::string y_label, Scale x, Scale y, int width, int height)
    : title_(std::move(title)),
      x_label_(std::move(x_label)),
      y_label_(std::move(y_label)),
      x_(x),
      y_(y),
      width_(width),
      height_(height) {}

double Chart::px(double x) const { return kMarginLeft + x_.fraction(x) * (width_ - kMarginLeft - kMarginRight); }
double Chart::py(double y) const { return height_ - kMarginBottom - y_.fraction(y) * (height_ - kMarginTop - kMarginBottom); }

void Chart::scatter(const std::vector<Point>& points, double radius) {
  body_ += "<g class=\"points\">";
  for (const Point& p : points) {
    if (!x_.shows(p.x) || !y_.shows(p.y)) continue;
    has_data_ = true;
    body_ += "<circle cx=\"" + fmt(px(p.x)) + "\" cy=\"" + fmt(py(p.y)) + "\" r=\"" + fmt(radius) + "\" fill=\"" +
             escape(p.color) + "\" fill-opacity=\"0.75\">";
    if (!p.tooltip.empty()) body_ += "<title>" + escape(p.tooltip) + "</title>";
    body_ += "</circle>";
  }
  body_ += "</g>";
}

void Chart::line(const std::vector<double>& x, const std::vector<double>& y, const std::string& color,
                 const std::string& legend, bool dashed, bool steps) {
  std::string pts;
  double prev_y = 0;
  bool first = true;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    if (!x_.shows(x[i]) || !y_.shows(y[i])) continue;
    if (steps && !first) pts += fmt(px(x[i])) + "," + fmt(py(prev_y)) + " ";
    pts += fmt(px(x[i])) + "," + fmt(py(y[i])) + " ";
    prev_y = y[i];
    first = false;
  }
  if (pts.empty()) return;
  has_data_ = true;
  body_ += "<polyline class=\"series\" fill=\"none\" stroke=\"" + escape(color) + "\" stroke-width=\"2\"" +
           (dashed ? " stroke-dasharray=\"6 4\"" : "") + " points=\"" + pts + "\"/>";
  if (!legend.empty()) legend_.emplace_back(color, legend);
}

void Chart::x_categories(const std::vector<std::pair<double, std::string>>& ticks) { x_categories_ = ticks; }

void Chart::note(const std::string& text) { note_ = text; }

std::string Chart::svg() const {
  const double left = kMarginLeft, right = width_ - kMarginRight, top = kMarginTop, bottom = height_ - kMarginBottom;
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" role=\"img\" width=\"" +
                  std::to_string(width_) + "\" height=\"" + std::to_string(height_) + "\" viewBox=\"0 0 " +
                  std::to_string(width_) + " " + std::to_string(height_) + "\">";
  s += "<title>" + escape(title_) + "</title>";
  s += "<text class=\"chart-title\" x=\"" + fmt(left) + "\" y=\"18\">" + escape(title_) + "</text>";
  s += "<g class=\"axes\">";
  s += "<rect x=\"" + fmt(left) + "\" y=\"" + fmt(top) + "\" width=\"" + fmt(right - left) + "\" height=\"" +
       fmt(bottom - top) + "\" fill=\"none\" stroke=\"#999\"/>";
  std::vector<std::pair<double, std::string>> xt = x_categories_;
  if (xt.empty())
    for (double t : x_.ticks()) xt.emplace_back(t, tick_label(t));
  for (const auto& [t, label] : xt) {
    if (!x_.shows(t)) continue;
    std::string x = fmt(px(t));
    s += "<line class=\"tick x\" x1=\"" + x + "\" x2=\"" + x + "\" y1=\"" + fmt(bottom) + "\" y2=\"" + fmt(bottom + 5) +
         "\" stroke=\"#999\"/><text class=\"tick-label\" x=\"" + x + "\" y=\"" + fmt(bottom + 17) +
         "\" text-anchor=\"middle\">" + escape(label) + "</text>";
  }
  for (double t : y_.ticks()) {
    std::string y = fmt(py(t));
    s += "<line class=\"tick y\" x1=\"" + fmt(left) + "\" x2=\"" + fmt(right) + "\" y1=\"" + y + "\" y2=\"" + y +
         "\" stroke=\"#eee\"/><text class=\"tick-label\" x=\"" + fmt(left - 6) + "\" y=\"" + fmt(py(t) + 4) +
         "\" text-anchor=\"end\">" + escape(tick_label(t)) + "</text>";
  }
  s += "<text class=\"axis-label\" x=\"" + fmt((left + right) / 2) + "\" y=\"" + fmt(height_ - 8.0) +
       "\" text-anchor=\"middle\">" + escape(x_label_) + (x_.kind == ScaleKind::kLog ? " (log)" : "") + "</text>";
  s += "<text class=\"axis-label\" transform=\"translate(14," + fmt((top + bottom) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + escape(y_label_) + (y_.kind == ScaleKind::kLog ? " (log)" : "") +
       "</text></g>";
  s += body_;
  std::string note = note_.empty() && !has_data_ ? "no data" : note_;
  if (!note.empty())
    s += "<text class=\"chart-note\" x=\"" + fmt((left + right) / 2) + "\" y=\"" + fmt((top + bottom) / 2) +
         "\" text-anchor=\"middle\">" + escape(note) + "</text>";
  double ly = top + 12;
  for (const auto& [color, text] : legend_) {
    s += "<g class=\"legend\"><line x1=\"" + fmt(right - 150) + "\" x2=\"" + fmt(right - 130) + "\" y1=\"" +
         fmt(ly - 4) + "\" y2=\"" + fmt(ly - 4) + "\" stroke=\"" + escape(color) +
         "\" stroke-width=\"2\"/><text x=\"" + fmt(right - 126) + "\" y=\"" + fmt(ly) + "\">" + escape(text) +
         "</text></g>";
    ly += 15;
  }
  return s + "</svg>";
}

std::string stacked_bar_svg(const std::string& title, const std::vector<std::pair<std::string, double>>& parts,
                            const std::string& unit, int width) {
  static const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  double total = 0;
  for (const auto& p : parts)
    if (std::isfinite(p.second) && p.second > 0) total += p.second;
  size_t shown = 0;
  for (const auto& p : parts) shown += std::isfinite(p.second) && p.second > 0;
  const int height = 70 + 18 * static_cast<int>(shown);
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart stacked-bar\" role=\"img\" width=\"" +
                  std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
                  std::to_string(width) + " " + std::to_string(height) + "\"><title>" + escape(title) +
                  "</title><text class=\"chart-title\" x=\"8\" y=\"18\">" + escape(title) + "</text>";
  if (total <= 0) return s + "<text class=\"chart-note\" x=\"8\" y=\"44\">no data</text></svg>";
  const double left = 8, bar_width = width - 16;
  double x = left;
  size_t i = 0;
  std::string legend;
  for (const auto& [name, value] : parts) {
    if (!(std::isfinite(value) && value > 0)) continue;
    const char* color = kColors[i % (sizeof kColors / sizeof *kColors)];
    double w = value / total * bar_width;
    char share[64];
    std::snprintf(share, sizeof share, " (%.1f%%)", 100 * value / total);
    std::string label = name + ": " + number_text(value) + " " + unit + share;
    s += "<rect class=\"segment\" x=\"" + fmt(x) + "\" y=\"28\" width=\"" + fmt(w) + "\" height=\"24\" fill=\"" +
         color + "\"><title>" + escape(label) + "</title></rect>";
    double ly = 70 + 18.0 * static_cast<double>(i);
    legend += "<rect x=\"8\" y=\"" + fmt(ly - 10) + "\" width=\"12\" height=\"12\" fill=\"" + color +
              "\"/><text x=\"26\" y=\"" + fmt(ly) + "\">" + escape(label) + "</text>";
    x += w;
    ++i;
  }
  return s + legend + "</svg>";
}

std::string bar_chart_svg(const std::string& title, const std::vector<std::pair<std::string, double>>& bars,
                          int width) {
  const int row = 22, top = 30, label_width = 170;
  const int height = top + row * static_cast<int>(bars.size()) + 10;
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart bars\" role=\"img\" width=\"" +
                  std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
                  std::to_string(width) + " " + std::to_string(height) + "\"><title>" + escape(title) +
                  "</title><text class=\"chart-title\" x=\"8\" y=\"18\">" + escape(title) + "</text>";
  double most = 0;
  for (const auto& b : bars)
    if (std::isfinite(b.second)) most = std::max(most, b.second);
  const double span = width - label_width - 70;
  for (size_t i = 0; i < bars.size(); ++i) {
    const auto& [name, value] = bars[i];
    const double y = top + row * static_cast<double>(i);
    const double w = most > 0 && std::isfinite(value) && value > 0 ? value / most * span : 0;
    s += "<text x=\"" + fmt(label_width - 6) + "\" y=\"" + fmt(y + 14) + "\" text-anchor=\"end\">" + escape(name) +
         "</text><rect class=\"bar\" x=\"" + fmt(label_width) + "\" y=\"" + fmt(y + 3) + "\" width=\"" + fmt(w) +
         "\" height=\"15\" fill=\"#1f77b4\"><title>" + escape(name + ": " + number_text(value)) +
         "</title></rect><text x=\"" + fmt(label_width + w + 4) + "\" y=\"" + fmt(y + 14) + "\">" +
         escape(number_text(value)) + "</text>";
  }
  return s + "</svg>";
}

std::string parallel_coordinates_svg(const std::string& title, const std::vector<ParallelAxis>& axes,
                                     const std::vector<ParallelLine>& lines, int width, int height) {
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart parallel\" role=\"img\" width=\"" +
                  std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
                  std::to_string(width) + " " + std::to_string(height) + "\"><title>" + escape(title) +
                  "</title><text class=\"chart-title\" x=\"8\" y=\"18\">" + escape(title) + "</text>";
  if (axes.size() < 2) return s + "<text class=\"chart-note\" x=\"8\" y=\"44\">fewer than two axes</text></svg>";
  const double left = 60, right = width - 110, top = 50, bottom = height - 30;
  auto ax = [&](size_t i) { return left + (right - left) * static_cast<double>(i) / static_cast<double>(axes.size() - 1); };
  auto ay = [&](double f) { return bottom - (bottom - top) * std::clamp(f, 0.0, 1.0); };
  for (const ParallelLine& l : lines) {
    s += "<polyline class=\"series\" fill=\"none\" stroke=\"" + escape(l.color) + "\" stroke-width=\"" +
         fmt(l.width) + "\" stroke-opacity=\"0.7\" points=\"";
    for (size_t i = 0; i < axes.size() && i < l.positions.size(); ++i) s += fmt(ax(i)) + "," + fmt(ay(l.positions[i])) + " ";
    s += "\"><title>" + escape(l.tooltip) + "</title></polyline>";
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    const ParallelAxis& a = axes[i];
    s += "<g class=\"axes\"><line x1=\"" + fmt(ax(i)) + "\" x2=\"" + fmt(ax(i)) + "\" y1=\"" + fmt(top) + "\" y2=\"" +
         fmt(bottom) + "\" stroke=\"#555\"/><text class=\"axis-label\" x=\"" + fmt(ax(i)) + "\" y=\"" + fmt(top - 12) +
         "\" text-anchor=\"middle\">" + escape(a.name) + "</text>";
    for (const auto& [f, label] : a.ticks)
      s += "<text class=\"tick-label\" x=\"" + fmt(ax(i) + 4) + "\" y=\"" + fmt(ay(f) + 4) + "\">" + escape(label) +
           "</text>";
    s += "</g>";
  }
  return s + "</svg>";
}

}  // namespace cotune::core::report
