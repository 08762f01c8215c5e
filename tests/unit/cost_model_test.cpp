// The learned additive cost model: rates recovered by non-negative least squares, the metric's
// relation to time found from the data, and no fit from too little.
#include <cotune/core/model/cost_model.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace cotune::core {
namespace {

// Rows of three terms drawn over two decades each, and their time 0.5 t0 + 2 t1 + 0 t2.
struct Data {
  std::vector<double> terms, time;
};

Data additive(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> decade(0, 2);
  Data d;
  for (size_t i = 0; i < n; ++i) {
    const double t[3] = {std::pow(10, decade(rng)), std::pow(10, decade(rng)), std::pow(10, decade(rng))};
    d.terms.insert(d.terms.end(), t, t + 3);
    d.time.push_back(0.5 * t[0] + 2 * t[1]);
  }
  return d;
}

TEST(CostModel, RecoversTheRatesOfATimeMetric) {
  const Data d = additive(12, 1);
  CostModel m(3);
  ASSERT_TRUE(m.fit(d.terms.data(), 12, d.time.data()));
  EXPECT_EQ(m.exponent(), 1);
  EXPECT_NEAR(m.rates()[0], 0.5, 1e-4);
  EXPECT_NEAR(m.rates()[1], 2.0, 1e-4);
  EXPECT_NEAR(m.rates()[2], 0.0, 1e-4);
  const double row[3] = {10, 1, 100};
  EXPECT_NEAR(m.predict(row), 7.0, 1e-3);
}

TEST(CostModel, FindsThatAThroughputFallsWithTime) {
  const Data d = additive(12, 2);
  std::vector<double> throughput;
  for (double t : d.time) throughput.push_back(1000 / t);
  CostModel m(3);
  ASSERT_TRUE(m.fit(d.terms.data(), 12, throughput.data()));
  EXPECT_EQ(m.exponent(), -1);
  const double row[3] = {10, 1, 100};
  EXPECT_NEAR(m.predict(row), 1000 / 7.0, 0.05);
}

TEST(CostModel, NeverUsesANegativeRate) {
  // A time that falls with term 1: least squares would give it a negative rate; the model keeps
  // rates >= 0 (a term can only cost time) and fits the rest as well as it can.
  Data d = additive(20, 3);
  for (size_t i = 0; i < 20; ++i) d.time[i] = 3 * d.terms[i * 3] + 1 - 0.001 * d.terms[i * 3 + 1];
  CostModel m(3);
  ASSERT_TRUE(m.fit(d.terms.data(), 20, d.time.data()));
  for (double r : m.rates()) EXPECT_GE(r, 0.0);
  EXPECT_NEAR(m.rates()[0], 3.0, 0.1);
}

TEST(CostModel, NeedsTwoRowsAndATermThatExplainsSomething) {
  const Data d = additive(2, 4);
  CostModel m(3);
  EXPECT_FALSE(m.fit(d.terms.data(), 1, d.time.data()));
  EXPECT_FALSE(m.fitted());
  EXPECT_EQ(m.predict(d.terms.data()), 0.0);
  const std::vector<double> zeros(6, 0.0);
  EXPECT_FALSE(m.fit(zeros.data(), 2, d.time.data()));
  EXPECT_TRUE(m.fit(d.terms.data(), 2, d.time.data()));
}

}  // namespace
}  // namespace cotune::core
