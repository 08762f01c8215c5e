// The krr predictor through its real plugin library, loaded by the host's Registry.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>

#include <gmock/gmock.h>
#include <dlib/serialize.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using cotune::core::PluginError;
using cotune::core::Predictor;
using ::testing::HasSubstr;

constexpr const char* kPlugin = COTUNE_PLUGIN_DIR "/libcotune-predictor-krr.so";

class KrrTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(registry_.load_file(kPlugin)) << kPlugin; }
  std::unique_ptr<Predictor> make(const std::string& options = "{}") {
    return registry_.make_predictor("krr", options);
  }
  cotune::core::Registry registry_;
};

struct Data {
  size_t n = 0, d = 0;
  std::vector<double> x, y;
};

// n rows uniform in [-2, 2]^d with targets f(row).
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

std::vector<double> predict(const Predictor& p, const Data& data) {
  std::vector<double> out(data.n);
  p.predict(data.x.data(), data.n, data.d, out.data());
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

// Runs f and expects a PluginError with `code` whose message contains `text`.
void expect_error(const std::function<void()>& f, int code, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << text << "'";
  } catch (const PluginError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(text));
  }
}

TEST_F(KrrTest, DescribesItself) {
  const auto& ref = registry_.find(COTUNE_KIND_PREDICTOR, "krr");
  EXPECT_EQ(ref.info.id, "org.cotune.predictor.krr");
  EXPECT_NE(ref.info.capabilities & COTUNE_CAP_SAVE_STATE, 0u);
  EXPECT_EQ(ref.info.capabilities & COTUNE_CAP_PREDICT_STD, 0u);
}

TEST_F(KrrTest, LearnsASmoothPositiveFunctionInLogSpace) {
  const Data train = sample(300, 3, 1, smooth_positive);
  const Data test = sample(200, 3, 2, smooth_positive);
  auto p = make();
  p->fit(train.x.data(), train.n, train.d, train.y.data());
  EXPECT_GT(r_squared(test.y, predict(*p, test)), 0.97);

  const auto fit = nlohmann::json::parse(p->describe_fit());
  EXPECT_EQ(fit["method"], "exact");
  EXPECT_GT(fit["gamma"].get<double>(), 0);
  EXPECT_GT(fit["lambda"].get<double>(), 0);
  EXPECT_GE(fit["loo_error"].get<double>(), 0);
  EXPECT_LT(fit["loo_error"].get<double>(), 0.1);  // in log units: under 10% relative error
  EXPECT_EQ(fit["n"], 300);
  EXPECT_EQ(fit["d"], 3);
  EXPECT_EQ(fit["target"], "log");
}

TEST_F(KrrTest, FitsSignedResidualsWithoutTheLogTransform) {
  const Data train = sample(300, 3, 3, smooth_signed);
  const Data test = sample(200, 3, 4, smooth_signed);
  auto p = make(R"({"log": false})");
  p->fit(train.x.data(), train.n, train.d, train.y.data());
  EXPECT_GT(r_squared(test.y, predict(*p, test)), 0.97);
  EXPECT_EQ(nlohmann::json::parse(p->describe_fit())["target"], "raw");
}

TEST_F(KrrTest, LargeTrainingSetsUseABoundedBasis) {
  const Data train = sample(2500, 3, 5, smooth_positive);
  const Data test = sample(200, 3, 6, smooth_positive);
  auto p = make(R"({"max_basis": 400, "search_size": 200})");
  p->fit(train.x.data(), train.n, train.d, train.y.data());
  EXPECT_GT(r_squared(test.y, predict(*p, test)), 0.97);
  const auto fit = nlohmann::json::parse(p->describe_fit());
  EXPECT_EQ(fit["method"], "nystrom");
  EXPECT_EQ(fit["basis"], 400);
  EXPECT_EQ(fit["loo_rows"], 200);
  EXPECT_EQ(fit["n"], 2500);
}

TEST_F(KrrTest, SaveAndLoadGiveIdenticalPredictions) {
  const Data train = sample(200, 3, 7, smooth_positive);
  const Data test = sample(100, 3, 8, smooth_positive);
  auto p = make();
  p->fit(train.x.data(), train.n, train.d, train.y.data());
  const std::string bytes = p->save();

  auto q = make();
  q->load(bytes);
  EXPECT_EQ(predict(*p, test), predict(*q, test));
  EXPECT_EQ(p->describe_fit(), q->describe_fit());
}

TEST_F(KrrTest, LoadRejectsForeignTruncatedAndCorruptBytes) {
  const Data train = sample(50, 3, 9, smooth_positive);
  auto p = make();
  p->fit(train.x.data(), train.n, train.d, train.y.data());
  const std::string bytes = p->save();
  auto q = make();

  expect_error([&] { q->load("not a model"); }, COTUNE_ERR_INVALID_ARGUMENT, "not saved cotune predictor state");
  expect_error([&] { q->load(""); }, COTUNE_ERR_INVALID_ARGUMENT, "not saved cotune predictor state");
  expect_error([&] { q->load(bytes.substr(0, bytes.size() - 1)); }, COTUNE_ERR_INVALID_ARGUMENT, "truncated");
  expect_error([&] { q->load(bytes.substr(0, 20)); }, COTUNE_ERR_INVALID_ARGUMENT, "truncated");
  std::string corrupt = bytes;
  corrupt[corrupt.size() - 3] ^= 0x5a;
  expect_error([&] { q->load(corrupt); }, COTUNE_ERR_INVALID_ARGUMENT, "checksum");
  std::string foreign = bytes;
  const size_t at = foreign.find("org.cotune.predictor.krr");
  ASSERT_NE(at, std::string::npos);
  foreign.replace(at, 24, "org.cotune.predictor.abc");
  expect_error([&] { q->load(foreign); }, COTUNE_ERR_INVALID_ARGUMENT, "saved by 'org.cotune.predictor.abc'");

  // A failed load leaves the predictor as it was: still unfitted.
  double out = 0;
  expect_error([&] { q->predict(train.x.data(), 1, 3, &out); }, COTUNE_ERR_FAILED_PRECONDITION, "not fitted");
}

TEST_F(KrrTest, EqualInputsAndSeedGiveEqualModels) {
  const Data train = sample(1500, 3, 10, smooth_positive);
  const Data test = sample(100, 3, 11, smooth_positive);
  const std::string options = R"({"max_basis": 300, "search_size": 150, "seed": 7})";
  auto a = make(options);
  auto b = make(options);
  a->fit(train.x.data(), train.n, train.d, train.y.data());
  b->fit(train.x.data(), train.n, train.d, train.y.data());
  EXPECT_EQ(predict(*a, test), predict(*b, test));
  auto c = make(R"({"max_basis": 300, "search_size": 150, "seed": 8})");
  c->fit(train.x.data(), train.n, train.d, train.y.data());
  EXPECT_NE(predict(*a, test), predict(*c, test));
}

TEST_F(KrrTest, WeightsPullTheFitTowardsHeavyRows) {
  // Two groups measured at the same configurations: one says 1, the other 10.
  Data data = sample(40, 2, 12, [](const double*) { return 1.0; });
  const size_t half = data.n;
  data.x.insert(data.x.end(), data.x.begin(), data.x.end());
  data.y.insert(data.y.end(), half, 10.0);
  data.n *= 2;
  std::vector<double> weights(data.n, 1.0);
  for (size_t i = half; i < data.n; ++i) weights[i] = 9.0;

  auto plain = make();
  plain->fit(data.x.data(), data.n, data.d, data.y.data());
  auto weighted = make();
  weighted->fit(data.x.data(), data.n, data.d, data.y.data(), weights.data());
  double a = 0, b = 0;
  plain->predict(data.x.data(), 1, data.d, &a);
  weighted->predict(data.x.data(), 1, data.d, &b);
  EXPECT_NEAR(a, std::sqrt(10.0), 0.05);              // geometric mean of 1 and 10
  EXPECT_NEAR(b, std::pow(10.0, 0.9), 0.2);           // weighted 1:9 in log space
}

TEST_F(KrrTest, ZeroWeightRowsAreLeftOut) {
  const Data train = sample(120, 3, 13, smooth_positive);
  const Data test = sample(50, 3, 14, smooth_positive);
  Data noisy = train;
  std::vector<double> weights(train.n, 1.0);
  for (size_t i = 0; i < 20; ++i) {  // 20 extra rows with wild targets and weight 0
    noisy.x.insert(noisy.x.end(), train.x.begin() + i * 3, train.x.begin() + i * 3 + 3);
    noisy.y.push_back(1e6);
    weights.push_back(0.0);
  }
  noisy.n += 20;
  auto a = make();
  a->fit(train.x.data(), train.n, train.d, train.y.data());
  auto b = make();
  b->fit(noisy.x.data(), noisy.n, noisy.d, noisy.y.data(), weights.data());
  const auto pa = predict(*a, test), pb = predict(*b, test);
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_NEAR(pa[i], pb[i], 1e-9 * pa[i]);
}

TEST_F(KrrTest, DegenerateDataGiveSensibleConstants) {
  auto one = make();
  const double x1[2] = {0.5, 3.0}, y1 = 42.0;
  one->fit(x1, 1, 2, &y1);
  const double q[4] = {0.0, 0.0, 100.0, -7.0};
  double out[2] = {0, 0};
  one->predict(q, 2, 2, out);
  EXPECT_NEAR(out[0], 42.0, 1e-9);
  EXPECT_NEAR(out[1], 42.0, 1e-9);
  EXPECT_EQ(nlohmann::json::parse(one->describe_fit())["method"], "constant");

  Data flat = sample(30, 2, 15, [](const double*) { return 3.5; });
  auto constant = make();
  constant->fit(flat.x.data(), flat.n, flat.d, flat.y.data());
  for (double v : predict(*constant, flat)) EXPECT_NEAR(v, 3.5, 1e-9);

  // A feature that never varies must not turn into NaN.
  Data column = sample(60, 3, 16, smooth_positive);
  for (size_t i = 0; i < column.n; ++i) column.x[i * 3 + 2] = 5.0;
  for (size_t i = 0; i < column.n; ++i) column.y[i] = smooth_positive(&column.x[i * 3]);
  auto p = make();
  p->fit(column.x.data(), column.n, column.d, column.y.data());
  for (double v : predict(*p, column)) EXPECT_TRUE(std::isfinite(v));
  EXPECT_GT(r_squared(column.y, predict(*p, column)), 0.9);
}

TEST_F(KrrTest, RejectsBadInputWithClearErrors) {
  auto p = make();
  const double x[4] = {1, 2, 3, 4}, y[2] = {1, 2};
  double out[2];
  expect_error([&] { p->predict(x, 2, 2, out); }, COTUNE_ERR_FAILED_PRECONDITION, "not fitted");
  expect_error([&] { p->fit(x, 0, 2, y); }, COTUNE_ERR_INVALID_ARGUMENT, "n = 0");
  expect_error([&] { p->fit(x, 2, 0, y); }, COTUNE_ERR_INVALID_ARGUMENT, "d = 0");
  const double nan_x[4] = {1, std::nan(""), 3, 4};
  expect_error([&] { p->fit(nan_x, 2, 2, y); }, COTUNE_ERR_INVALID_ARGUMENT, "feature 1 of row 0");
  const double inf_y[2] = {1, std::numeric_limits<double>::infinity()};
  expect_error([&] { p->fit(x, 2, 2, inf_y); }, COTUNE_ERR_INVALID_ARGUMENT, "target of row 1");
  const double negative_y[2] = {1, -2};
  expect_error([&] { p->fit(x, 2, 2, negative_y); }, COTUNE_ERR_INVALID_ARGUMENT, "\"log\": false");
  const double zero_y[2] = {0, 2};
  expect_error([&] { p->fit(x, 2, 2, zero_y); }, COTUNE_ERR_INVALID_ARGUMENT, "targets > 0");
  const double bad_w[2] = {1, -1};
  expect_error([&] { p->fit(x, 2, 2, y, bad_w); }, COTUNE_ERR_INVALID_ARGUMENT, "weight of row 1");
  const double zero_w[2] = {0, 0};
  expect_error([&] { p->fit(x, 2, 2, y, zero_w); }, COTUNE_ERR_INVALID_ARGUMENT, "every weight is 0");

  p->fit(x, 2, 2, y);
  expect_error([&] { p->predict(x, 1, 4, out); }, COTUNE_ERR_INVALID_ARGUMENT, "fitted on 2");
  expect_error([&] { p->predict(nan_x, 2, 2, out); }, COTUNE_ERR_INVALID_ARGUMENT, "feature 1 of row 0");

  expect_error([&] { make(R"({"gama": 1})"); }, COTUNE_ERR_INVALID_ARGUMENT, "unknown option 'gama' (did you mean \"gamma\"?)");
  expect_error([&] { make(R"({"log": "yes"})"); }, COTUNE_ERR_INVALID_ARGUMENT, "'log'");
  expect_error([&] { make(R"({"lambda": -1})"); }, COTUNE_ERR_INVALID_ARGUMENT, "'lambda'");
  expect_error([&] { make("[1, 2]"); }, COTUNE_ERR_INVALID_ARGUMENT, "JSON object");
  expect_error([&] { make("{"); }, COTUNE_ERR_INVALID_ARGUMENT, "not valid JSON");
}

// Rows like parallel layouts: two power-of-two features over decades, one signed feature; the target
// is smooth in their logarithms, as throughput is in the degrees.
Data layouts(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> a(0, 10), b(0, 6);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Data data;
  data.n = n;
  data.d = 3;
  for (size_t i = 0; i < n; ++i) {
    const double x0 = std::ldexp(1.0, a(rng)), x1 = std::ldexp(1.0, b(rng)), x2 = u(rng);
    data.x.insert(data.x.end(), {x0, x1, x2});
    data.y.push_back(std::exp(0.4 * std::sin(0.5 * std::log2(x0)) + 0.1 * std::log2(x1) + 0.2 * x2));
  }
  return data;
}

TEST_F(KrrTest, ComparesFeaturesThatSpanDecadesOnALogScale) {
  const Data train = layouts(80, 18);
  const Data test = layouts(200, 19);
  auto log_scale = make();
  log_scale->fit(train.x.data(), train.n, train.d, train.y.data());
  auto raw = make(R"({"log_features": false})");
  raw->fit(train.x.data(), train.n, train.d, train.y.data());
  const double r2_log = r_squared(test.y, predict(*log_scale, test));
  const double r2_raw = r_squared(test.y, predict(*raw, test));
  EXPECT_GT(r2_log, 0.99);
  EXPECT_GT(r2_log, r2_raw + 0.1) << "raw features: R^2 " << r2_raw;
  // The two power-of-two columns are compressed; the signed one is not.
  EXPECT_EQ(nlohmann::json::parse(log_scale->describe_fit())["log_features"], 2);
  EXPECT_EQ(nlohmann::json::parse(raw->describe_fit())["log_features"], 0);
  expect_error([&] { make(R"({"log_features": 1})"); }, COTUNE_ERR_INVALID_ARGUMENT, "'log_features'");
}

// The envelope of saved state (cotune/support/state_blob.hpp): magic, id, version, payload length, FNV-1a.
std::string envelope(const std::string& id, uint32_t version, const std::string& payload) {
  std::string out("cotunePS", 8);
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
  };
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : payload) h = (h ^ c) * 1099511628211ull;
  put(id.size(), 2);
  out += id;
  put(version, 4);
  put(payload.size(), 8);
  put(h, 8);
  return out + payload;
}

TEST_F(KrrTest, StateSavedBeforeTheLogCompressionStillLoads) {
  // Signed features: nothing is compressed, so the same model in the version 1 layout (the same
  // fields without the compression scales) must predict the same.
  const Data train = sample(60, 3, 20, smooth_positive);
  const Data test = sample(40, 3, 21, smooth_positive);
  auto p = make();
  p->fit(train.x.data(), train.n, train.d, train.y.data());
  const std::string v2 = p->save();
  const std::string id = "org.cotune.predictor.krr";
  const size_t header = 8 + 2 + id.size() + 4 + 8 + 8;
  ASSERT_EQ(v2.substr(0, header), envelope(id, 2, v2.substr(header)).substr(0, header));

  std::istringstream in(v2.substr(header));
  uint64_t d = 0;
  bool log_target = false;
  std::vector<double> mean, scale, compress;
  dlib::deserialize(d, in);
  dlib::deserialize(log_target, in);
  dlib::deserialize(mean, in);
  dlib::deserialize(scale, in);
  dlib::deserialize(compress, in);
  EXPECT_EQ(compress, std::vector<double>(3, 0.0));
  std::ostringstream v1;
  dlib::serialize(d, v1);
  dlib::serialize(log_target, v1);
  dlib::serialize(mean, v1);
  dlib::serialize(scale, v1);
  v1 << in.rdbuf();

  auto q = make();
  q->load(envelope(id, 1, v1.str()));
  EXPECT_EQ(predict(*p, test), predict(*q, test));
  expect_error([&] { q->load(envelope(id, 3, v1.str())); }, COTUNE_ERR_VERSION, "version 3 is not supported (expected 1 to 2)");
}

TEST_F(KrrTest, FixedHyperParametersAreKept) {
  const Data train = sample(80, 3, 17, smooth_positive);
  auto p = make(R"({"gamma": 0.25, "lambda": 0.01})");
  p->fit(train.x.data(), train.n, train.d, train.y.data());
  const auto fit = nlohmann::json::parse(p->describe_fit());
  EXPECT_DOUBLE_EQ(fit["gamma"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(fit["lambda"].get<double>(), 0.01);
  EXPECT_TRUE(std::isfinite(fit["loo_error"].get<double>()));
}

}  // namespace
