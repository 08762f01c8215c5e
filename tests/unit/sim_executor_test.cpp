// The sim executor through the real plugins: a trace from the llm space is answered with the
// performance model's metrics, `oom` carries the memory breakdown, and seeded noise reproduces.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/registry.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

using cotune::core::Executor;
using cotune::core::Registry;
using cotune::core::Space;
using nlohmann::json;
using ::testing::HasSubstr;

namespace {

const json kWorkload = {{"model", {{"preset", "llama3-8b"}}},
                        {"training", {{"global_batch", 256}}},
                        {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 2}, {"price_per_gpu_hour", 2}}}};

class SimExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(registry_.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-llm.so"));
    ASSERT_TRUE(registry_.load_file(COTUNE_PLUGIN_DIR "/libcotune-executor-sim.so"));
    space_ = registry_.make_space("llm", kWorkload.dump());
  }

  cotune::core::TrialResult run(Executor& ex, const json& config) {
    config_ = space_->parse(config.dump());
    config_json_ = space_->render(config_.data(), COTUNE_RENDER_JSON);
    cotune_trial t = cotune::core::empty_trial();
    t.config_json = cotune_str{config_json_.data(), config_json_.size()};
    t.trace = &space_->lower(config_.data());
    t.config = config_.data();
    t.num_params = config_.size();
    auto job = ex.submit(t);
    return job->poll(1000);
  }

  Registry registry_;
  std::unique_ptr<Space> space_;
  std::vector<double> config_;
  std::string config_json_;
};

}  // namespace

TEST_F(SimExecutorTest, NeedsATrace) {
  auto ex = registry_.make_executor("sim");
  EXPECT_TRUE(ex->needs_trace());
  cotune_trial t = cotune::core::empty_trial();
  EXPECT_THROW(ex->submit(t), std::exception);
}

TEST_F(SimExecutorTest, ReportsTheModelsMetrics) {
  auto ex = registry_.make_executor("sim");
  auto r = run(*ex, {{"tp", 2}, {"dp", 8}, {"micro_batch", 2}, {"zero", 1}, {"recompute", "selective"}, {"sp", true}});
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  json m = json::parse(r.metrics_json);
  for (const char* k : {"step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "peak_mem_gib", "gpus",
                        "cost_per_mtokens", "breakdown"})
    EXPECT_TRUE(m.contains(k)) << k;
  EXPECT_GT(m["step_time_s"].get<double>(), 0);
  EXPECT_NEAR(m["tokens_per_s"].get<double>(), 256.0 * 8192 / m["step_time_s"].get<double>(), 1e-6 * m["tokens_per_s"].get<double>());
  EXPECT_GT(m["mfu"].get<double>(), 0.1);
  EXPECT_LT(m["mfu"].get<double>(), 0.8);
  EXPECT_EQ(m["gpus"], 16);
  EXPECT_TRUE(m["breakdown"]["exposed_comm_s"].contains("tp"));
  // $2 per GPU-hour x 16 GPUs for 256 x 8192 tokens per step.
  EXPECT_NEAR(m["cost_per_mtokens"].get<double>(),
              2.0 * 16 * m["step_time_s"].get<double>() / 3600 / (256 * 8192 / 1e6), 1e-9);
}

TEST_F(SimExecutorTest, OutOfMemoryCarriesTheBreakdown) {
  auto ex = registry_.make_executor("sim");
  auto r = run(*ex, {{"tp", 1}, {"dp", 16}, {"micro_batch", 16}, {"zero", 0}, {"recompute", "none"}});
  EXPECT_EQ(r.status, COTUNE_STATUS_OOM);
  EXPECT_THAT(r.error, HasSubstr("out of memory: needs"));
  EXPECT_THAT(r.error, HasSubstr("activations"));
  EXPECT_THAT(r.error, HasSubstr("optimizer state"));
}

TEST_F(SimExecutorTest, AMachineWithLessMemoryRunsOutWhereTheModelFits) {
  // Llama-3 8B at tp 2, micro-batch 2: the model's estimate fits an H100's 79.6 GiB; a machine that
  // leaves a job 20 GiB (the rest held by something the estimate does not count) runs out, and the
  // error names the machine's memory, not the catalogue's.
  const json config = {{"tp", 2}, {"dp", 8}, {"micro_batch", 2}, {"zero", 1}, {"recompute", "selective"}, {"sp", true}};
  auto catalogue = registry_.make_executor("sim");
  auto ran = run(*catalogue, config);
  ASSERT_EQ(ran.status, COTUNE_STATUS_OK) << ran.error;
  const double needs = json::parse(ran.metrics_json)["peak_mem_gib"].get<double>();
  ASSERT_GT(needs, 20.0);
  auto smaller = registry_.make_executor("sim", R"({"hardware": {"hbm_gib": 20}})");
  auto r = run(*smaller, config);
  EXPECT_EQ(r.status, COTUNE_STATUS_OOM);
  EXPECT_THAT(r.error, HasSubstr("but the h100-sxm has 20.0 GiB"));
  auto larger = registry_.make_executor("sim", json{{"hardware", {{"hbm_gib", needs + 1}}}}.dump());
  EXPECT_EQ(run(*larger, config).status, COTUNE_STATUS_OK);
  EXPECT_THROW(registry_.make_executor("sim", R"({"hardware": {"hbm_gib": 0}})"), std::exception);
}

TEST_F(SimExecutorTest, NoiseIsSeededPerConfiguration) {
  const json c1 = {{"tp", 2}, {"dp", 8}, {"zero", 1}, {"recompute", "selective"}, {"sp", true}};
  const json c2 = {{"tp", 4}, {"dp", 4}, {"zero", 1}, {"recompute", "selective"}, {"sp", true}};
  auto exact = registry_.make_executor("sim");
  auto noisy = registry_.make_executor("sim", R"({"noise": 0.05, "seed": 3})");
  auto again = registry_.make_executor("sim", R"({"noise": 0.05, "seed": 3})");
  auto other = registry_.make_executor("sim", R"({"noise": 0.05, "seed": 4})");
  auto step = [&](Executor& ex, const json& c) { return json::parse(run(ex, c).metrics_json)["step_time_s"].get<double>(); };
  const double base = step(*exact, c1);
  const double a = step(*noisy, c1);
  EXPECT_NE(a, base);
  EXPECT_NEAR(a / base, 1.0, 0.3);
  EXPECT_EQ(step(*again, c1), a);  // reproducible
  EXPECT_NE(step(*other, c1), a);  // another seed, another draw
  EXPECT_NE(step(*noisy, c2) / step(*exact, c2), a / base);  // another configuration, another draw
}

TEST_F(SimExecutorTest, HardwareOverridesTimeAMachineTheModelDoesNotKnow) {
  // A mixture of experts on a machine whose grouped GEMMs reach half the catalogue's efficiency (H100:
  // 0.55 of a dense GEMM's): the step is slower than on the catalogue's machine, and a dense GEMM's
  // efficiency override slows it too.
  const json moe = {{"hidden", 2048}, {"layers", 16}, {"heads", 16}, {"vocab", 32000}, {"seq_len", 2048},
                    {"experts", 8}, {"top_k", 2}, {"expert_ffn_hidden", 4096}, {"gated_mlp", true}};
  space_ = registry_.make_space("llm",
                                json{{"model", moe}, {"training", {{"global_batch", 64}}},
                                     {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 1}}}}.dump(),
                                R"({"ep": [8], "etp": [1]})");
  const json config = {{"dp", 8}, {"ep", 8}, {"etp", 1}};
  auto step = [&](const std::string& options) {
    auto ex = registry_.make_executor("sim", options);
    auto r = run(*ex, config);
    EXPECT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
    return json::parse(r.metrics_json)["step_time_s"].get<double>();
  };
  const double catalogue = step("{}");
  EXPECT_GT(step(R"({"hardware": {"grouped_gemm_efficiency": 0.275}})"), 1.2 * catalogue);
  EXPECT_GT(step(R"({"hardware": {"gemm_efficiency_max": 0.4}})"), 1.2 * catalogue);
  try {
    registry_.make_executor("sim", R"({"hardware": {"grouped_gemm_efficiency": 0}})");
    ADD_FAILURE() << "a grouped GEMM efficiency of 0 was taken";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("hardware/grouped_gemm_efficiency: expected a number in [0.001, 10.0], got 0"));
  }
  // A misspelt constant names the one it most likely means.
  try {
    registry_.make_executor("sim", R"({"hardware": {"host_launch_s": 20}})");
    ADD_FAILURE() << "an unknown hardware field was taken";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("hardware/host_launch_s: unknown field (did you mean \"host_launch_us\"?) (expected "));
  }
  try {
    registry_.make_executor("sim", R"({"hardwre": {}})");
    ADD_FAILURE() << "an unknown option was taken";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("options/hardwre: unknown option (did you mean \"hardware\"?)"));
  }
}

TEST_F(SimExecutorTest, RejectsBadOptions) {
  EXPECT_THROW(registry_.make_executor("sim", R"({"noise": -1})"), std::exception);
  EXPECT_THROW(registry_.make_executor("sim", R"({"noise": 0.1, "speed": 2})"), std::exception);
  EXPECT_THROW(registry_.make_executor("sim", R"({"seed": "x"})"), std::exception);
}
