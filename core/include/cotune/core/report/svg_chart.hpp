// SVG charts for the HTML report: axes with linear or log scales, scatter, lines and a stacked bar.
// Every chart is a self-contained <svg> element (no scripts, no external resources); all text in it
// is escaped. Points that a scale cannot show (non-finite, or <= 0 on a log scale) are left out.
#ifndef COTUNE_CORE_REPORT_SVG_CHART_HPP_
#define COTUNE_CORE_REPORT_SVG_CHART_HPP_

#include <string>
#include <utility>
#include <vector>

namespace cotune::core::report {

enum class ScaleKind { kLinear, kLog };

// Maps a data interval onto [0, 1] and chooses round tick values.
struct Scale {
  ScaleKind kind = ScaleKind::kLinear;
  double lo = 0, hi = 1;

  // The interval covering `values` (those the scale can show), widened to round numbers. No
  // usable value: [0, 1] (log: [1, 10]). One value, or all equal: an interval around it.
  static Scale fit(const std::vector<double>& values, ScaleKind kind = ScaleKind::kLinear);
  bool shows(double v) const;       // finite, and > 0 on a log scale
  double fraction(double v) const;  // position of v in [lo, hi] as 0..1 (not clamped)
  // About `target` round values in [lo, hi]: 1-2-5 steps on linear scales, decades on log scales
  // (with 2 and 5 in between when the interval spans few decades).
  std::vector<double> ticks(int target = 5) const;
};

// A tick label: "0", "2.5", "1e+06", "0.001" -- short and exact enough to read.
std::string tick_label(double v);

// One scatter point: position, fill colour and a tooltip (<title>).
struct Point {
  double x = 0, y = 0;
  std::string color = "#1f77b4";
  std::string tooltip;
};

class Chart {
 public:
  Chart(std::string title, std::string x_label, std::string y_label, Scale x, Scale y, int width = 640,
        int height = 340);

  void scatter(const std::vector<Point>& points, double radius = 3.5);
  // A polyline through (x[i], y[i]); `steps` draws it as a staircase (best-so-far curves).
  void line(const std::vector<double>& x, const std::vector<double>& y, const std::string& color,
            const std::string& legend, bool dashed = false, bool steps = false);
  // Replaces the numeric x ticks with labelled positions (categorical parameters).
  void x_categories(const std::vector<std::pair<double, std::string>>& ticks);
  // Shown in the middle of the plot area (e.g. "no measured trials yet").
  void note(const std::string& text);

  std::string svg() const;

 private:
  double px(double x) const;
  double py(double y) const;

  std::string title_, x_label_, y_label_, note_;
  Scale x_, y_;
  int width_, height_;
  std::vector<std::pair<double, std::string>> x_categories_;
  std::vector<std::pair<std::string, std::string>> legend_;  // colour, text
  std::string body_;
  bool has_data_ = false;
};

// A horizontal stacked bar of named parts (e.g. the step time split into compute, communication,
// bubble, optimizer), with a legend giving each part's value and share. Parts <= 0 are omitted.
std::string stacked_bar_svg(const std::string& title, const std::vector<std::pair<std::string, double>>& parts,
                            const std::string& unit, int width = 640);

// Horizontal bars, one a row in the order given, each labelled with its name and value, scaled to
// the largest (e.g. the importance of each parameter).
std::string bar_chart_svg(const std::string& title, const std::vector<std::pair<std::string, double>>& bars,
                          int width = 640);

// A parallel-coordinates plot: one vertical axis per dimension, one polyline per item through its
// position on each axis (0 bottom .. 1 top).
struct ParallelAxis {
  std::string name;
  std::vector<std::pair<double, std::string>> ticks;  // position 0..1 and its label
};
struct ParallelLine {
  std::vector<double> positions;  // one per axis, 0..1
  std::string color = "#1f77b4";
  double width = 1.5;
  std::string tooltip;
};
std::string parallel_coordinates_svg(const std::string& title, const std::vector<ParallelAxis>& axes,
                                     const std::vector<ParallelLine>& lines, int width = 900, int height = 380);

// A colour for position t in [0, 1] on a blue-to-orange ramp (e.g. when a trial ran).
std::string ramp_color(double t);

}  // namespace cotune::core::report

#endif  // COTUNE_CORE_REPORT_SVG_CHART_HPP_
