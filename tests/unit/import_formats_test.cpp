// `cotune import` of the logs people have, through the real CLI and store: the Megatron-LM log, W&B
// export and sacct output under examples/import/, each detected from its content, with the runs it
// took, those it skipped and why; and the Megatron-LM argument names each becomes.
#include <cotune/core/history/history_io.hpp>
#include <cotune/core/history/run_logs.hpp>
#include <cotune/core/store/store.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_process.hpp"

namespace {

namespace fs = std::filesystem;
using cotune::core::HistoryRow;
using cotune::core::RunsFormat;
using cotune::core::Store;
using cotune::core::TrialStatus;
using cotune::testing::read_file;
using nlohmann::json;
using ::testing::HasSubstr;

const std::string kExamples = COTUNE_SOURCE_DIR "/examples/import/";

class ImportFormats : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cotune-import-formats-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_ = dir_ + "/s.db";
    setenv("COTUNE_PLUGIN_PATH", COTUNE_PLUGIN_DIR, 1);
  }
  void TearDown() override { fs::remove_all(dir_); }

  int import(std::vector<std::string> args) {
    args.insert(args.begin(), "import");
    for (const char* a : {"--space", "llm", "--store"}) args.emplace_back(a);
    args.push_back(store_);
    const pid_t pid = cotune::testing::spawn_cotune(dir_, args, dir_ + "/out", dir_ + "/err");
    return cotune::testing::wait_exit_within(pid, std::chrono::minutes(2));
  }
  std::string out() const { return read_file(dir_ + "/out"); }
  std::string err() const { return read_file(dir_ + "/err"); }

  // Every history row of the store, oldest first.
  std::vector<HistoryRow> history() const {
    Store store(store_);
    std::vector<HistoryRow> rows;
    for (const std::string& key : keys()) {
      auto part = store.history_for(key, "llm");
      rows.insert(rows.end(), part.begin(), part.end());
    }
    std::sort(rows.begin(), rows.end(), [](const HistoryRow& a, const HistoryRow& b) { return a.row_number < b.row_number; });
    return rows;
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    for (const auto& [key, space] : cotune::core::stored_workloads(store_)) k.push_back(key);
    return k;
  }
  std::string dir_, store_;
};

TEST_F(ImportFormats, EachExampleIsDetectedFromItsContent) {
  EXPECT_EQ(cotune::core::detect_runs_format(kExamples + "megatron-llama3-8b.log"), RunsFormat::kMegatronLog);
  EXPECT_EQ(cotune::core::detect_runs_format(kExamples + "wandb-gpt-2.7b.csv"), RunsFormat::kWandb);
  EXPECT_EQ(cotune::core::detect_runs_format(kExamples + "sacct-gpt-1.3b.txt"), RunsFormat::kSacct);
  EXPECT_EQ(cotune::core::detect_runs_format(COTUNE_SOURCE_DIR "/examples/replay/runs.csv"), RunsFormat::kCsv);
}

// One argument dump per start of the job: a measured run (the median step time after the first
// logged interval), an out-of-memory start, and a start cut short (skipped, with why).
TEST_F(ImportFormats, MegatronLogGivesARunPerStartOfTheJob) {
  ASSERT_EQ(import({kExamples + "megatron-llama3-8b.log", "--set", "gpu=h100-sxm"}), 0) << err();
  EXPECT_THAT(out(), HasSubstr("(megatron-log): 3 runs: 2 imported, 0 already in the store, 0 rejected, 1 skipped"));
  EXPECT_THAT(err(), HasSubstr("skipped: no iteration was logged"));
  const std::vector<HistoryRow> rows = history();
  ASSERT_EQ(rows.size(), 2u);
  const json first = json::parse(rows[0].config_json), metrics = json::parse(rows[0].metrics_json);
  EXPECT_EQ(first["tp"], 2);
  EXPECT_EQ(first["dp"], 8);
  EXPECT_EQ(first["zero"], 1) << "use_distributed_optimizer";
  EXPECT_EQ(first["sp"], true);
  EXPECT_EQ(first["gpu"], "h100-sxm") << "--set";
  EXPECT_DOUBLE_EQ(metrics["step_time_s"].get<double>(), 4.3802) << "median of 4380.2, 4391.7, 4376.9 ms";
  EXPECT_DOUBLE_EQ(metrics["tflops_per_gpu"].get<double>(), 352.1);
  EXPECT_EQ(rows[1].status, TrialStatus::kOom);
  EXPECT_EQ(json::parse(rows[1].config_json)["micro_batch"], 2);
  // cotune show tells of the history, which no study lists.
  const pid_t show = cotune::testing::spawn_cotune(dir_, {"show", "--store", store_}, dir_ + "/out", dir_ + "/err");
  ASSERT_EQ(cotune::testing::wait_exit_within(show, std::chrono::minutes(1)), 0) << err();
  EXPECT_THAT(out(), HasSubstr("history: 2 imported run(s) of 1 workload(s)"));
  // Importing it again adds nothing.
  ASSERT_EQ(import({kExamples + "megatron-llama3-8b.log", "--set", "gpu=h100-sxm"}), 0) << err();
  EXPECT_THAT(out(), HasSubstr("0 imported, 2 already in the store"));
}

TEST_F(ImportFormats, JsonSaysWhatEachFileGave) {
  ASSERT_EQ(import({kExamples + "sacct-gpt-1.3b.txt", kExamples + "wandb-gpt-2.7b.csv", "--set", "gpu=a100-80gb",
                    "--json"}),
            0)
      << err();
  const json doc = json::parse(out());
  EXPECT_EQ(doc["schema_version"], 1);
  ASSERT_EQ(doc["files"].size(), 2u);
  const json& sacct = doc["files"][0];
  EXPECT_EQ(sacct["format"], "sacct");
  EXPECT_EQ(sacct["runs"], 5);
  EXPECT_EQ(sacct["imported"], 3);
  EXPECT_EQ(sacct["skipped"].size(), 2u);
  EXPECT_EQ(sacct["skipped"][0]["line"], 7);
  EXPECT_EQ(sacct["workload_keys"].size(), 1u);
  EXPECT_EQ(doc["files"][1]["format"], "wandb");
  EXPECT_EQ(doc["files"][1]["imported"], 3);
  // Every note the text prints, the columns kept as metrics among them.
  bool kept = false;
  for (const json& n : doc["files"][1]["notes"])
    kept = kept || n.get<std::string>().find("kept as metrics under their own names") != std::string::npos;
  EXPECT_TRUE(kept) << doc["files"][1]["notes"].dump();
}

TEST_F(ImportFormats, WandbExportTakesFinishedAndCrashedRunsAndSaysWhatItLeftOut) {
  ASSERT_EQ(import({kExamples + "wandb-gpt-2.7b.csv", "--set", "gpu=a100-80gb"}), 0) << err();
  EXPECT_THAT(out(), HasSubstr("(wandb): 5 runs: 3 imported, 0 already in the store, 0 rejected, 2 skipped"));
  EXPECT_THAT(err(), HasSubstr("line 5: skipped: State killed"));
  EXPECT_THAT(err(), HasSubstr("line 6: skipped: State running"));
  EXPECT_THAT(err(), HasSubstr("no setting of the space's table schema or Megatron-LM and no metric: Created, Name, Notes, User, lr"));
  const std::vector<HistoryRow> rows = history();
  ASSERT_EQ(rows.size(), 3u);
  const json m = json::parse(rows[0].metrics_json);
  EXPECT_DOUBLE_EQ(m["step_time_s"].get<double>(), 1.512) << "Megatron-LM's iteration-time, in seconds";
  EXPECT_DOUBLE_EQ(m["tflops_per_gpu"].get<double>(), 121.4) << "its throughput";
  EXPECT_DOUBLE_EQ(m["wall_time_s"].get<double>(), 1840);
  EXPECT_EQ(json::parse(rows[1].config_json)["pp"], 2);
  EXPECT_EQ(rows[2].status, TrialStatus::kFailed) << "crashed";
}

TEST_F(ImportFormats, SacctTakesJobsWithTheirConfigurationAndSkipsStepsAndOthers) {
  ASSERT_EQ(import({kExamples + "sacct-gpt-1.3b.txt"}), 0) << err();
  EXPECT_THAT(out(), HasSubstr("(sacct): 5 runs: 3 imported, 0 already in the store, 0 rejected, 2 skipped"));
  EXPECT_THAT(err(), HasSubstr("job 4104: State CANCELLED"));
  EXPECT_THAT(err(), HasSubstr("job 4105: no configuration"));
  const std::vector<HistoryRow> rows = history();
  ASSERT_EQ(rows.size(), 3u);
  const json c = json::parse(rows[0].config_json);
  EXPECT_EQ(c["gpus"], 8) << "AllocTRES gres/gpu:a100=8";
  EXPECT_EQ(c["gpu"], "a100-80gb") << "its type";
  EXPECT_EQ(c["tp"], 2);
  const json m = json::parse(rows[0].metrics_json);
  EXPECT_DOUBLE_EQ(m["step_time_s"].get<double>(), 0.412);
  EXPECT_DOUBLE_EQ(m["wall_time_s"].get<double>(), 12 * 60 + 31);
  EXPECT_EQ(rows[1].status, TrialStatus::kOom);
}

// What real files look like beyond the examples: srun --label prefixes, sacct jobs naming one
// metric in different units, sacct without -P, and runs that do not say their GPU.
TEST_F(ImportFormats, LabelsUnitsColumnsAndAMissingGpuAreHandled) {
  std::string log = read_file(kExamples + "megatron-llama3-8b.log");
  std::string labelled;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) labelled += "3: " + line + "\n";
  std::ofstream(dir_ + "/labelled.log") << labelled;
  ASSERT_EQ(import({dir_ + "/labelled.log"}), 0) << err();
  EXPECT_THAT(out(), HasSubstr("(megatron-log): 3 runs: 2 imported"));
  EXPECT_THAT(err(), HasSubstr("2 run(s) do not say which GPU ran them: filed under h100-sxm"));

  std::ofstream(dir_ + "/units.txt")
      << "JobID|State|AllocTRES|Comment\n"
         "1|COMPLETED|gres/gpu:a100=8|tp=2 layers=24 hidden=2048 heads=16 global_batch=64 step_time_s=0.5\n"
         "2|COMPLETED|gres/gpu:a100=8|tp=1 layers=24 hidden=2048 heads=16 global_batch=64 iteration_time_ms=300\n";
  ASSERT_EQ(import({dir_ + "/units.txt"}), 0) << err();
  double step = 0;
  for (const HistoryRow& r : history())
    if (json::parse(r.config_json)["tp"] == 1 && json::parse(r.config_json)["gpu"] == "a100-80gb")
      step = json::parse(r.metrics_json)["step_time_s"].get<double>();
  EXPECT_DOUBLE_EQ(step, 0.3);

  std::ofstream(dir_ + "/columns.txt") << "JobID        State\n------------ ----------\n1            COMPLETED\n";
  EXPECT_EQ(import({dir_ + "/columns.txt"}), 2);
  EXPECT_THAT(err(), HasSubstr("import reads its -P form"));
}

// A study of the imported runs' workload, written the way study files are (defaults left out, a
// vocabulary spelled out), is seeded by them.
TEST_F(ImportFormats, ImportedRunsSeedAStudyOfTheirWorkload) {
  ASSERT_EQ(import({kExamples + "sacct-gpt-1.3b.txt"}), 0) << err();
  const json study = {
      {"name", "seeded"},
      {"workload", {{"model", {{"layers", 24}, {"hidden", 2048}, {"heads", 16}, {"vocab", 51200}, {"seq_len", 2048}}},
                    {"training", {{"global_batch", 64}, {"dtype", "bf16"}}},
                    {"cluster", {{"gpu", "a100-80gb"}, {"nodes", 1}}}}},
      {"searcher", "random"},
      {"executor", "sim"},
      {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
      {"budget", {{"trials", 2}}}};
  std::ofstream(dir_ + "/study.json") << study.dump(2);
  const pid_t pid = cotune::testing::spawn_cotune(dir_, {"run", "study.json", "--store", store_}, dir_ + "/out", dir_ + "/err");
  ASSERT_EQ(cotune::testing::wait_exit_within(pid, std::chrono::minutes(2)), 0) << err();
  EXPECT_THAT(err(), HasSubstr("history: 3 earlier runs of this workload seed the predictor"));
  // A study file that spells out the GPU's own gpus_per_node (a table's gpus column leaves it
  // unstated) is the same workload; another per-node count is another cluster.
  json spelled = study;
  spelled["name"] = "seeded-per-node";
  spelled["workload"]["cluster"]["gpus_per_node"] = 8;
  std::ofstream(dir_ + "/study.json") << spelled.dump(2);
  pid_t again = cotune::testing::spawn_cotune(dir_, {"run", "study.json", "--store", store_}, dir_ + "/out", dir_ + "/err");
  ASSERT_EQ(cotune::testing::wait_exit_within(again, std::chrono::minutes(2)), 0) << err();
  EXPECT_THAT(err(), HasSubstr("history: 3 earlier runs of this workload seed the predictor"));
  // The other way round: a table that states the GPU's own gpus_per_node seeds a study that does not.
  std::ofstream(dir_ + "/per_node.csv") << "hidden,layers,heads,vocab,seq_len,global_batch,dtype,gpu,gpus,gpus_per_node,tp,"
                                           "step_time_s\n"
                                           "2048,24,16,51200,2048,64,bf16,a100-80gb,8,8,2,1.5\n";
  ASSERT_EQ(import({dir_ + "/per_node.csv"}), 0) << err();
  json plain = study;
  plain["name"] = "seeded-plain";
  std::ofstream(dir_ + "/study.json") << plain.dump(2);
  again = cotune::testing::spawn_cotune(dir_, {"run", "study.json", "--store", store_}, dir_ + "/out", dir_ + "/err");
  ASSERT_EQ(cotune::testing::wait_exit_within(again, std::chrono::minutes(2)), 0) << err();
  // The 3 sacct runs, the first study's 2 trials (the same workload) and this table's run.
  EXPECT_THAT(err(), HasSubstr("history: 6 earlier runs of this workload seed the predictor"));
  json other = study;
  other["name"] = "four-per-node";
  other["workload"]["cluster"]["gpus_per_node"] = 4;
  other["workload"]["cluster"]["nodes"] = 2;
  std::ofstream(dir_ + "/study.json") << other.dump(2);
  again = cotune::testing::spawn_cotune(dir_, {"run", "study.json", "--store", store_}, dir_ + "/out", dir_ + "/err");
  ASSERT_EQ(cotune::testing::wait_exit_within(again, std::chrono::minutes(2)), 0) << err();
  EXPECT_THAT(err(), Not(HasSubstr("history: 3 earlier runs")));
}

// A misspelt parameter column would store every run at that parameter's default, and runs that
// differ in it as one configuration: the import refuses, stores nothing, and says how to keep it.
TEST_F(ImportFormats, AMisspeltParameterColumnStoresNothing) {
  std::ofstream(dir_ + "/runs.csv") << "hidden,layers,heads,vocab,seq_len,global_batch,gpu,gpus,tp,micro_bach,step_time_s\n"
                                       "2048,16,16,32000,2048,256,h100-sxm,8,2,1,1.5\n"
                                       "2048,16,16,32000,2048,256,h100-sxm,8,2,4,1.2\n";
  EXPECT_EQ(import({dir_ + "/runs.csv"}), 2);
  EXPECT_THAT(err(), HasSubstr("runs.csv: column 'micro_bach' (did you mean \"micro_batch\"?) is not read"));
  EXPECT_THAT(err(), HasSubstr("nothing of this file was imported"));
  EXPECT_EQ(import({dir_ + "/runs.csv", "--map", "micro_bach=mb_note"}), 0) << err();
  EXPECT_THAT(out(), HasSubstr("2 imported"));
  // A short column of the team's own (a run id, one edit from dp, tp, pp...), or the first word of
  // a schema column (nodes, of nodes_per_island), is kept as a metric.
  std::ofstream(dir_ + "/ids.csv") << "id,nodes,hidden,layers,heads,vocab,seq_len,global_batch,gpu,gpus,tp,step_time_s\n"
                                      "7,1,2048,16,16,32000,2048,256,h100-sxm,8,2,1.5\n";
  EXPECT_EQ(import({dir_ + "/ids.csv"}), 0) << err();
  // A row whose only measurement is a metric of the team's own is a measured run.
  std::ofstream(dir_ + "/loss.csv") << "hidden,layers,heads,vocab,seq_len,global_batch,gpu,gpus,tp,loss\n"
                                       "2048,16,16,32000,2048,256,h100-sxm,8,4,2.5\n";
  EXPECT_EQ(import({dir_ + "/loss.csv"}), 0) << err();
  EXPECT_THAT(out(), HasSubstr("1 imported"));
}

TEST_F(ImportFormats, MegatronArgumentNamesBecomeTheSchemasColumns) {
  const auto c = cotune::core::cells_from_settings({{"tensor_model_parallel_size", "4"},
                                                    {"num_layers", "80"},
                                                    {"hidden_size", "8192"},
                                                    {"num_attention_heads", "64"},
                                                    {"group_query_attention", "True"},
                                                    {"num_query_groups", "8"},
                                                    {"kv_channels", "128"},
                                                    {"swiglu", "True"},
                                                    {"untie_embeddings_and_output_weights", "False"},
                                                    {"use_distributed_optimizer", "False"},
                                                    {"recompute_granularity", "None"},
                                                    {"num_layers_per_virtual_pipeline_stage", "5"},
                                                    {"pipeline_model_parallel_size", "8"},
                                                    {"fp8", "hybrid"},
                                                    {"bf16", "True"},
                                                    {"hidden_dropout", "0.1"},
                                                    {"lr", "3e-4"}});
  const std::map<std::string, std::string> expected = {
      {"tp", "4"},         {"layers", "80"},      {"hidden", "8192"},         {"heads", "64"},
      {"kv_heads", "8"},   {"gated_mlp", "true"}, {"tie_embeddings", "true"}, {"zero", "0"},
      {"recompute", "none"}, {"vpp", "2"},        {"pp", "8"},                {"dtype", "fp8"},
      {"dropout", "true"}};
  EXPECT_EQ(c, expected) << "kv_channels = hidden / heads says nothing; lr is no setting of the space";

  // The dispatchers the model tells apart; the deprecated DeepEP switch means flex.
  using cotune::core::cells_from_settings;
  EXPECT_EQ(cells_from_settings({{"moe_token_dispatcher_type", "flex"}}).at("moe_dispatcher"), "flex");
  EXPECT_EQ(cells_from_settings({{"moe_token_dispatcher_type", "alltoall"}}).at("moe_dispatcher"), "alltoall");
  EXPECT_EQ(cells_from_settings({{"moe_token_dispatcher_type", "allgather"}}).count("moe_dispatcher"), 0u);
  EXPECT_EQ(cells_from_settings({{"moe_token_dispatcher_type", "alltoall"}, {"moe_enable_deepep", "True"}})
                .at("moe_dispatcher"),
            "flex");
  // The gradient buffer's dtype: Megatron-LM's switch, and Megatron-Core's / Bridge's field.
  EXPECT_EQ(cells_from_settings({{"grad_reduce_in_bf16", "True"}}).at("grad_reduce"), "bf16");
  EXPECT_EQ(cells_from_settings({{"grad_reduce_in_bf16", "False"}}).count("grad_reduce"), 0u);
  EXPECT_EQ(cells_from_settings({{"grad_reduce_in_fp32", "False"}}).at("grad_reduce"), "bf16");
  EXPECT_EQ(cells_from_settings({{"grad_reduce_in_fp32", "True"}}).at("grad_reduce"), "fp32");
  // Transformer Engine's tensor-parallel overlap, Megatron-LM's --tp-comm-overlap.
  EXPECT_EQ(cells_from_settings({{"tp_comm_overlap", "True"}}).at("tp_comm_overlap"), "true");
  EXPECT_EQ(cells_from_settings({{"tp_comm_overlap", "False"}}).at("tp_comm_overlap"), "false");
  EXPECT_EQ(cells_from_settings({{"cross_entropy_loss_fusion", "True"}}).at("cross_entropy_fusion"), "true");
  // FP8 scaling, --fp8-recipe: delayed scaling is per tensor too; a custom recipe says nothing.
  EXPECT_EQ(cells_from_settings({{"fp8_recipe", "delayed"}}).at("fp8_recipe"), "tensorwise");
  EXPECT_EQ(cells_from_settings({{"fp8_recipe", "mxfp8"}}).at("fp8_recipe"), "mxfp8");
  EXPECT_EQ(cells_from_settings({{"fp8_recipe", "blockwise"}}).at("fp8_recipe"), "blockwise");
  EXPECT_EQ(cells_from_settings({{"fp8_recipe", "custom"}}).count("fp8_recipe"), 0u);
  // Rotary embeddings: the base counts only with a rotary position embedding; Megatron-LM prints
  // rotary_base for a GPT model with learned positions too.
  EXPECT_EQ(cells_from_settings({{"position_embedding_type", "rope"}, {"rotary_base", "500000"}}).at("rope_base"),
            "500000");
  EXPECT_EQ(cells_from_settings({{"position_embedding_type", "rope"}}).at("rope_base"), "10000");
  EXPECT_EQ(cells_from_settings({{"use_rotary_position_embeddings", "True"}}).at("rope_base"), "10000");
  EXPECT_EQ(cells_from_settings({{"position_embedding_type", "learned_absolute"}, {"rotary_base", "10000"}})
                .count("rope_base"),
            0u);
}

TEST_F(ImportFormats, AnUnknownFormatOrABadSettingIsABadUsage) {
  EXPECT_EQ(import({kExamples + "sacct-gpt-1.3b.txt", "--format", "slurm"}), 2);
  EXPECT_THAT(err(), HasSubstr("--format 'slurm': expected auto, csv, megatron-log, wandb or sacct"));
  EXPECT_EQ(import({kExamples + "sacct-gpt-1.3b.txt", "--set", "gpu"}), 2);
  EXPECT_THAT(err(), HasSubstr("expected COLUMN=VALUE"));
  EXPECT_EQ(import({kExamples + "wandb-gpt-2.7b.csv", "--format", "megatron-log"}), 2);
  EXPECT_THAT(err(), HasSubstr("not a Megatron-LM log"));
}

}  // namespace
