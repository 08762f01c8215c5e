// The mlp predictor through its real plugin library, loaded by the host's Registry. Data sets and
// networks are kept small so that the whole file runs in seconds.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using cotune::core::PluginError;
using cotune::core::Predictor;
using ::testing::HasSubstr;

constexpr const char* kPlugin = COTUNE_PLUGIN_DIR "/libcotune-predictor-mlp.so";
constexpr const char* kKrrPlugin = COTUNE_PLUGIN_DIR "/libcotune-predictor-krr.so";
constexpr const char* kSmall = R"({"hidden": [32, 32], "ensemble": 3, "max_epochs": 150, "patience": 20})";

class MlpTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(registry_.load_file(kPlugin)) << kPlugin; }
  std::unique_ptr<Predictor> make(const std::string& options = kSmall) {
    return registry_.make_predictor("mlp", options);
  }
  cotune::core::Registry registry_;
};

struct Data {
  size_t n = 0, d = 0;
  std::vector<double> x, y;
};

Data sample(size_t n, size_t d, uint32_t seed, const std::function<double(const double*)>& f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  Data data;
  data.n = n;
  data.d = d;
  data.x.resize(n * d);
  for (double& v : data.x) v = u(rng);
  for (size_t i = 0; i < n; ++i) data.y.push_back(f(&data.x[i * d]));
  return data;
}

double smooth_positive(const double* x) { return std::exp(0.5 * std::sin(x[0]) + 0.3 * x[1] * x[1] - 0.2 * x[2]); }
double smooth_signed(const double* x) { return std::sin(x[0]) + 0.5 * x[1] - 0.3 * x[2] * x[2]; }

struct Prediction {
  std::vector<double> mean, std;
};

Prediction predict(const Predictor& p, const Data& data) {
  Prediction out{std::vector<double>(data.n), std::vector<double>(data.n)};
  p.predict(data.x.data(), data.n, data.d, out.mean.data(), out.std.data());
  return out;
}

double r_squared(const std::vector<double>& truth, const std::vector<double>& predicted) {
  double mean = 0;
  for (double v : truth) mean += v;
  mean /= double(truth.size());
  double ss_res = 0, ss_tot = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    ss_res += (truth[i] - predicted[i]) * (truth[i] - predicted[i]);
    ss_tot += (truth[i] - mean) * (truth[i] - mean);
  }
  return 1.0 - ss_res / ss_tot;
}

void expect_error(const std::function<void()>& f, int code, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << text << "'";
  } catch (const PluginError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(text));
  }
}

TEST_F(MlpTest, DescribesItself) {
  const auto& ref = registry_.find(COTUNE_KIND_PREDICTOR, "mlp");
  EXPECT_EQ(ref.info.id, "org.cotune.predictor.mlp");
  EXPECT_NE(ref.info.capabilities & COTUNE_CAP_PREDICT_STD, 0u);
  EXPECT_NE(ref.info.capabilities & COTUNE_CAP_SAVE_STATE, 0u);
}

TEST_F(MlpTest, LearnsASmoothFunctionWithAnUncertainty) {
  const Data train = sample(240, 3, 1, smooth_positive);
  const Data test = sample(100, 3, 2, smooth_positive);
  auto p = make();
  p->fit(train.x.data(), train.n, train.d, train.y.data());
  const Prediction out = predict(*p, test);
  EXPECT_GT(r_squared(test.y, out.mean), 0.9);
  for (double s : out.std) {
    EXPECT_TRUE(std::isfinite(s));
    EXPECT_GE(s, 0.0);
  }
  double spread = 0;
  for (double s : out.std) spread += s;
  EXPECT_GT(spread, 0.0);  // three differently seeded networks disagree somewhere

  const auto fit = nlohmann::json::parse(p->describe_fit());
  EXPECT_EQ(fit["method"], "ensemble");
  EXPECT_EQ(fit["ensemble"], 3);
  EXPECT_EQ(fit["n"], 240);
  EXPECT_EQ(fit["d"], 3);
  EXPECT_EQ(fit["hidden"], nlohmann::json({32, 32}));
  ASSERT_EQ(fit["members"].size(), 3u);
  for (const auto& m : fit["members"]) {
    EXPECT_EQ(m["validation_rows"], 48);
    EXPECT_LE(m["best_epoch"].get<int>(), m["epochs"].get<int>());
    EXPECT_GE(m["validation_loss"].get<double>(), 0.0);
  }
}

TEST_F(MlpTest, ThreeHiddenLayersFitSignedTargets) {
  const Data train = sample(240, 3, 3, smooth_signed);
  const Data test = sample(100, 3, 4, smooth_signed);
  auto p = make(R"({"hidden": [24, 24, 16], "ensemble": 2, "max_epochs": 150, "log": false})");
  p->fit(train.x.data(), train.n, train.d, train.y.data());
  EXPECT_GT(r_squared(test.y, predict(*p, test).mean), 0.9);
  EXPECT_EQ(nlohmann::json::parse(p->describe_fit())["target"], "raw");
}

TEST_F(MlpTest, SaveAndLoadGiveIdenticalPredictions) {
  const Data train = sample(120, 3, 5, smooth_positive);
  const Data test = sample(50, 3, 6, smooth_positive);
  auto p = make();
  p->fit(train.x.data(), train.n, train.d, train.y.data());
  auto q = make("{}");  // the saved state carries the architecture, not the options
  q->load(p->save());
  const Prediction a = predict(*p, test), b = predict(*q, test);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.std, b.std);
  EXPECT_EQ(p->describe_fit(), q->describe_fit());
}

TEST_F(MlpTest, EqualSeedsGiveEqualModels) {
  const Data train = sample(120, 3, 7, smooth_positive);
  const Data test = sample(50, 3, 8, smooth_positive);
  const std::string options = R"({"hidden": [16, 16], "ensemble": 2, "max_epochs": 60, "seed": 11})";
  auto a = make(options);
  auto b = make(options);
  a->fit(train.x.data(), train.n, train.d, train.y.data());
  b->fit(train.x.data(), train.n, train.d, train.y.data());
  EXPECT_EQ(predict(*a, test).mean, predict(*b, test).mean);
  auto c = make(R"({"hidden": [16, 16], "ensemble": 2, "max_epochs": 60, "seed": 12})");
  c->fit(train.x.data(), train.n, train.d, train.y.data());
  EXPECT_NE(predict(*a, test).mean, predict(*c, test).mean);
}

TEST_F(MlpTest, LoadRejectsForeignTruncatedAndCorruptBytes) {
  ASSERT_TRUE(registry_.load_file(kKrrPlugin)) << kKrrPlugin;
  const Data train = sample(30, 3, 9, smooth_positive);
  auto krr = registry_.make_predictor("krr", "{}");
  krr->fit(train.x.data(), train.n, train.d, train.y.data());
  auto p = make(R"({"hidden": [8, 8], "ensemble": 1, "max_epochs": 5})");
  p->fit(train.x.data(), train.n, train.d, train.y.data());
  const std::string bytes = p->save();

  auto q = make();
  expect_error([&] { q->load(krr->save()); }, COTUNE_ERR_INVALID_ARGUMENT, "saved by 'org.cotune.predictor.krr'");
  expect_error([&] { q->load("garbage"); }, COTUNE_ERR_INVALID_ARGUMENT, "not saved cotune predictor state");
  expect_error([&] { q->load(bytes.substr(0, bytes.size() / 2)); }, COTUNE_ERR_INVALID_ARGUMENT, "truncated");
  std::string corrupt = bytes;
  corrupt[corrupt.size() / 2 + 40] ^= 0x11;
  expect_error([&] { q->load(corrupt); }, COTUNE_ERR_INVALID_ARGUMENT, "checksum");
  double out = 0;
  expect_error([&] { q->predict(train.x.data(), 1, 3, &out); }, COTUNE_ERR_FAILED_PRECONDITION, "not fitted");
}

TEST_F(MlpTest, WeightsPullTheFitTowardsHeavyRows) {
  // Two groups measured at the same configurations: one says 1, the other 10.
  Data data = sample(40, 2, 10, [](const double*) { return 1.0; });
  const size_t half = data.n;
  data.x.insert(data.x.end(), data.x.begin(), data.x.end());
  data.y.insert(data.y.end(), half, 10.0);
  data.n *= 2;
  std::vector<double> weights(data.n, 1.0);
  for (size_t i = half; i < data.n; ++i) weights[i] = 9.0;
  const std::string options = R"({"hidden": [8, 8], "ensemble": 1, "max_epochs": 100})";
  auto plain = make(options);
  plain->fit(data.x.data(), data.n, data.d, data.y.data());
  auto weighted = make(options);
  weighted->fit(data.x.data(), data.n, data.d, data.y.data(), weights.data());
  const auto a = predict(*plain, data).mean, b = predict(*weighted, data).mean;
  double mean_a = 0, mean_b = 0;
  for (size_t i = 0; i < data.n; ++i) {
    mean_a += std::log10(a[i]) / double(data.n);
    mean_b += std::log10(b[i]) / double(data.n);
  }
  EXPECT_NEAR(mean_a, 0.5, 0.1);  // halfway between 1 and 10 in log space
  EXPECT_NEAR(mean_b, 0.9, 0.1);  // weighted 1:9
}

TEST_F(MlpTest, DegenerateDataGiveSensibleConstants) {
  auto one = make();
  const double x1[2] = {0.5, 3.0}, y1 = 42.0;
  one->fit(x1, 1, 2, &y1);
  const double q[4] = {0.0, 0.0, 100.0, -7.0};
  double mean[2] = {0, 0}, sd[2] = {1, 1};
  one->predict(q, 2, 2, mean, sd);
  EXPECT_NEAR(mean[0], 42.0, 1e-9);
  EXPECT_NEAR(mean[1], 42.0, 1e-9);
  EXPECT_EQ(sd[0], 0.0);
  EXPECT_EQ(nlohmann::json::parse(one->describe_fit())["method"], "constant");

  Data flat = sample(30, 2, 11, [](const double*) { return 3.5; });
  auto constant = make();
  constant->fit(flat.x.data(), flat.n, flat.d, flat.y.data());
  for (double v : predict(*constant, flat).mean) EXPECT_NEAR(v, 3.5, 1e-9);

  Data column = sample(60, 3, 12, smooth_positive);
  for (size_t i = 0; i < column.n; ++i) column.x[i * 3 + 2] = 5.0;
  auto p = make(R"({"hidden": [8, 8], "ensemble": 2, "max_epochs": 20})");
  p->fit(column.x.data(), column.n, column.d, column.y.data());
  const Prediction out = predict(*p, column);
  for (size_t i = 0; i < column.n; ++i) {
    EXPECT_TRUE(std::isfinite(out.mean[i]));
    EXPECT_TRUE(std::isfinite(out.std[i]));
  }
}

TEST_F(MlpTest, RejectsBadInputWithClearErrors) {
  auto p = make(R"({"hidden": [4, 4], "ensemble": 1, "max_epochs": 2})");
  const double x[4] = {1, 2, 3, 4}, y[2] = {1, 2};
  double out[2];
  expect_error([&] { p->predict(x, 2, 2, out); }, COTUNE_ERR_FAILED_PRECONDITION, "not fitted");
  expect_error([&] { p->fit(x, 0, 2, y); }, COTUNE_ERR_INVALID_ARGUMENT, "n = 0");
  const double nan_x[4] = {1, 2, std::nan(""), 4};
  expect_error([&] { p->fit(nan_x, 2, 2, y); }, COTUNE_ERR_INVALID_ARGUMENT, "feature 0 of row 1");
  const double inf_y[2] = {-std::numeric_limits<double>::infinity(), 1};
  expect_error([&] { p->fit(x, 2, 2, inf_y); }, COTUNE_ERR_INVALID_ARGUMENT, "target of row 0");
  const double negative_y[2] = {1, -2};
  expect_error([&] { p->fit(x, 2, 2, negative_y); }, COTUNE_ERR_INVALID_ARGUMENT, "targets > 0");
  const double nan_w[2] = {1, std::nan("")};
  expect_error([&] { p->fit(x, 2, 2, y, nan_w); }, COTUNE_ERR_INVALID_ARGUMENT, "weight of row 1");

  p->fit(x, 2, 2, y);
  expect_error([&] { p->predict(x, 2, 1, out); }, COTUNE_ERR_INVALID_ARGUMENT, "fitted on 2");

  expect_error([&] { make(R"({"hidden": [64]})"); }, COTUNE_ERR_INVALID_ARGUMENT, "2 or 3 layer sizes");
  expect_error([&] { make(R"({"hidden": [64, 0]})"); }, COTUNE_ERR_INVALID_ARGUMENT, "'hidden'");
  expect_error([&] { make(R"({"ensemble": 0})"); }, COTUNE_ERR_INVALID_ARGUMENT, "'ensemble'");
  expect_error([&] { make(R"({"learning_rate": "fast"})"); }, COTUNE_ERR_INVALID_ARGUMENT, "'learning_rate'");
  expect_error([&] { make(R"({"epochs": 10})"); }, COTUNE_ERR_INVALID_ARGUMENT, "unknown option 'epochs'");
}

}  // namespace
