// The replay executor through the real plugins (llm space, replay executor .so) on tables written
// here: matched configurations answer the table's metrics (the mean of repeated rows), failed and
// oom rows replay their status, unmatched configurations and other workloads' rows are
// `unavailable`, and bad tables fail with errors that name the file, line and column. Then whole
// studies over a sparse table: only available trials count, unavailable ones are stored once and
// never proposed again, and the study ends.
#include <sys/stat.h>
#include <cotune/core/abi/components.hpp>
#include <cotune/core/abi/log.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/studyfile/study_file.hpp>
#include <cotune/core/run/study_runner.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;
using cotune::core::Executor;
using cotune::core::Registry;
using cotune::core::Space;
using cotune::core::TrialResult;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

json workload(int global_batch) {
  return {{"model", {{"preset", "llama3-8b"}}},
          {"training", {{"global_batch", global_batch}}},
          {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 2}}}};
}

// The llm space's 12 parameters, then workload columns, status, reason and metrics. CRLF line ends,
// a quoted note with a comma, a line break and a doubled quote.
const char* kHeader = "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,hidden,global_batch,dtype,note,"
                      "status,reason,tokens_per_s,step_time_s\r\n";
const char* kRows =
    // two measurements of one configuration (tp written as 2.0: numbers compare as numbers)
    "2.0,1,8,1,1,1,1,1,selective,true,16,h100-sxm,4096,256,bf16,\"node a, first\",ok,,100000,2.0\r\n"
    "2,1,8,1,1,1,1,1,selective,TRUE,16,h100-sxm,4096,256,bf16,\"second\r\nrun, \"\"warm\"\"\",,,110000,1.8\r\n"
    "4,1,4,1,1,2,1,0,none,false,16,h100-sxm,4096,256,bf16,,oom,CUDA out of memory on rank 3,,\r\n"
    "1,1,16,1,1,1,1,1,full,false,16,h100-sxm,4096,256,bf16,,failed,,,\r\n"
    "1,1,16,1,1,2,1,1,none,false,16,h100-sxm,4096,256,bf16,,invalid,global_batch not divisible,,\r\n"
    // another workload (global batch 512)
    "1,1,16,1,1,2,1,1,selective,false,16,h100-sxm,4096,512,bf16,,ok,,999,9.9\r\n";

class ReplayExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(registry_.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-llm.so"));
    ASSERT_TRUE(registry_.load_file(COTUNE_PLUGIN_DIR "/libcotune-executor-replay.so"));
    char tmpl[] = "/tmp/cotune-replay-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    table_ = write("runs.csv", std::string(kHeader) + kRows);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) const {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::unique_ptr<Executor> executor(json options = json::object()) const {
    if (!options.contains("file")) options["file"] = table_;
    return registry_.make_executor("replay", options.dump());
  }

  // Submits (or attaches to) one configuration of the llm space for the workload and returns the
  // finished result.
  TrialResult run(Executor& ex, const json& config, int global_batch = 256, const char* attach_id = nullptr) {
    const json w = workload(global_batch);
    workload_json_ = w.dump();
    space_ = registry_.make_space("llm", workload_json_);
    config_ = space_->parse(config.dump());
    config_json_ = space_->render(config_.data(), COTUNE_RENDER_JSON);
    cotune_trial t = cotune::core::empty_trial();
    t.config_json = cotune_str{config_json_.data(), config_json_.size()};
    t.workload_json = cotune_str{workload_json_.data(), workload_json_.size()};
    t.params = space_->raw_params();
    t.num_params = space_->num_params();
    t.config = config_.data();
    auto job = attach_id != nullptr ? ex.attach(t, attach_id) : ex.submit(t);
    TrialResult r = job->poll(0);
    EXPECT_TRUE(r.finished()) << "replayed trials finish at once";
    return r;
  }

  // The error a failing submit throws ("" when it does not throw).
  std::string submit_error(Executor& ex, const json& config) {
    try {
      run(ex, config);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
  std::string create_error(const json& options) const {
    try {
      executor(options);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }

  // The study trial a host gives candidates(): the workload and the space's parameters (both borrowed).
  static cotune_trial study_of(const std::string& workload_json, const Space& space) {
    cotune_trial study = cotune::core::empty_trial();
    study.workload_json = cotune_str{workload_json.data(), workload_json.size()};
    study.params = space.raw_params();
    study.num_params = space.num_params();
    return study;
  }

  static json cfg(int tp, int dp, int mb, const char* recompute, bool sp = false, int zero = 1) {
    return {{"tp", tp}, {"pp", 1}, {"dp", dp}, {"micro_batch", mb}, {"zero", zero}, {"recompute", recompute}, {"sp", sp}};
  }

  Registry registry_;
  std::string dir_, table_;
  std::unique_ptr<Space> space_;
  std::string workload_json_, config_json_;
  std::vector<double> config_;
};

TEST_F(ReplayExecutorTest, MatchedConfigurationAnswersTheMeanOfItsRows) {
  auto ex = executor();
  EXPECT_FALSE(ex->needs_trace());
  EXPECT_TRUE(ex->can_attach());
  EXPECT_EQ(ex->capacity(), 64);
  TrialResult r = run(*ex, cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  json m = json::parse(r.metrics_json);
  EXPECT_DOUBLE_EQ(m["tokens_per_s"].get<double>(), 105000);
  EXPECT_DOUBLE_EQ(m["step_time_s"].get<double>(), 1.9);
  EXPECT_EQ(m["replay_rows"], 2);
  EXPECT_FALSE(m.contains("replay_failed_rows"));
  EXPECT_THAT(r.external_id, HasSubstr("runs.csv:2"));
  // Following the job after a restart answers again from the table.
  TrialResult again = run(*ex, cfg(2, 8, 1, "selective", true), 256, r.external_id.c_str());
  EXPECT_EQ(again.status, COTUNE_STATUS_OK);
  EXPECT_EQ(again.metrics_json, r.metrics_json);
}

TEST_F(ReplayExecutorTest, FailedAndOomRowsReplayTheirStatusAndReason) {
  auto ex = executor();
  TrialResult oom = run(*ex, cfg(4, 4, 2, "none", false, 0));
  EXPECT_EQ(oom.status, COTUNE_STATUS_OOM);
  EXPECT_THAT(oom.error, AllOf(HasSubstr("line 5"), HasSubstr("CUDA out of memory on rank 3")));
  TrialResult failed = run(*ex, cfg(1, 16, 1, "full"));
  EXPECT_EQ(failed.status, COTUNE_STATUS_FAILED);
  EXPECT_THAT(failed.error, HasSubstr("line 6"));
}

TEST_F(ReplayExecutorTest, UnmatchedConfigurationIsUnavailable) {
  auto ex = executor();
  TrialResult r = run(*ex, cfg(8, 2, 1, "full"));
  EXPECT_EQ(r.status, COTUNE_STATUS_UNAVAILABLE);
  EXPECT_THAT(r.error, AllOf(HasSubstr("no row of"), HasSubstr("runs.csv"), HasSubstr("4 of its 5 rows are for this workload"),
                             HasSubstr("global_batch=256")));
  // The `invalid` row measured nothing: its configuration is unavailable too.
  EXPECT_EQ(run(*ex, cfg(1, 16, 2, "none")).status, COTUNE_STATUS_UNAVAILABLE);
}

TEST_F(ReplayExecutorTest, RowsOfAnotherWorkloadNeverMatch) {
  auto ex = executor();
  EXPECT_EQ(run(*ex, cfg(1, 16, 2, "selective")).status, COTUNE_STATUS_UNAVAILABLE);
  // The same executor asked for the other workload answers from that workload's row.
  TrialResult other = run(*ex, cfg(1, 16, 2, "selective"), 512);
  ASSERT_EQ(other.status, COTUNE_STATUS_OK) << other.error;
  EXPECT_DOUBLE_EQ(json::parse(other.metrics_json)["tokens_per_s"].get<double>(), 999);
  EXPECT_EQ(run(*ex, cfg(2, 8, 1, "selective", true), 512).status, COTUNE_STATUS_UNAVAILABLE);
}

TEST_F(ReplayExecutorTest, OkRowsWinOverFailedRepeats) {
  table_ = write("mixed.csv", std::string(kHeader) +
                                  "1,1,16,1,1,1,1,1,full,false,16,h100-sxm,4096,256,bf16,,failed,hang,,\n"
                                  "1,1,16,1,1,1,1,1,full,false,16,h100-sxm,4096,256,bf16,,ok,,5000,4\n");
  auto ex = executor();
  TrialResult r = run(*ex, cfg(1, 16, 1, "full"));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  json m = json::parse(r.metrics_json);
  EXPECT_EQ(m["replay_rows"], 1);
  EXPECT_EQ(m["replay_failed_rows"], 1);
}

TEST_F(ReplayExecutorTest, MetricsOptionMapsColumnsAndWhereFiltersRows) {
  table_ = write("renamed.csv",
                 "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,cluster,\"measured tokens/s\"\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,a,123\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,b,456\n");
  // No column is named like a known metric: the mapping is required.
  EXPECT_THAT(create_error({{"file", table_}}), AllOf(HasSubstr("renamed.csv"), HasSubstr("no metric column")));
  auto ex = executor({{"metrics", {{"tokens_per_s", "measured tokens/s"}}}, {"where", {{"cluster", "b"}}}});
  TrialResult r = run(*ex, cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["tokens_per_s"].get<double>(), 456);
  EXPECT_THAT(create_error({{"file", table_}, {"metrics", {{"tokens_per_s", "tokens"}}}}),
              AllOf(HasSubstr("options/metrics/tokens_per_s"), HasSubstr("no column 'tokens'")));
  EXPECT_THAT(create_error({{"file", table_}, {"metrics", {{"tokens_per_s", "measured tokens/s"}}}, {"where", {{"rack", 1}}}}),
              HasSubstr("no column 'rack'"));
}

TEST_F(ReplayExecutorTest, TimeColumnsInAnotherUnitAreConvertedAndStatusWordsRead) {
  // A step time kept in milliseconds is the metric step_time_s in seconds, found by its name or
  // mapped to it; "completed" and "OUT_OF_MEMORY" are the statuses teams' tables and Slurm write.
  table_ = write("ms.csv",
                 "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,status,elapsed_ms,step_time_ms,"
                 "elapsed time per iteration (ms),step time [s]\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,completed,1500,1500,1500,1.5\n"
                 "4,1,4,1,1,2,1,0,none,false,16,h100-sxm,256,OUT_OF_MEMORY,,,,\n");
  auto by_name = executor();
  TrialResult r = run(*by_name, cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["step_time_s"].get<double>(), 1.5);
  EXPECT_EQ(run(*by_name, cfg(4, 4, 2, "none", false, 0)).status, COTUNE_STATUS_OOM);
  // The unit as a log writes it, after the name in brackets, converts too.
  for (const char* column : {"elapsed_ms", "elapsed time per iteration (ms)", "step time [s]"}) {
    auto mapped = executor({{"metrics", {{"step_time_s", column}}}});
    r = run(*mapped, cfg(2, 8, 1, "selective", true));
    ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
    EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["step_time_s"].get<double>(), 1.5) << column;
  }
}

TEST_F(ReplayExecutorTest, AThroughputTheTableLacksIsDerivedFromTheStepTime) {
  // Logs often keep only the step time: tokens_per_s = global_batch * seq_len / step_time_s, the
  // tokens of a step from the row's cells, or from the workload where the table has no such column.
  table_ = write("steps.csv",
                 "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,seq_len,step_time_ms\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,8192,2000\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,8192,2500\n");
  auto ex = executor();
  space_ = registry_.make_space("llm", workload(256).dump());
  const std::string w = workload(256).dump();
  EXPECT_THAT(ex->metrics(study_of(w, *space_)).value(),
              ::testing::ElementsAre("step_time_s", "tokens_per_s", "replay_rows"));
  TrialResult r = run(*ex, cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  json m = json::parse(r.metrics_json);
  EXPECT_DOUBLE_EQ(m["step_time_s"].get<double>(), 2.25);
  // Each row's throughput, averaged as measured throughputs are.
  EXPECT_DOUBLE_EQ(m["tokens_per_s"].get<double>(), (256.0 * 8192 / 2 + 256.0 * 8192 / 2.5) / 2);

  // Without a seq_len column the workload's decides; without either, nothing is derived.
  table_ = write("noseq.csv",
                 "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,step_time_s\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,2\n");
  auto noseq = executor();
  EXPECT_THAT(noseq->metrics(study_of(w, *space_)).value(), ::testing::ElementsAre("step_time_s", "replay_rows"));
  json stated = workload(256);
  stated["model"]["seq_len"] = 4096;
  const std::string ws = stated.dump();
  auto space = registry_.make_space("llm", ws);
  EXPECT_THAT(noseq->metrics(study_of(ws, *space)).value(),
              ::testing::ElementsAre("step_time_s", "tokens_per_s", "replay_rows"));
}

TEST_F(ReplayExecutorTest, APerGpuThroughputAnswersTheJobsAndItsStepTime) {
  // Published tables give tokens/s per GPU, and may carry empty tokens_per_s and step_time_s
  // columns: each answer is completed from what its rows give.
  table_ = write("per_gpu.csv",
                 "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,seq_len,tokens_per_s,"
                 "step_time_s,tokens_per_s_per_gpu,mfu_pct\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,8192,,,4096,41.5\n"
                 "4,1,4,1,1,1,1,1,selective,true,16,h100-sxm,256,8192,70000,30,,\n"
                 // one configuration, a row of each kind: each row's own throughput is averaged
                 "1,1,16,1,1,1,1,1,selective,false,16,h100-sxm,256,8192,60000,,,\n"
                 "1,1,16,1,1,1,1,1,selective,false,16,h100-sxm,256,8192,,,5000,\n");
  auto ex = executor();
  TrialResult r = run(*ex, cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  json m = json::parse(r.metrics_json);
  EXPECT_DOUBLE_EQ(m["tokens_per_s_per_gpu"].get<double>(), 4096);
  EXPECT_DOUBLE_EQ(m["tokens_per_s"].get<double>(), 4096.0 * 16);
  EXPECT_DOUBLE_EQ(m["step_time_s"].get<double>(), 256.0 * 8192 / (4096.0 * 16));
  EXPECT_DOUBLE_EQ(m["mfu"].get<double>(), 0.415);  // a published table's MFU in per cent
  // A row's own figures stand.
  m = json::parse(run(*ex, cfg(4, 4, 1, "selective", true)).metrics_json);
  EXPECT_DOUBLE_EQ(m["tokens_per_s"].get<double>(), 70000);
  EXPECT_DOUBLE_EQ(m["step_time_s"].get<double>(), 30);

  m = json::parse(run(*ex, cfg(1, 16, 1, "selective")).metrics_json);
  EXPECT_EQ(m["replay_rows"], 2);
  EXPECT_DOUBLE_EQ(m["tokens_per_s"].get<double>(), (60000 + 5000.0 * 16) / 2);
  EXPECT_DOUBLE_EQ(m["step_time_s"].get<double>(), 256.0 * 8192 / ((60000 + 5000.0 * 16) / 2));
  // A per-GPU column mapped onto the job's metric would answer a figure 16 times too small; a per-GPU
  // memory figure is what peak_mem_gib means anyway.
  EXPECT_THAT(create_error({{"file", table_}, {"metrics", {{"tokens_per_s", "tokens_per_s_per_gpu"}}}}),
              AllOf(HasSubstr("options/metrics/tokens_per_s"), HasSubstr("is per GPU"), HasSubstr("tokens_per_s_per_gpu")));
  EXPECT_EQ(create_error({{"file", table_}, {"metrics", {{"peak_mem_gib", "tokens_per_s_per_gpu"}}}}), "");
}

TEST_F(ReplayExecutorTest, OneModelSpelledTwoWaysIsOneModel) {
  // Published tables spell a model LLAMA3_70B in one release and LLAMA3-70B in the next; the llm
  // space matches its presets without case and punctuation, and so do the workload's cells.
  table_ = write("spellings.csv",
                 "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,model,tokens_per_s\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,H100_SXM,256,LLAMA3_8B,100\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,Llama3-8B,200\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,llama3-70b,900\n");
  auto ex = executor();
  TrialResult r = run(*ex, cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  json m = json::parse(r.metrics_json);
  EXPECT_EQ(m["replay_rows"], 2) << "the 70B row is another model";
  EXPECT_DOUBLE_EQ(m["tokens_per_s"].get<double>(), 150);
}

TEST_F(ReplayExecutorTest, LoraRowsOfAPublishedTableAreAnotherJob) {
  // A published table's task column: LoRA rows answer only a LoRA workload (training.peft), the
  // pretraining and full fine-tuning rows only the others.
  table_ = write("tasks.csv",
                 "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,task,tokens_per_s\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,pretrain,100\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,sft,200\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,LoRA,900\n");
  auto ex = executor();
  TrialResult r = run(*ex, cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["tokens_per_s"].get<double>(), 150);
}

TEST_F(ReplayExecutorTest, ARowThatLeavesAParameterEmptyAnswersNothingAndFsdpIsZero3) {
  // An empty vpp cell does not stop the study: that row answers no configuration (the option
  // "defaults" says what such a cell stands for). A table without a zero column but with a
  // published table's fsdp column says ZeRO-3 where fsdp > 0, and the default elsewhere (0 without
  // one, as import reads it).
  table_ = write("published.csv",
                 "tp,pp,dp,cp,ep,micro_batch,vpp,recompute,sp,gpus,gpu,global_batch,fsdp,tokens_per_s\n"
                 "2,1,8,1,1,1,,selective,true,16,h100-sxm,256,,100\n"
                 "1,1,16,1,1,1,1,selective,false,16,h100-sxm,256,16,300\n"
                 "2,1,8,1,1,1,1,selective,true,16,h100-sxm,256,,200\n"
                 "2,1,8,1,1,1,,,true,16,h100-sxm,256,,400\n");
  std::vector<std::string> logged;
  cotune::core::set_log_sink([&](int32_t, std::string_view, std::string_view message) { logged.emplace_back(message); });
  auto ex = executor({{"defaults", {{"zero", 1}}}});
  TrialResult fsdp = run(*ex, cfg(1, 16, 1, "selective", false, 3));
  cotune::core::set_log_sink(nullptr);
  // Every column a default would fill is named at once, with its count of rows and first line.
  std::string said;
  for (const std::string& m : logged)
    if (m.find("leave a parameter's cell empty") != std::string::npos) said = m;
  EXPECT_THAT(said, AllOf(HasSubstr("2 row(s)"), HasSubstr("vpp in 2 (first line 2)"),
                          HasSubstr("recompute in 1 (first line 5)"), HasSubstr("{\"vpp\": ..., \"recompute\": ...}")));
  ASSERT_EQ(fsdp.status, COTUNE_STATUS_OK) << fsdp.error;
  EXPECT_DOUBLE_EQ(json::parse(fsdp.metrics_json)["tokens_per_s"].get<double>(), 300);
  TrialResult r = run(*ex, cfg(2, 8, 1, "selective", true, 1));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  json m = json::parse(r.metrics_json);
  EXPECT_EQ(m["replay_rows"], 1) << "the row with an empty vpp answers nothing";
  EXPECT_DOUBLE_EQ(m["tokens_per_s"].get<double>(), 200);
  // With a default for vpp, the empty cell holds it.
  auto filled = executor({{"defaults", {{"zero", 1}, {"vpp", 1}}}});
  EXPECT_EQ(json::parse(run(*filled, cfg(2, 8, 1, "selective", true, 1)).metrics_json)["replay_rows"], 2);
  auto import_like = executor();
  EXPECT_EQ(run(*import_like, cfg(2, 8, 1, "selective", true, 1)).status, COTUNE_STATUS_UNAVAILABLE);
  EXPECT_EQ(run(*import_like, cfg(2, 8, 1, "selective", true, 0)).status, COTUNE_STATUS_OK);
}

TEST_F(ReplayExecutorTest, RepeatedRowsThatDisagreeAreSaid) {
  // One layout published by two releases at 5113 and 9058 tokens/s per GPU: the answer is their
  // mean, and the log says how far apart they are and what the rows differ in.
  table_ = write("releases.csv",
                 "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,source_version,"
                 "tokens_per_s_per_gpu\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,26.02,5113\n"
                 "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,26.02.01,9058\n");
  std::vector<std::string> logged;
  cotune::core::set_log_sink([&](int32_t, std::string_view, std::string_view message) { logged.emplace_back(message); });
  auto ex = executor();
  TrialResult r = run(*ex, cfg(2, 8, 1, "selective", true));
  cotune::core::set_log_sink(nullptr);
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["tokens_per_s_per_gpu"].get<double>(), (5113 + 9058) / 2.0);
  std::string said;
  for (const std::string& m : logged)
    if (m.find("measured by several rows") != std::string::npos) said = m;
  EXPECT_THAT(said, AllOf(HasSubstr("the widest spread is 77 %"), HasSubstr("line 2"), HasSubstr("line 3"),
                          HasSubstr("differ in source_version ('26.02', '26.02.01')"), HasSubstr("\"where\"")));
}

TEST_F(ReplayExecutorTest, MissingFileIsAClearError) {
  EXPECT_THAT(create_error({{"file", dir_ + "/absent.csv"}}),
              AllOf(HasSubstr("options/file: cannot open the table"), HasSubstr("absent.csv")));
  // A relative path says where it was looked for.
  EXPECT_THAT(create_error({{"file", "absent-here.csv"}}),
              HasSubstr("(a relative path resolves against the current directory, " +
                        std::filesystem::current_path().string() + ")"));
  EXPECT_THAT(create_error({{"metrics", {{"x", "y"}}}, {"file", 3}}), HasSubstr("options/file"));
  EXPECT_THAT(create_error({{"file", table_}, {"speed", 1}}), HasSubstr("unknown option"));
  // A folder failed mid-read ("basic_filebuf::underflow"); a FIFO blocked until a writer came.
  EXPECT_THAT(create_error({{"file", dir_}}), HasSubstr("is a folder (expected a CSV file)"));
  const std::string fifo = dir_ + "/table.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(create_error({{"file", fifo}}), HasSubstr("is not a regular file"));
  try {
    registry_.make_executor("replay", "{}");
    ADD_FAILURE() << "no file accepted";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("file: required"));
  }
}

TEST_F(ReplayExecutorTest, MissingParameterColumnNamesTheColumn) {
  table_ = write("novpp.csv",
                 "tp,pp,dp,cp,ep,micro_batch,zero,recompute,sp,gpus,gpu,tokens_per_s\n"
                 "2,1,8,1,1,1,1,selective,true,16,h100-sxm,777\n");
  auto ex = executor();
  EXPECT_THAT(submit_error(*ex, cfg(2, 8, 1, "selective", true)),
              AllOf(HasSubstr("novpp.csv"), HasSubstr("no column 'vpp'"), HasSubstr("defaults")));
  // A value for every row of the absent column makes the table usable.
  auto with_default = executor({{"defaults", {{"vpp", 1}}}});
  TrialResult r = run(*with_default, cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["tokens_per_s"].get<double>(), 777);
}

TEST_F(ReplayExecutorTest, ATeamsOwnColumnNamesAndSpellingsAreRead) {
  // Megatron-LM's names for tp, pp and the micro-batch are read as cotune import reads them;
  // "Selective" and "H100-SXM" written as a team's table does.
  table_ = write("team.csv",
                 "tensor_model_parallel_size,pipeline_model_parallel_size,micro_batch_size,recompute,sp,gpus,gpu,"
                 "global_batch,step_time_s\n"
                 "2,1,1,Selective,true,16,H100-SXM,256,1.25\n");
  // Every column the space needs and the table lacks is named at once; ep, which the space fixes at 1
  // for a dense model, is not needed.
  EXPECT_THAT(submit_error(*executor(), cfg(2, 8, 1, "selective", true)),
              AllOf(HasSubstr("no column 'dp', 'cp', 'vpp', 'zero'"), HasSubstr("\"defaults\"")));
  const json defaults = {{"dp", 8}, {"cp", 1}, {"vpp", 1}, {"zero", 1}};
  TrialResult r = run(*executor({{"defaults", defaults}}), cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["step_time_s"].get<double>(), 1.25);
  // A team's own name is given with the option "columns".
  table_ = write("own.csv", "tensor_parallel,pp,micro_batch,recompute,sp,gpus,gpu,global_batch,step_time_s\n"
                            "2,1,1,selective,true,16,h100-sxm,256,1.5\n");
  r = run(*executor({{"columns", {{"tp", "tensor_parallel"}}}, {"defaults", defaults}}), cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["step_time_s"].get<double>(), 1.5);
  EXPECT_THAT(create_error({{"file", table_}, {"columns", {{"tp", "tensor_parallel_size"}}}}),
              AllOf(HasSubstr("options/columns/tp"), HasSubstr("no column 'tensor_parallel_size'")));
}

// A table that says its global batch as Megatron-LM does (global_batch_size) answers a workload only
// from the rows of its batch size, not an average over two batch sizes.
TEST_F(ReplayExecutorTest, AWorkloadFieldSpelledAsMegatronSpellsItSelectsTheRows) {
  table_ = write("gbs.csv", "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch_size,step_time_s\n"
                            "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,1.25\n"
                            "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,512,2.5\n");
  TrialResult r = run(*executor(), cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  const json m = json::parse(r.metrics_json);
  EXPECT_DOUBLE_EQ(m["step_time_s"].get<double>(), 1.25);
  EXPECT_EQ(m["replay_rows"], 1);
}

// A GPU written as its marketing name, in the table and in the study, is the catalogue's GPU: the
// same names a workload's cluster.gpu accepts.
TEST_F(ReplayExecutorTest, AGpuCellIsReadAsTheCatalogueReadsItsName) {
  table_ = write("gpus.csv", "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,step_time_s\n"
                             "2,1,8,1,1,1,1,1,selective,true,16,H100 SXM5 80GB,256,1.25\n"
                             "2,1,8,1,1,1,1,1,selective,true,16,NVIDIA A100-SXM4-80GB,256,9.0\n");
  TrialResult r = run(*executor(), cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  const json m = json::parse(r.metrics_json);
  EXPECT_DOUBLE_EQ(m["step_time_s"].get<double>(), 1.25) << "the A100 row is another GPU";
  EXPECT_EQ(m["replay_rows"], 1);
  // The study lists the row's configuration under the space's name for the GPU.
  json w = workload(256);
  w["cluster"]["gpu"] = "H100 SXM5 80GB";
  const std::string workload_json = w.dump();
  auto space = registry_.make_space("llm", workload_json);
  const std::vector<double> rows = executor()->candidates(study_of(workload_json, *space));
  ASSERT_EQ(rows.size(), space->num_params());
  EXPECT_EQ(json::parse(space->render(rows.data(), COTUNE_RENDER_JSON))["gpu"], "h100-sxm");
}

// A column that misspells a parameter ("micro_bach") would leave the rows replayed at the default
// given for it: refused, naming the column and the mapping that reads it. One that misspells a
// workload column ("global_bach") matches rows of every batch size: said in the log.
TEST_F(ReplayExecutorTest, AMisspeltColumnIsNamedNotSilentlyDefaulted) {
  table_ = write("typo.csv", "tp,pp,dp,cp,ep,micro_bach,vpp,zero,recompute,sp,gpus,gpu,global_batch,step_time_s\n"
                             "2,1,8,1,1,2,1,1,selective,true,16,h100-sxm,256,1.25\n");
  EXPECT_THAT(create_error({{"file", table_}, {"defaults", {{"micro_batch", 1}}}}), "");
  EXPECT_THAT(submit_error(*executor({{"defaults", {{"micro_batch", 1}}}}), cfg(2, 8, 1, "selective", true)),
              AllOf(HasSubstr("typo.csv"), HasSubstr("'micro_bach' for micro_batch"),
                    HasSubstr("\"columns\": {\"micro_batch\": \"micro_bach\"}")));
  EXPECT_THAT(submit_error(*executor(), cfg(2, 8, 1, "selective", true)), HasSubstr("'micro_bach' for micro_batch"));
  TrialResult r = run(*executor({{"columns", {{"micro_batch", "micro_bach"}}}}), cfg(2, 8, 2, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  // A short name matches only itself in another case; cells that hold the default harm nothing.
  table_ = write("case.csv", "tp,pp,dp,cp,ep,micro_batch,VPP,zero,recompute,sp,gpus,gpu,global_batch,step_time_s\n"
                             "2,1,8,1,1,1,2,1,selective,true,16,h100-sxm,256,1.25\n");
  EXPECT_THAT(submit_error(*executor({{"defaults", {{"vpp", 1}}}}), cfg(2, 8, 1, "selective", true)),
              HasSubstr("'VPP' for vpp"));
  table_ = write("same.csv", "tp,pp,dp,cp,ep,micro_bach,vpp,zero,recompute,sp,gpus,gpu,global_batch,step_time_s\n"
                             "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,1.25\n");
  EXPECT_EQ(run(*executor({{"defaults", {{"micro_batch", 1}}}}), cfg(2, 8, 1, "selective", true)).status, COTUNE_STATUS_OK);
  // Other quantities one edit from a short name (mtp, np, cpu), or a longer field of a parameter
  // (recompute_method), are not taken for one.
  table_ = write("others.csv", "tp,pp,dp,cp,ep,micro_batch,zero,recompute,sp,gpus,gpu,global_batch,mtp,np,cpu,"
                               "recompute_method,step_time_s\n"
                               "2,1,8,1,1,1,1,selective,true,16,h100-sxm,256,1,4,64,uniform,1.25\n");
  r = run(*executor({{"defaults", {{"vpp", 1}}}}), cfg(2, 8, 1, "selective", true));
  EXPECT_EQ(r.status, COTUNE_STATUS_OK) << r.error;

  table_ = write("typo2.csv", "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_bach,step_time_s\n"
                              "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,1.25\n"
                              "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,512,2.5\n");
  std::vector<std::string> logged;
  cotune::core::set_log_sink([&](int32_t, std::string_view, std::string_view message) { logged.emplace_back(message); });
  r = run(*executor(), cfg(2, 8, 1, "selective", true));
  cotune::core::set_log_sink(nullptr);
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  std::string said;
  for (const std::string& m : logged)
    if (m.find("global_bach") != std::string::npos && m.find("not read") != std::string::npos) said = m;
  EXPECT_THAT(said, AllOf(HasSubstr("did you mean \"global_batch\""), HasSubstr("\"columns\": {\"global_batch\": \"global_bach\"}")));
  // Read under the workload's name, the rows of the other batch size no longer answer.
  r = run(*executor({{"columns", {{"global_batch", "global_bach"}}}}), cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["step_time_s"].get<double>(), 1.25);
}

// A column one edit from a metric the table lacks ("mfuu") is not read as that metric: the log names
// it and the mapping that reads it, and the mapped table answers it.
TEST_F(ReplayExecutorTest, AColumnThatMisspellsAMetricIsNamed) {
  table_ = write("metric-typo.csv", "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,step_time_s,mfuu\n"
                                    "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,256,1.25,0.41\n");
  std::vector<std::string> logged;
  cotune::core::set_log_sink([&](int32_t, std::string_view, std::string_view message) { logged.emplace_back(message); });
  TrialResult r = run(*executor(), cfg(2, 8, 1, "selective", true));
  cotune::core::set_log_sink(nullptr);
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_FALSE(json::parse(r.metrics_json).contains("mfu"));
  std::string said;
  for (const std::string& m : logged)
    if (m.find("'mfuu'") != std::string::npos) said = m;
  EXPECT_THAT(said, AllOf(HasSubstr("metric-typo.csv"), HasSubstr("did you mean \"mfu\""),
                          HasSubstr("\"metrics\": {\"mfu\": \"mfuu\"}")));
  // Columns read as metrics, and the table's other columns, are not named.
  for (const std::string& m : logged) EXPECT_THAT(m, Not(HasSubstr("'step_time_s'")));
  r = run(*executor({{"metrics", {{"mfu", "mfuu"}}}}), cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["mfu"].get<double>(), 0.41);
}

TEST_F(ReplayExecutorTest, AParameterTheTableDoesNotStateIsLeftToTheSpace) {
  // Megatron-style logs give the GPU count, not the data-parallel degree.
  table_ = write("nodp.csv",
                 "tp,pp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,step_time_s\n"
                 "2,1,1,1,1,1,1,selective,true,16,h100-sxm,256,1.25\n"
                 "4,1,1,1,1,1,1,selective,true,16,h100-sxm,256,1.5\n");
  EXPECT_THAT(submit_error(*executor(), cfg(2, 8, 1, "selective", true)),
              AllOf(HasSubstr("no column 'dp'"), HasSubstr("\"unstated\": [\"dp\"]")));
  // Matching on what the rows state is right only among the table's own configurations.
  EXPECT_THAT(create_error({{"unstated", {"dp"}}, {"restrict_search", false}}),
              AllOf(HasSubstr("options/unstated"), HasSubstr("restrict_search")));
  auto ex = executor({{"unstated", {"dp"}}});
  TrialResult r = run(*ex, cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["step_time_s"].get<double>(), 1.25);
  // The listing leaves dp to the host (NaN, ABI 1.7) and states the rest.
  const std::string workload_json = workload(256).dump();
  auto space = registry_.make_space("llm", workload_json);
  const std::vector<double> rows = ex->candidates(study_of(workload_json, *space));
  const size_t p = space->num_params();
  ASSERT_EQ(rows.size(), 2 * p);
  size_t dp_index = p;
  for (size_t i = 0; i < p; ++i)
    if (space->params()[i].name == "dp") dp_index = i;
  ASSERT_LT(dp_index, p);
  std::set<double> tps;
  for (size_t r0 = 0; r0 < rows.size(); r0 += p) {
    for (size_t i = 0; i < p; ++i)
      EXPECT_EQ(std::isnan(rows[r0 + i]), i == dp_index) << space->params()[i].name;
    tps.insert(rows[r0]);
  }
  EXPECT_EQ(tps, (std::set<double>{2, 4}));
  // A parameter the table states, or one the space lacks, is refused by name.
  EXPECT_THAT(submit_error(*executor({{"unstated", {"tp"}}}), cfg(2, 8, 1, "selective", true)),
              AllOf(HasSubstr("options/unstated"), HasSubstr("has a column tp")));
  EXPECT_THAT(submit_error(*executor({{"unstated", {"dp", "data_parallel"}}}), cfg(2, 8, 1, "selective", true)),
              AllOf(HasSubstr("options/unstated"), HasSubstr("no parameter data_parallel")));
  EXPECT_THAT(create_error({{"unstated", "dp"}}), HasSubstr("options/unstated: expected a list of parameter names"));
}

TEST_F(ReplayExecutorTest, BadCellsNameTheLineAndColumn) {
  table_ = write("badmetric.csv", std::string(kHeader) +
                                      "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,4096,256,bf16,,ok,,fast,2\n");
  EXPECT_THAT(create_error({{"file", table_}}),
              AllOf(HasSubstr("badmetric.csv line 2"), HasSubstr("column tokens_per_s"), HasSubstr("'fast'")));
  table_ = write("badstatus.csv", std::string(kHeader) +
                                      "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,4096,256,bf16,,exploded,,1,2\n");
  EXPECT_THAT(create_error({{"file", table_}}), AllOf(HasSubstr("line 2, column status"), HasSubstr("'exploded'")));
  // A parameter cell is read when the table is indexed for the study's workload (first submit).
  table_ = write("badparam.csv", std::string(kHeader) +
                                     "two,1,8,1,1,1,1,1,selective,true,16,h100-sxm,4096,256,bf16,,ok,,1,2\n");
  auto ex = executor();
  EXPECT_THAT(submit_error(*ex, cfg(2, 8, 1, "selective", true)),
              AllOf(HasSubstr("badparam.csv line 2, column tp"), HasSubstr("expected a number"), HasSubstr("'two'")));
}

TEST_F(ReplayExecutorTest, MalformedCsvIsAClearError) {
  table_ = write("short.csv", std::string(kHeader) + "2,1,8\n");
  EXPECT_THAT(create_error({{"file", table_}}), AllOf(HasSubstr("short.csv line 2"), HasSubstr("3 fields")));
  table_ = write("open.csv", std::string(kHeader) + "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,4096,256,bf16,\"open\n\n");
  EXPECT_THAT(create_error({{"file", table_}}), AllOf(HasSubstr("open.csv line 2"), HasSubstr("never closed")));
  table_ = write("stray.csv", std::string(kHeader) + "2,1,8,1,1,1,1,1,sel\"ective,true,16,h100-sxm,4096,256,bf16,,,,1,2\n");
  EXPECT_THAT(create_error({{"file", table_}}), AllOf(HasSubstr("stray.csv line 2"), HasSubstr("field 9")));
  table_ = write("dup.csv", "tp,tp,tokens_per_s\n1,1,1\n");
  EXPECT_THAT(create_error({{"file", table_}}), HasSubstr("column 'tp' appears twice"));
  table_ = write("empty.csv", "");
  EXPECT_THAT(create_error({{"file", table_}}), AllOf(HasSubstr("empty.csv"), HasSubstr("header")));
  // A field over the size limit (1 MiB) is refused rather than read.
  table_ = write("huge.csv", "tp,tokens_per_s\n" + std::string((1 << 20) + 10, '7') + ",1\n");
  EXPECT_THAT(create_error({{"file", table_}}), AllOf(HasSubstr("huge.csv line 2"), HasSubstr("longer than")));
}

TEST_F(ReplayExecutorTest, RowsOfSeveralWorkloadsTheWorkloadDoesNotChooseBetweenAreRefused) {
  // The workload names a preset, not the model's dimensions: the hidden column stays open, and rows
  // that hold two values of it are runs of two models. A study must not compare them as layouts of
  // one, whether or not they share a configuration.
  table_ = write("ambiguous.csv", std::string(kHeader) +
                                      "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,4096,256,bf16,,ok,,100,2\n"
                                      "2,1,8,1,1,1,1,1,selective,true,16,h100-sxm,,256,bf16,,ok,,100,2\n"
                                      "4,1,4,1,1,1,1,1,selective,true,16,h100-sxm,8192,256,bf16,,ok,,70,3\n");
  auto ex = executor();
  EXPECT_THAT(submit_error(*ex, cfg(2, 8, 1, "selective", true)),
              AllOf(HasSubstr("several values of hidden"), HasSubstr("'4096' (line 2)"), HasSubstr("'8192' (line 4)"),
                    HasSubstr("\"where\"")));
  // A `where` filter (or the field in the workload) settles it; an empty cell says nothing.
  auto filtered = executor({{"where", {{"hidden", 4096}}}});
  TrialResult r = run(*filtered, cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_EQ(json::parse(r.metrics_json)["replay_rows"], 1) << "the row with an empty hidden cell is filtered out";
  EXPECT_THAT(create_error({{"where", {{"hidden", 1234}}}}), AllOf(HasSubstr("options/where: no row of"), HasSubstr("hidden = 1234")));
  // A list of values keeps the rows holding any of them.
  auto both = executor({{"where", {{"hidden", {4096, 8192}}}}});
  EXPECT_THAT(submit_error(*both, cfg(2, 8, 1, "selective", true)), HasSubstr("several values of hidden"));
}

// ---------------------------------------------------------------------------------------------
// Whole studies over a sparse table
// ---------------------------------------------------------------------------------------------

namespace core = cotune::core;

const json kSmallSpace = json::parse(R"({"tp": [1, 2, 4, 8], "pp": [1], "cp": [1], "vpp": [1], "zero": [1],
                                          "micro_batch": [1, 2], "sp": [false]})");

class ReplayStudy : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cotune-replay-study-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // Every valid configuration of the small space, from many seeded draws.
    core::StudySpec s = spec(study("probe", {{"trials", 1}}));
    Registry registry;
    core::load_study_plugins(registry, s);
    auto space = core::make_study_space(registry, s);
    const size_t p = space->num_params();
    std::vector<double> draws(5000 * p);
    const size_t n = space->sample(7, 5000, draws.data());
    std::map<std::string, std::string> by_key;  // key -> rendered JSON, in key order
    for (size_t i = 0; i < n; ++i)
      by_key.emplace(space->key(draws.data() + i * p), space->render(draws.data() + i * p, COTUNE_RENDER_JSON));
    for (const auto& kv : by_key) valid_.push_back(json::parse(kv.second));
    ASSERT_GE(valid_.size(), 12u) << "the small space should hold a dozen valid configurations or more";

    // Four measured configurations (one twice), one oom, and three measured only for another workload.
    std::string csv = "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,status,tokens_per_s\n";
    auto row = [&](const json& c, int global_batch, const std::string& status, double tokens) {
      for (const char* k : {"tp", "pp", "dp", "cp", "ep", "micro_batch", "vpp", "zero", "recompute", "sp", "gpus", "gpu"}) {
        const json& v = c.at(k);
        csv += (v.is_string() ? v.get<std::string>() : v.dump()) + ",";
      }
      csv += std::to_string(global_batch) + "," + status + "," + (tokens > 0 ? std::to_string(tokens) : "") + "\n";
    };
    for (size_t i = 0; i < 4; ++i) {
      const double tokens = 1000.0 * double(i + 1);
      row(valid_[i * 3], 256, "ok", tokens);
      measured_[valid_[i * 3].dump()] = tokens;
    }
    row(valid_[0], 256, "ok", 3000);  // a repeat: the mean of 1000 and 3000
    measured_[valid_[0].dump()] = 2000;
    row(valid_[1], 256, "oom", 0);
    for (size_t i : {2, 4, 5}) {
      row(valid_[i], 512, "ok", 1e9);
      other_workload_.insert(valid_[i].dump());
    }
    table_ = dir_ + "/runs.csv";
    std::ofstream(table_) << csv;
  }
  void TearDown() override { fs::remove_all(dir_); }

  json study(const std::string& name, const json& budget) const {
    return {{"name", name},
            {"workload", {{"model", {{"preset", "llama3-8b"}}},
                          {"training", {{"global_batch", 256}}},
                          {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 4}, {"gpus_per_node", 8}}}}},
            {"space", {{"name", "llm"}, {"options", kSmallSpace}}},
            {"predictor", {{"name", "krr"}}},
            {"searcher", "random"},
            {"executor", {{"name", "replay"}, {"options", {{"file", table_}}}}},
            {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
            {"budget", budget},
            {"parallel", 2},
            {"seed", 3}};
  }
  core::StudySpec spec(const json& doc) const {
    return core::parse_study_file(doc.dump(2), dir_ + "/study.json", dir_);
  }
  core::RunResult run(const json& doc) const {
    core::RunOptions o;
    o.store_path = dir_ + "/cotune.db";
    o.display = core::RunOptions::Display::kQuiet;
    return core::run_study(spec(doc), o);
  }
  std::vector<core::TrialRecord> trials(const std::string& name) const {
    core::Store store(dir_ + "/cotune.db");
    auto s = store.find_study(name);
    EXPECT_TRUE(s.has_value());
    return s ? store.trials(s->id) : std::vector<core::TrialRecord>{};
  }

  // Checks what every stored trial says against the table; returns {counted, unavailable}.
  std::pair<int, int> check_trials(const std::vector<core::TrialRecord>& ts) const {
    std::set<std::string> keys;
    int counted = 0, unavailable = 0;
    for (const core::TrialRecord& t : ts) {
      EXPECT_TRUE(keys.insert(t.config_key).second) << "trial " << t.seq << " repeats a configuration";
      const json c = json::parse(t.config_json);
      auto m = measured_.find(c.dump());
      if (m != measured_.end()) {
        EXPECT_EQ(t.status, core::TrialStatus::kOk) << t.config_json;
        EXPECT_DOUBLE_EQ(t.objective.value_or(-1), m->second);
      } else if (c == valid_[1]) {
        EXPECT_EQ(t.status, core::TrialStatus::kOom);
      } else {
        EXPECT_EQ(t.status, core::TrialStatus::kUnavailable) << t.config_json;
        EXPECT_FALSE(t.objective.has_value());
        EXPECT_THAT(t.error.value_or(""), HasSubstr("no row of"));
      }
      counted += t.status != core::TrialStatus::kUnavailable;
      unavailable += t.status == core::TrialStatus::kUnavailable;
    }
    return {counted, unavailable};
  }

  std::string dir_, table_;
  std::vector<json> valid_;
  std::map<std::string, double> measured_;  // configuration JSON -> replayed tokens/s
  std::set<std::string> other_workload_;
};

TEST_F(ReplayStudy, OnlyAvailableTrialsCountAgainstTheBudget) {
  json doc = study("budget", {{"trials", 3}});
  doc["executor"]["options"]["restrict_search"] = false;  // search the whole space
  core::RunResult r = run(doc);
  EXPECT_EQ(r.status, core::StudyStatus::kFinished);
  EXPECT_EQ(r.counted_trials, 3);
  EXPECT_THAT(r.reason, HasSubstr("trial budget"));
  auto [counted, unavailable] = check_trials(trials("budget"));
  EXPECT_EQ(counted, 3);
  EXPECT_GT(unavailable, 0) << "the searcher met configurations the table does not have";
}

TEST_F(ReplayStudy, ASparseTableEndsTheStudyWhenTheSpaceRunsOut) {
  json doc = study("sparse", {{"trials", 50}});
  doc["executor"]["options"]["restrict_search"] = false;
  core::RunResult r = run(doc);
  EXPECT_EQ(r.status, core::StudyStatus::kFinished);
  EXPECT_THAT(r.reason, HasSubstr("no unmeasured configuration"));
  EXPECT_EQ(r.counted_trials, 5) << "four measured configurations and one oom";
  std::vector<core::TrialRecord> ts = trials("sparse");
  auto [counted, unavailable] = check_trials(ts);
  EXPECT_EQ(counted, 5);
  EXPECT_EQ(ts.size(), valid_.size()) << "every valid configuration was tried once, unavailable ones included";
  size_t seen_other = 0;
  for (const core::TrialRecord& t : ts) seen_other += other_workload_.count(json::parse(t.config_json).dump());
  EXPECT_EQ(seen_other, other_workload_.size());
  EXPECT_EQ(unavailable, static_cast<int>(valid_.size()) - 5);
}

TEST_F(ReplayStudy, MaxUnavailableStopsAStudyTheTableCannotAnswer) {
  json doc = study("streak", {{"trials", 50}, {"max_unavailable", 3}});
  doc["parallel"] = 1;
  doc["executor"]["options"]["where"] = {{"status", "oom"}};  // only the oom row is left
  doc["executor"]["options"]["restrict_search"] = false;
  core::RunResult r = run(doc);
  EXPECT_EQ(r.status, core::StudyStatus::kFinished);
  EXPECT_THAT(r.reason, AllOf(HasSubstr("3 trials in a row were unavailable"), HasSubstr("max_unavailable")));
  std::vector<core::TrialRecord> ts = trials("streak");
  ASSERT_GE(ts.size(), 3u);
  EXPECT_LT(ts.size(), valid_.size());
  for (size_t i = ts.size() - 3; i < ts.size(); ++i) EXPECT_EQ(ts[i].status, core::TrialStatus::kUnavailable);
}

TEST_F(ReplayStudy, ATableWhoseRowsAnswerNothingSaysSoNotThatTheSpaceRefusesThem) {
  // Every row of the workload leaves vpp empty: the executor lists no configuration, and the study
  // says that (its warning names the column), not that the space refused what it listed.
  const std::string file = dir_ + "/empty.csv";
  std::ofstream(file) << "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,tokens_per_s\n"
                         "2,1,16,1,1,1,,1,selective,false,32,h100-sxm,256,1000\n";
  json doc = study("empty", {{"trials", 3}});
  doc["executor"]["options"]["file"] = file;
  try {
    run(doc);
    ADD_FAILURE() << "a table that answers nothing ran";
  } catch (const core::UserError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("answers no configuration of this workload"), Not(HasSubstr("none of them valid"))));
  }
}

TEST_F(ReplayStudy, AMeasuredConfigurationTheMemoryEstimateRefusesIsStillSearched) {
  // The estimate says tp 1, micro-batch 8 without recomputation needs 368 GiB of the H100's 80; the
  // table says it ran. A measurement outranks the estimate: the study measures it (and finds it
  // best), where before the space left it out of the search.
  const std::string file = dir_ + "/ran.csv";
  std::ofstream(file) << "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,tokens_per_s\n"
                         "1,1,32,1,1,8,1,1,none,false,32,h100-sxm,256,5000\n"
                         "2,1,16,1,1,1,1,1,selective,false,32,h100-sxm,256,1000\n"
                         "3,1,8,1,1,1,1,1,selective,false,24,h100-sxm,256,9999\n";  // tp 3: not a layout
  json doc = study("ran", {{"trials", 10}});
  doc["space"]["options"] = json::object();
  doc["executor"]["options"]["file"] = file;
  core::RunResult r = run(doc);
  EXPECT_EQ(r.status, core::StudyStatus::kFinished);
  EXPECT_EQ(r.counted_trials, 2) << "the over-memory run and the other; never the tp 3 row";
  std::vector<core::TrialRecord> ts = trials("ran");
  ASSERT_EQ(ts.size(), 2u);
  bool over_memory_measured = false;
  for (const core::TrialRecord& t : ts) {
    EXPECT_EQ(t.status, core::TrialStatus::kOk) << t.config_json;
    if (json::parse(t.config_json)["micro_batch"] == 8) over_memory_measured = t.objective == 5000;
  }
  EXPECT_TRUE(over_memory_measured);
  ASSERT_TRUE(r.recommended_config.has_value());
  EXPECT_EQ(json::parse(r.recommended_config->config_json)["micro_batch"], 8);
}

TEST_F(ReplayStudy, TheSearchProposesOnlyWhatTheTableMeasured) {
  // By default the executor lists the table's configurations of this workload and the study
  // searches among them: nothing comes back unavailable, and the study ends when they are all run.
  for (const char* searcher : {"random", "reinforce", "evolution"}) {
    // A store of its own: a later study of the workload would count the earlier one's trials as
    // measured, and find nothing left.
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(dir_ + "/cotune.db" + suffix);
    json doc = study(std::string("restricted-") + searcher, {{"trials", 50}});
    doc["searcher"] = searcher;
    core::RunResult r = run(doc);
    EXPECT_EQ(r.status, core::StudyStatus::kFinished) << searcher;
    EXPECT_THAT(r.reason, HasSubstr("no unmeasured configuration")) << searcher;
    auto [counted, unavailable] = check_trials(trials(std::string("restricted-") + searcher));
    EXPECT_EQ(counted, 5) << searcher << ": four measured configurations and one oom";
    EXPECT_EQ(unavailable, 0) << searcher;
  }
}

TEST_F(ReplayStudy, TheSpaceCompletesWhatTheTableDoesNotState) {
  // The same table without its dp column: the host completes each listed configuration's dp as the
  // space does (the GPUs left after tp, pp and cp), so the study measures the same configurations.
  std::ifstream in(table_);
  std::string line, csv;
  while (std::getline(in, line)) {
    const size_t a = line.find(','), b = line.find(',', a + 1), c = line.find(',', b + 1);
    csv += line.substr(0, b) + line.substr(c) + "\n";  // drops the third column, dp
  }
  ASSERT_EQ(csv.substr(0, csv.find('\n')), "tp,pp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,status,"
                                           "tokens_per_s");
  std::ofstream(table_) << csv;
  json doc = study("unstated-dp", {{"trials", 50}});
  doc["executor"]["options"]["unstated"] = {"dp"};
  core::RunResult r = run(doc);
  EXPECT_EQ(r.status, core::StudyStatus::kFinished);
  EXPECT_THAT(r.reason, HasSubstr("no unmeasured configuration"));
  auto [counted, unavailable] = check_trials(trials("unstated-dp"));
  EXPECT_EQ(counted, 5) << "four measured configurations and one oom";
  EXPECT_EQ(unavailable, 0);
}

TEST_F(ReplayExecutorTest, ListsTheConfigurationsItMeasuredForTheWorkload) {
  auto ex = executor();
  ASSERT_TRUE(ex->has_candidates());
  const std::string workload_json = workload(256).dump();
  auto space = registry_.make_space("llm", workload_json);
  const cotune_trial study = study_of(workload_json, *space);
  const std::vector<double> rows = ex->candidates(study);
  const size_t p = space->num_params();
  ASSERT_EQ(rows.size() % p, 0u);
  // Every listed configuration is answered from the table (never unavailable), and each once.
  std::set<std::string> keys;
  for (size_t i = 0; i < rows.size() / p; ++i) {
    const std::string key = space->key(rows.data() + i * p);
    EXPECT_TRUE(keys.insert(key).second) << key;
    const json config = json::parse(space->render(rows.data() + i * p, COTUNE_RENDER_JSON));
    EXPECT_NE(run(*ex, config).status, COTUNE_STATUS_UNAVAILABLE) << config.dump();
  }
  EXPECT_GE(keys.size(), 2u);
  // With restrict_search off it lists none: the host then searches the whole space.
  auto off = executor({{"restrict_search", false}});
  EXPECT_THROW(off->candidates(study), cotune::core::PluginError);
  EXPECT_THAT(create_error({{"restrict_search", "yes"}}), HasSubstr("restrict_search"));
}

TEST_F(ReplayExecutorTest, EmptyCellsStateNothingAndAForeignTableSaysWhy) {
  // export-history's output leaves a workload default (nodes) and an optional parameter (etp) empty:
  // the rows still answer the study that states them.
  table_ = write("exported.csv",
                 "tp,pp,dp,cp,ep,etp,micro_batch,vpp,zero,recompute,sp,gpus,gpu,nodes,global_batch,step_time_s\n"
                 "2,1,8,1,1,,1,1,1,selective,true,16,h100-sxm,,256,1.5\n");
  auto ex = executor();
  TrialResult r = run(*ex, cfg(2, 8, 1, "selective", true));
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["step_time_s"].get<double>(), 1.5);
  // Rows of another global batch only: the listing names the cell that differs.
  const std::string workload_json = workload(512).dump();
  auto space = registry_.make_space("llm", workload_json);
  const cotune_trial study = study_of(workload_json, *space);
  try {
    ex->candidates(study);
    ADD_FAILURE() << "a table with no row of the workload listed configurations";
  } catch (const cotune::core::PluginError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("none of the 1 rows"), HasSubstr("line 2, column global_batch: '256'"),
                                HasSubstr("the workload says 512")));
  }
}

}  // namespace
