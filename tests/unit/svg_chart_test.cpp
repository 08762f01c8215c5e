// The SVG chart primitives of the report: scales, ticks, escaping, and charts of empty and
// single-point data.
#include <cotune/core/report/html.hpp>
#include <cotune/core/report/random_baseline.hpp>
#include <cotune/core/report/svg_chart.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

using namespace cotune::core;
using namespace cotune::core::report;

namespace {
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST(Scale, LinearFitCoversDataWithRoundBounds) {
  Scale s = Scale::fit({0.3, 7.2, 4.1});
  EXPECT_LE(s.lo, 0.3);
  EXPECT_GE(s.hi, 7.2);
  EXPECT_DOUBLE_EQ(s.fraction(s.lo), 0.0);
  EXPECT_DOUBLE_EQ(s.fraction(s.hi), 1.0);
  std::vector<double> t = s.ticks();
  ASSERT_GE(t.size(), 3u);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_NEAR(t[i] - t[i - 1], t[1] - t[0], 1e-9);
  EXPECT_GE(t.front(), s.lo - 1e-9);
  EXPECT_LE(t.back(), s.hi + 1e-9);
}

TEST(Scale, LogFitSpansDecadesAndIgnoresNonPositive) {
  Scale s = Scale::fit({-5, 0, 3, 4500}, ScaleKind::kLog);
  EXPECT_DOUBLE_EQ(s.lo, 1);
  EXPECT_DOUBLE_EQ(s.hi, 10000);
  EXPECT_FALSE(s.shows(0));
  EXPECT_FALSE(s.shows(-1));
  EXPECT_TRUE(s.shows(3));
  EXPECT_NEAR(s.fraction(100), 0.5, 1e-12);  // log: 100 is half-way between 1 and 10^4
  std::vector<double> t = s.ticks();
  EXPECT_EQ(t, (std::vector<double>{1, 10, 100, 1000, 10000}));
}

TEST(Scale, LogTicksOfANarrowRangeIncludeTwoAndFive) {
  Scale s = Scale::fit({1.5, 40}, ScaleKind::kLog);
  EXPECT_EQ(s.ticks(), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
}

TEST(Scale, EmptyDataGivesAUnitInterval) {
  Scale lin = Scale::fit({});
  EXPECT_DOUBLE_EQ(lin.lo, 0);
  EXPECT_DOUBLE_EQ(lin.hi, 1);
  Scale log = Scale::fit({NAN, -1}, ScaleKind::kLog);
  EXPECT_DOUBLE_EQ(log.lo, 1);
  EXPECT_DOUBLE_EQ(log.hi, 10);
}

TEST(Scale, SinglePointLiesStrictlyInside) {
  for (double v : {0.0, 42.0, -3.0}) {
    Scale s = Scale::fit({v});
    EXPECT_LT(s.lo, v);
    EXPECT_GT(s.hi, v);
  }
  Scale log = Scale::fit({100}, ScaleKind::kLog);
  EXPECT_LT(log.lo, 100 + 1e-9);
  EXPECT_GT(log.hi, 100);
  EXPECT_TRUE(std::isfinite(log.fraction(100)));
}

TEST(TickLabel, ShortAndReadable) {
  EXPECT_EQ(tick_label(0), "0");
  EXPECT_EQ(tick_label(2.5), "2.5");
  EXPECT_EQ(tick_label(1000), "1000");
  EXPECT_EQ(tick_label(1e6), "1e+06");
  EXPECT_EQ(tick_label(0.0001), "0.0001");
}

TEST(Chart, ScatterDrawsEveryShowablePointWithEscapedText) {
  Chart c("a <b> & \"c\"", "x", "y", Scale::fit({1, 100}, ScaleKind::kLog), Scale::fit({1, 2, 3}));
  c.scatter({{1, 1, "#000", "<script>"}, {10, 2, "#000", ""}, {100, 3, "#000", ""}, {0, 2, "#000", "hidden"}});
  std::string svg = c.svg();
  EXPECT_EQ(count(svg, "<circle"), 3u);  // x = 0 cannot be shown on a log axis
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  EXPECT_NE(svg.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(svg.find("a &lt;b&gt; &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_NE(svg.find("x (log)"), std::string::npos);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 6), "</svg>");
  EXPECT_EQ(svg.find("no data"), std::string::npos);
}

TEST(Chart, PointsMapIntoThePlotArea) {
  Chart c("t", "x", "y", Scale{ScaleKind::kLinear, 0, 10}, Scale{ScaleKind::kLinear, 0, 10}, 200, 100);
  c.scatter({{0, 0, "#000", ""}, {10, 10, "#000", ""}});
  std::string svg = c.svg();
  std::regex circle("<circle cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"");
  std::vector<std::pair<double, double>> xy;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circle); it != std::sregex_iterator(); ++it)
    xy.emplace_back(std::stod((*it)[1]), std::stod((*it)[2]));
  ASSERT_EQ(xy.size(), 2u);
  EXPECT_LT(xy[0].first, xy[1].first);   // x grows to the right
  EXPECT_GT(xy[0].second, xy[1].second);  // y grows upwards
  for (auto [x, y] : xy) {
    EXPECT_GE(x, 0);
    EXPECT_LE(x, 200);
    EXPECT_GE(y, 0);
    EXPECT_LE(y, 100);
  }
}

TEST(Chart, EmptyChartSaysNoDataButKeepsItsAxes) {
  Chart c("empty", "x", "y", Scale::fit({}), Scale::fit({}));
  c.scatter({});
  c.line({}, {}, "#000", "nothing");
  std::string svg = c.svg();
  EXPECT_NE(svg.find("no data"), std::string::npos);
  EXPECT_NE(svg.find("class=\"axes\""), std::string::npos);
  EXPECT_EQ(svg.find("<polyline"), std::string::npos);
  EXPECT_EQ(svg.find("nothing"), std::string::npos);  // no legend entry for an empty series
}

TEST(Chart, SinglePointLineAndStepCurve) {
  Chart one("one", "x", "y", Scale::fit({5}), Scale::fit({7}));
  one.line({5}, {7}, "#123456", "single");
  EXPECT_NE(one.svg().find("<polyline"), std::string::npos);
  Chart steps("steps", "x", "y", Scale::fit({1, 3}), Scale::fit({1, 3}));
  steps.line({1, 2, 3}, {3, 2, 1}, "#000", "", false, true);
  std::string svg = steps.svg();
  size_t p = svg.find("points=\"");
  ASSERT_NE(p, std::string::npos);
  std::string pts = svg.substr(p + 8, svg.find('"', p + 8) - p - 8);
  EXPECT_EQ(std::count(pts.begin(), pts.end(), ','), 5);  // 3 points + 2 corners of the staircase
}

TEST(Chart, CategoricalTicksReplaceNumbers) {
  Chart c("cat", "recompute", "y", Scale{ScaleKind::kLinear, -0.5, 2.5}, Scale::fit({1, 2}));
  c.x_categories({{0, "none"}, {1, "selective"}, {2, "full"}});
  std::string svg = c.svg();
  EXPECT_NE(svg.find(">selective<"), std::string::npos);
  EXPECT_NE(svg.find(">full<"), std::string::npos);
}

TEST(StackedBar, SegmentsAreProportionalAndZeroPartsOmitted) {
  std::string svg = stacked_bar_svg("step", {{"compute", 3}, {"bubble", 1}, {"idle", 0}}, "s", 416);
  EXPECT_EQ(count(svg, "class=\"segment\""), 2u);
  EXPECT_NE(svg.find("compute: 3 s (75.0%)"), std::string::npos);
  EXPECT_EQ(svg.find("idle"), std::string::npos);
  std::regex width("class=\"segment\" x=\"[0-9.]+\" y=\"28\" width=\"([0-9.]+)\"");
  std::vector<double> w;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), width); it != std::sregex_iterator(); ++it)
    w.push_back(std::stod((*it)[1]));
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NEAR(w[0] / w[1], 3.0, 0.01);
  EXPECT_NE(stacked_bar_svg("none", {}, "s").find("no data"), std::string::npos);
}

TEST(Html, EscapesEveryMarkupCharacter) {
  EXPECT_EQ(escape("<a href='x'>&\"</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
  Page p("t<i>");
  p.add_section("s1", "A & B", "<p>body</p>");
  std::string html = p.str();
  EXPECT_NE(html.find("<title>t&lt;i&gt;</title>"), std::string::npos);
  EXPECT_NE(html.find("<h2>A &amp; B</h2>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http-equiv=\"refresh\""), std::string::npos);
  p.set_refresh(5);
  EXPECT_NE(p.str().find("http-equiv=\"refresh\" content=\"5\""), std::string::npos);
}

TEST(RandomBaseline, MatchesTheExactExpectationOfASmallSpace) {
  // Values 1, 2, 3 (maximise): best of 1 draw = 2, best of 2 = (2 + 3 + 3) / 3, best of 3 = 3.
  std::vector<std::optional<double>> v = {1.0, 2.0, 3.0};
  std::vector<double> e = expected_best_of_random(v, Direction::kMaximize, {1, 2, 3});
  EXPECT_NEAR(e[0], 2.0, 1e-12);
  EXPECT_NEAR(e[1], 8.0 / 3, 1e-12);
  EXPECT_NEAR(e[2], 3.0, 1e-12);
  // Minimise, with one infeasible configuration: pairs {1,2},{1,x},{2,x} -> 1, 1, 2 (given a
  // feasible draw, all three pairs qualify).
  std::vector<std::optional<double>> w = {1.0, 2.0, std::nullopt};
  std::vector<double> f = expected_best_of_random(w, Direction::kMinimize, {1, 2, 3, 4});
  EXPECT_NEAR(f[0], 1.5, 1e-12);
  EXPECT_NEAR(f[1], 4.0 / 3, 1e-12);
  EXPECT_NEAR(f[2], 1.0, 1e-12);
  EXPECT_TRUE(std::isnan(f[3]));
  EXPECT_TRUE(std::isnan(expected_best_of_random({std::nullopt}, Direction::kMinimize, {1})[0]));
}
