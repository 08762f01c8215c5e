// History import and export through the real parts: the llm space plugin, a real store file in a
// temporary directory, and the cotune binary for the commands end to end.
#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/history/csv.hpp>
#include <cotune/core/history/history_io.hpp>
#include <cotune/core/abi/table_schema.hpp>
#include <cotune/core/history/table_runs.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/store/store.hpp>

#include "support/cli_process.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

using namespace cotune::core;
using nlohmann::json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

struct CliRun {
  int status;
  std::string out;
};

CliRun cli(const std::string& args) {
  const std::string cmd = std::string(COTUNE_CLI) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  CliRun r{-1, ""};
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const Registry& registry() {
  static Registry r = [] {
    Registry reg;
    reg.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-llm.so");
    return reg;
  }();
  return r;
}

// The llm space's table schema, through the ABI as the commands use it.
const TableSchema& schema() {
  static const TableSchema s = TableSchema::of(registry(), "llm");
  return s;
}

CsvTable table_of(const std::string& text, const std::string& source = "runs.csv") {
  std::istringstream in(text);
  return read_csv_table(in, source);
}

// A small model on 8 GPUs; columns in an order of their own, two mapped, metrics in other units.
const char* kMapped =
    "hidden,layers,heads,global_batch,gpus,tensor parallelism,pp,iteration time (ms),tokens_per_s_per_gpu,"
    "mfu_percent,loss,cluster_name\n"
    "1024,8,16,64,8,2,1,250,1000,40,2.5,alpha\n"
    "1024,8,16,64,8,4,2,500,500,20,2.6,beta\n";

class HistoryImport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(COTUNE_BINARY_DIR) / "test-tmp" / ("history_import_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(path(name)) << text;
    return path(name);
  }
  fs::path dir_;
};

TEST(Csv, QuotedFieldsAndLineNumbers) {
  const CsvTable t = table_of("a,b\n\"x, \"\"y\"\"\",2\n\n\"multi\nline\",3\r\n4,5\n");
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.rows[0].fields[0], "x, \"y\"");
  EXPECT_EQ(t.rows[0].line, 2u);
  EXPECT_EQ(t.rows[1].fields[0], "multi\nline");
  EXPECT_EQ(t.rows[1].line, 4u);
  EXPECT_EQ(t.rows[2].line, 6u);
  EXPECT_EQ(t.rows[2].fields[1], "5");
  std::ostringstream out;
  write_csv_record(out, {"x, \"y\"", "plain"});
  EXPECT_EQ(out.str(), "\"x, \"\"y\"\"\",plain\n");
}

TEST(Csv, ByteOrderMarkAndOldMacLineEnds) {
  // A spreadsheet's UTF-8 BOM before the first column name ("column hidden: missing" before), and
  // records ended by a lone CR (read as one record before: no rows, exit 0).
  const CsvTable t = table_of("\xEF\xBB\xBFhidden,layers\r1024,8\r2048,16\r");
  EXPECT_EQ(t.header[0], "hidden");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[1].fields[1], "16");
  EXPECT_EQ(t.rows[1].line, 3u);
}

TEST(Csv, BadFilesAreUserErrors) {
  EXPECT_THROW(table_of(""), UserError);
  try {
    table_of("a,a\n1,2\n");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'a' appears twice"));
  }
  try {
    table_of("a,b\n1,2\n3\n");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("line 3: has 1 fields, the header 2"));
  }
  try {
    table_of("a,b\n1,\"open\n");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("line 2: a quoted field is not closed"));
  }
}

TEST(LlmTableSchema, DefaultsAndInverse) {
  std::map<std::string, std::string> cells = {{"hidden", "1024"}, {"layers", "8"}, {"heads", "16"},
                                              {"global_batch", "64"}, {"dp", "4"}, {"tp", "2"}};
  const TableRow row = schema().read(cells);
  EXPECT_EQ(row.workload["model"]["vocab"], 51200);
  EXPECT_EQ(row.workload["model"]["seq_len"], 2048);
  EXPECT_EQ(row.workload["cluster"]["gpu"], "h100-sxm");
  EXPECT_EQ(row.workload["cluster"]["nodes"], 1);
  EXPECT_EQ(row.config["gpus"], 8);
  EXPECT_EQ(row.config["recompute"], "none");
  EXPECT_EQ(row.devices, 8);
  EXPECT_EQ(row.options["tp"], json::array({2}));
  const TableCells back = schema().write(row.workload, &row.config);
  EXPECT_EQ(back.inexact, "");
  EXPECT_EQ(back.cells.at("tp"), "2");
  EXPECT_EQ(back.cells.at("gpus"), "8");
  ASSERT_TRUE(back.read_back.has_value());
  EXPECT_EQ(*back.read_back, row.workload);

  // A model preset has its column: the cells say the same workload.
  json preset = row.workload;
  preset["model"] = {{"preset", "llama3-8b"}};
  const TableCells preset_cells = schema().write(preset, &row.config);
  EXPECT_EQ(preset_cells.inexact, "");
  EXPECT_EQ(preset_cells.cells.at("preset"), "llama3-8b");
  // A field without a column is named, and nothing reads back.
  json priced = row.workload;
  priced["cluster"]["price_per_gpu_hour"] = 2.5;
  const TableCells priced_cells = schema().write(priced, &row.config);
  EXPECT_EQ(priced_cells.inexact, "no column for workload/cluster/price_per_gpu_hour");
  EXPECT_FALSE(priced_cells.read_back.has_value());
  // The workload alone: its cells without the configuration's, gpus from the cluster's nodes.
  const TableCells alone = schema().write(row.workload, nullptr);
  EXPECT_EQ(alone.cells.count("tp"), 0u);
  EXPECT_EQ(alone.cells.at("gpus"), "8");

  cells["tp"] = "two";
  try {
    schema().read(cells);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "column tp: expected a number, got 'two'");
  }
  // The schema names its columns, the configuration's among them, and other names it reads.
  EXPECT_TRUE(schema().reads("hidden"));
  EXPECT_TRUE(schema().reads("moe_ffn_hidden"));
  EXPECT_TRUE(schema().reads("workload_json"));
  EXPECT_FALSE(schema().reads("loss"));
  EXPECT_NE(std::find(schema().config_columns().begin(), schema().config_columns().end(), "micro_batch"),
            schema().config_columns().end());
}

// Logs spell precisions, booleans and activation checkpointing their own way; each reads as the
// space's word, and a word it does not know is still named.
TEST(LlmTableSchema, ReadsTheSpellingsLogsUse) {
  std::map<std::string, std::string> cells = {{"preset", "llama3-8b"}, {"global_batch", "64"}, {"gpus", "8"}};
  auto read = [&](const std::map<std::string, std::string>& extra) {
    std::map<std::string, std::string> c = cells;
    c.insert(extra.begin(), extra.end());
    return schema().read(c);
  };
  for (const auto& [given, dtype] : std::vector<std::pair<std::string, std::string>>{
           {"BF16", "bf16"}, {"bfloat16", "bf16"}, {"MXFP8", "fp8"}, {"fp8_cs", "fp8"}, {"NVFP4", "fp4"}, {"FP16", "fp16"}})
    EXPECT_EQ(read({{"dtype", given}}).workload["training"]["dtype"], dtype) << given;
  for (const auto& [given, recompute] : std::vector<std::pair<std::string, std::string>>{
           {"True", "full"}, {"False", "none"}, {"Full", "full"}, {"selective", "selective"}})
    EXPECT_EQ(read({{"recompute", given}}).config["recompute"], recompute) << given;
  EXPECT_EQ(read({{"sp", "True"}, {"tp", "2"}}).config["sp"], true);
  EXPECT_EQ(read({{"kernels", "Eager"}}).workload["training"]["kernels"], "eager");
  try {
    read({{"sp", "maybe"}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "column sp: expected true or false, got 'maybe'");
  }
}

TEST(RecsysTableSchema, ReadsWritesAndReadsBack) {
  Registry reg;
  ASSERT_TRUE(reg.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-recsys.so"));
  const TableSchema recsys = TableSchema::of(reg, "recsys");
  EXPECT_TRUE(recsys.reads("large_table_sharding"));
  EXPECT_FALSE(recsys.reads("hidden"));
  const std::map<std::string, std::string> cells = {{"preset", "criteo-terabyte"}, {"global_batch", "65536"},
                                                    {"gpus", "16"}, {"large_table_sharding", "row_wise"},
                                                    {"offload", "false"}, {"batch_per_gpu", "4096"}};
  const TableRow row = recsys.read(cells);
  EXPECT_EQ(row.workload["model"], json({{"preset", "criteo-terabyte"}}));
  EXPECT_EQ(row.workload["cluster"]["nodes"], 2);  // 16 GPUs of 8 per node
  EXPECT_EQ(row.config["large_table_sharding"], "row_wise");
  EXPECT_EQ(row.config["offload"], false);
  EXPECT_EQ(row.devices, 16);
  // The space itself reads the row's configuration under the row's options.
  auto space = reg.make_space("recsys", row.workload.dump(), row.options.dump());
  const std::vector<double> config = space->parse(row.config.dump());
  EXPECT_EQ(space->explain(config.data()), "");
  const json rendered = json::parse(space->render(config.data(), COTUNE_RENDER_JSON));
  const TableCells back = recsys.write(row.workload, &rendered);
  EXPECT_EQ(back.inexact, "");
  EXPECT_EQ(back.cells.at("large_table_sharding"), "row_wise");
  EXPECT_EQ(back.cells.at("gpus"), "16");
  EXPECT_EQ(recsys.read(back.cells).workload, row.workload);
  // A model of its own has no column: the host then writes the workload whole.
  json own = row.workload;
  own["model"] = {{"tables", json::array({{{"name", "t"}, {"rows", 1000}, {"dim", 16}}})},
                  {"dense_features", 4}, {"bottom_mlp", {16}}, {"top_mlp", {1}}};
  const TableCells whole = recsys.write(own, &rendered);
  EXPECT_THAT(whole.inexact, HasSubstr("no column for workload/model/"));
  std::map<std::string, std::string> json_row = {{"workload_json", own.dump()}, {"gpus", "16"}};
  EXPECT_EQ(recsys.read(json_row).workload, own);
  try {
    recsys.read({{"preset", "criteo-terabyte"}, {"global_batch", "many"}, {"gpus", "16"}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "column global_batch: expected a number, got 'many'");
  }
}

TEST(LlmTableSchema, ASpaceWithoutOneIsRefusedByName) {
  Registry reg;
  reg.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-recsys.so");
  reg.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-llm.so");
  EXPECT_TRUE(TableSchema::find(reg, "llm").has_value());
  EXPECT_FALSE(TableSchema::find(reg, "nosuch").has_value());
  try {
    TableSchema::of(reg, "nosuch");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--space 'nosuch': no loaded space has that name"));
  }
}

TEST_F(HistoryImport, MappedColumnsAndUnits) {
  const TableRuns runs = read_table_runs(table_of(kMapped), {{"tensor parallelism", "tp"}, {"iteration time (ms)", "step_time_ms"}}, registry(), schema());
  ASSERT_TRUE(runs.rejected.empty()) << runs.rejected.front().reason;
  ASSERT_EQ(runs.runs.size(), 2u);
  ASSERT_EQ(runs.warnings.size(), 1u);
  EXPECT_THAT(runs.warnings[0], HasSubstr("'cluster_name'"));
  ASSERT_EQ(runs.notes.size(), 1u);
  EXPECT_THAT(runs.notes[0], HasSubstr("kept as metrics under their own names (not columns of the llm space's table "
                                       "schema, nor recognised metrics): loss"));
  const TableRun& a = runs.runs[0];
  EXPECT_EQ(a.line, 2u);
  EXPECT_DOUBLE_EQ(a.metrics["step_time_s"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(a.metrics["tokens_per_s"].get<double>(), 8000.0);  // per GPU x 8 GPUs
  EXPECT_DOUBLE_EQ(a.metrics["mfu"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(a.metrics["loss"].get<double>(), 2.5);  // unknown but numeric: kept
  EXPECT_FALSE(a.metrics.contains("cluster_name"));
  const json config = json::parse(a.config_json);
  EXPECT_EQ(config["tp"], 2);
  EXPECT_EQ(config["dp"], 4);
  EXPECT_EQ(runs.runs[1].workload_key, a.workload_key);  // same model and cluster: one workload
  EXPECT_EQ(a.workload_key, workload_key(a.workload, "llm"));
  EXPECT_EQ(a.space->key(a.config.data()), "tp=2;pp=1;dp=4;cp=1;ep=1;micro_batch=1;vpp=1;zero=0;recompute=none;sp=false;gpus=8;gpu=h100-sxm");
  // Published tables write the per cent as mfu_pct.
  std::string pct = kMapped;
  pct.replace(pct.find("mfu_percent"), std::strlen("mfu_percent"), "mfu_pct");
  const TableRuns published =
      read_table_runs(table_of(pct), {{"tensor parallelism", "tp"}, {"iteration time (ms)", "step_time_ms"}}, registry(), schema());
  ASSERT_EQ(published.runs.size(), 2u);
  EXPECT_DOUBLE_EQ(published.runs[0].metrics["mfu"].get<double>(), 0.4);
  EXPECT_FALSE(published.runs[0].metrics.contains("mfu_pct"));
}

TEST_F(HistoryImport, MegatronArgumentNamesAndStatusWordsAsTeamsWriteThem) {
  // A team's scraped table: Megatron-LM's argument names, its elapsed time per iteration in ms, a
  // GPU type column and Slurm-like status words, read with no --map.
  const char* text =
      "num_layers,hidden_size,num_attention_heads,seq_length,padded_vocab_size,global_batch_size,micro_batch_size,"
      "tensor_model_parallel_size,pipeline_model_parallel_size,num_gpus,gpu_type,status,elapsed_time_per_iteration_ms\n"
      "24,1024,16,2048,51200,256,4,2,1,16,A100-SXM4-80GB,COMPLETED,779.6\n"
      "24,1024,16,2048,51200,256,8,1,1,8,A100-SXM4-80GB,Out_Of_Memory,\n"
      "24,1024,16,2048,51200,256,2,1,1,8,A100-SXM4-80GB,success,1319.2\n"
      "24,1024,16,2048,51200,256,2,1,2,8,A100-SXM4-80GB,exploded,1.0\n";
  const TableRuns runs = read_table_runs(table_of(text), {}, registry(), schema());
  ASSERT_EQ(runs.runs.size(), 3u) << (runs.rejected.empty() ? "" : runs.rejected.front().reason);
  EXPECT_EQ(runs.runs[0].status, TrialStatus::kOk);
  EXPECT_EQ(runs.runs[1].status, TrialStatus::kOom);
  EXPECT_EQ(runs.runs[2].status, TrialStatus::kOk);
  EXPECT_DOUBLE_EQ(runs.runs[0].metrics["step_time_s"].get<double>(), 0.7796);
  const json config = json::parse(runs.runs[0].config_json);
  EXPECT_EQ(config["tp"], 2);
  EXPECT_EQ(config["dp"], 8);
  EXPECT_EQ(config["gpu"], "a100-80gb");
  EXPECT_EQ(runs.runs[0].workload["model"]["hidden"], 1024);
  ASSERT_EQ(runs.rejected.size(), 1u);
  EXPECT_THAT(runs.rejected[0].reason, AllOf(HasSubstr("column status"), HasSubstr("'exploded'")));
  // A table that says the schema's own name beside a Megatron-LM one keeps its own.
  const TableRuns both = read_table_runs(
      table_of("tp,tensor_model_parallel_size,pp,dp,micro_batch,gpus,gpu,hidden,layers,heads,seq_len,vocab,global_batch,"
               "step_time_s\n2,4,1,4,1,8,h100-sxm,1024,24,16,2048,51200,256,1.0\n"),
      {}, registry(), schema());
  ASSERT_EQ(both.runs.size(), 1u) << (both.rejected.empty() ? "" : both.rejected.front().reason);
  EXPECT_EQ(json::parse(both.runs[0].config_json)["tp"], 2);
}

TEST_F(HistoryImport, HuggingFaceConfigNamesAsTeamsWriteThem) {
  // A model described by its Hugging Face config.json (Qwen3-30B-A3B's names), read with no --map:
  // hidden_act "silu" is the gated SwiGLU MLP.
  const char* text =
      "hidden_size,num_hidden_layers,num_attention_heads,num_key_value_heads,kv_channels,intermediate_size,"
      "moe_intermediate_size,num_experts,num_experts_per_tok,vocab_size,rope_theta,tie_word_embeddings,hidden_act,"
      "seq_len,global_batch,gpus,gpu,tp,ep,step_time_s\n"
      "2048,48,32,4,128,6144,768,128,8,151936,1000000,false,silu,4096,64,16,h100-sxm,2,8,3.5\n";
  const TableRuns runs = read_table_runs(table_of(text), {}, registry(), schema());
  ASSERT_EQ(runs.runs.size(), 1u) << (runs.rejected.empty() ? "" : runs.rejected.front().reason);
  const json& model = runs.runs[0].workload["model"];
  EXPECT_EQ(model["layers"], 48);
  EXPECT_EQ(model["kv_heads"], 4);
  EXPECT_EQ(model["head_dim"], 128);
  EXPECT_EQ(model["ffn_hidden"], 6144);
  EXPECT_EQ(model["expert_ffn_hidden"], 768);
  EXPECT_EQ(model["experts"], 128);
  EXPECT_EQ(model["top_k"], 8);
  EXPECT_EQ(model["vocab"], 151936);
  EXPECT_EQ(model["rope_base"], 1000000);
  EXPECT_EQ(model["tie_embeddings"], false);
  EXPECT_EQ(model["activation"], "swiglu");
  const json config = json::parse(runs.runs[0].config_json);
  EXPECT_EQ(config["tp"], 2);
  EXPECT_EQ(config["ep"], 8);
  EXPECT_EQ(config["dp"], 8);
  // DeepSeek-V3's names for its shared expert, dense first layers, MTP and routing groups; GPT-2's
  // activation is GeLU.
  const TableRuns deepseek = read_table_runs(
      table_of("preset,n_shared_experts,first_k_dense_replace,num_nextn_predict_layers,n_group,topk_group,global_batch,"
               "gpus,gpu,ep,step_time_s\ndeepseek-v3,1,3,0,8,4,4096,256,h100-sxm,64,30\n"),
      {}, registry(), schema());
  ASSERT_EQ(deepseek.runs.size(), 1u) << (deepseek.rejected.empty() ? "" : deepseek.rejected.front().reason);
  EXPECT_EQ(deepseek.runs[0].workload["model"]["mtp_layers"], 0);
  EXPECT_EQ(deepseek.runs[0].workload["model"]["expert_groups"], 8);
  const TableRuns gpt2 = read_table_runs(
      table_of("hidden_size,num_hidden_layers,num_attention_heads,hidden_act,global_batch,gpus,step_time_s\n"
               "768,12,12,gelu_new,64,8,0.2\n"),
      {}, registry(), schema());
  ASSERT_EQ(gpt2.runs.size(), 1u) << (gpt2.rejected.empty() ? "" : gpt2.rejected.front().reason);
  EXPECT_EQ(gpt2.runs[0].workload["model"]["activation"], "gelu");
}

// PyTorch FSDP's and trainers' names for sharding, checkpointing and precision, Megatron-LM's
// distributed-optimizer switch, a tokens/s per GPU as trainers log it, and TorchTitan's sequence
// parallelism with TP where the row says it ran TorchTitan and gives no sp.
TEST_F(HistoryImport, TrainerNamesForShardingCheckpointingAndPrecision) {
  const TableRuns runs = read_table_runs(
      table_of("preset,global_batch,gpus,gpu,tp,micro_batch,sharding_strategy,activation_checkpointing,"
               "mixed_precision,use_distributed_optimizer,format,tokens_per_sec_per_gpu\n"
               "llama3-8b,16,8,h100-sxm,1,2,FULL_SHARD,True,bf16-mixed,,,5000\n"
               "llama3-8b,64,8,h100-sxm,2,1,,False,,True,,9000\n"
               "llama3-8b,16,8,h100-sxm,2,2,FULL_SHARD,,,,torchtitan,5500\n"),
      {}, registry(), schema());
  ASSERT_EQ(runs.runs.size(), 3u) << (runs.rejected.empty() ? "" : runs.rejected.front().reason);
  const json fsdp = json::parse(runs.runs[0].config_json);
  EXPECT_EQ(fsdp["zero"], 3);
  EXPECT_EQ(fsdp["recompute"], "full");
  EXPECT_EQ(runs.runs[0].workload["training"]["dtype"], "bf16");
  EXPECT_DOUBLE_EQ(runs.runs[0].metrics["tokens_per_s"].get<double>(), 40000);
  const json megatron = json::parse(runs.runs[1].config_json);
  EXPECT_EQ(megatron["zero"], 1);
  EXPECT_EQ(megatron["recompute"], "none");
  EXPECT_EQ(megatron["sp"], false);
  EXPECT_EQ(json::parse(runs.runs[2].config_json)["sp"], true);
}

// Megatron-LM prints rotary_base for every model: it is read only where position_embedding_type is
// rotary, and a table's rope and learned-position runs are two workloads.
TEST_F(HistoryImport, RotaryEmbeddingsAsMegatronArgumentsSayThem) {
  const TableRuns runs = read_table_runs(
      table_of("hidden_size,num_layers,num_attention_heads,position_embedding_type,rotary_base,global_batch,gpus,"
               "step_time_s\n1024,24,16,rope,500000,64,8,0.5\n1024,24,16,learned_absolute,10000,64,8,0.4\n"
               "1024,24,16,rope,,64,8,0.5\n"),
      {}, registry(), schema());
  ASSERT_EQ(runs.runs.size(), 3u) << (runs.rejected.empty() ? "" : runs.rejected.front().reason);
  EXPECT_EQ(runs.runs[0].workload["model"]["rope_base"], 500000);
  EXPECT_FALSE(runs.runs[1].workload["model"].contains("rope_base"));
  EXPECT_EQ(runs.runs[2].workload["model"]["rope_base"], 10000);
  EXPECT_NE(runs.runs[0].workload, runs.runs[1].workload);
}

TEST(TableRuns, RejectionsOfOneReasonAreSaidOnce) {
  std::vector<RejectedRow> rows;
  for (size_t line = 2; line <= 9; ++line) rows.push_back({line, "column hidden: missing"});
  rows.insert(rows.begin() + 1, {12, "column tp: expected a number, got 'x'"});
  const std::vector<RejectionGroup> g = rejection_groups(rows);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].where, "lines 2, 3, 4, 5, 6 and 3 more");
  EXPECT_EQ(g[0].reason, "column hidden: missing");
  EXPECT_EQ(g[0].rows, 8u);
  EXPECT_EQ(g[1].where, "line 12");
  EXPECT_EQ(g[1].rows, 1u);
}

TEST_F(HistoryImport, HeaderProblemsAreUserErrors) {
  try {
    read_table_runs(table_of(kMapped), {{"tensor paralelism", "tp"}}, registry(), schema());
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("has no column 'tensor paralelism'"));
  }
}

// Published tables give a metric in several columns and fill one: per row the metric's own column
// wins, else the first filled; cells that disagree reject the row.
TEST_F(HistoryImport, SeveralColumnsOfOneMetricAgreeOrRejectTheRow) {
  const TableRuns runs = read_table_runs(
      table_of("hidden,layers,heads,global_batch,gpus,step_time_ms,step_time_s,tokens_per_s,tokens_per_s_per_gpu\n"
               "1024,8,16,64,8,1000,1,,\n"          // agree: step_time_s 1
               "1024,8,16,64,8,500,,,\n"            // only ms: 0.5 s
               "1024,8,16,64,8,,,,1000\n"           // per GPU only: 8000 tokens/s
               "1024,8,16,64,8,1000,2,,\n"),        // disagree
      {}, registry(), schema());
  ASSERT_EQ(runs.runs.size(), 3u);
  EXPECT_DOUBLE_EQ(runs.runs[0].metrics["step_time_s"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(runs.runs[1].metrics["step_time_s"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(runs.runs[2].metrics["tokens_per_s"].get<double>(), 8000);
  ASSERT_EQ(runs.rejected.size(), 1u);
  EXPECT_EQ(runs.rejected[0].line, 5u);
  EXPECT_EQ(runs.rejected[0].reason, "columns step_time_ms and step_time_s give different step_time_s (2 against 1000)");
}

TEST_F(HistoryImport, BadRowsAreRejectedWithTheirLine) {
  const std::string csv =
      "hidden,layers,heads,global_batch,gpus,tp,sp,step_time_ms,status\n"
      "1024,8,16,64,8,2,false,250,ok\n"     // line 2: good
      "1024,8,16,64,8,abc,false,250,ok\n"   // line 3: not a number
      "1024,8,16,64,8,3,false,250,ok\n"     // line 4: 8 GPUs do not split into tp 3
      "1024,8,16,64,8,1,true,250,ok\n"      // line 5: sp needs tp > 1 (the space says so)
      "1024,8,16,64,8,2,false,fast,ok\n"    // line 6: bad metric
      "1024,8,16,64,8,2,false,250,lost\n"   // line 7: unknown status
      "1024,8,16,64,8,4,false,,oom\n"       // line 8: good, an oom run without a time
      "1024,8,16,64,8,8,false,,ok\n";       // line 9: ok, but nothing measured
  const TableRuns runs = read_table_runs(table_of(csv), {}, registry(), schema());
  ASSERT_EQ(runs.runs.size(), 2u);
  EXPECT_EQ(runs.runs[1].status, TrialStatus::kOom);
  EXPECT_FALSE(runs.runs[1].metrics.contains("step_time_s"));
  ASSERT_EQ(runs.rejected.size(), 6u);
  EXPECT_EQ(runs.rejected[0].line, 3u);
  EXPECT_EQ(runs.rejected[0].reason, "column tp: expected a number, got 'abc'");
  EXPECT_EQ(runs.rejected[1].line, 4u);
  EXPECT_THAT(runs.rejected[1].reason, HasSubstr("not divisible by tp*pp*cp"));
  EXPECT_EQ(runs.rejected[2].line, 5u);
  EXPECT_THAT(runs.rejected[2].reason, HasSubstr("the llm space rejects the configuration: sp (sequence parallelism) needs tp > 1"));
  EXPECT_EQ(runs.rejected[3].line, 6u);
  EXPECT_EQ(runs.rejected[3].reason, "column step_time_ms: expected a number, got 'fast'");
  EXPECT_EQ(runs.rejected[4].line, 7u);
  EXPECT_THAT(runs.rejected[4].reason, HasSubstr("column status: expected ok, failed"));
  EXPECT_EQ(runs.rejected[5].line, 9u);
  EXPECT_THAT(runs.rejected[5].reason, HasSubstr("no measured value: the status is ok, but no cell of the row"));
}

TEST_F(HistoryImport, ARowTheSpaceRefusesDoesNotTakeItsWorkloadDown) {
  // Same workload on every line; line 3's zero stage does not exist, line 4's recomputation neither.
  const std::string csv =
      "hidden,layers,heads,global_batch,gpus,tp,zero,recompute,step_time_s\n"
      "1024,8,16,64,8,2,1,none,0.25\n"
      "1024,8,16,64,8,2,7,none,0.25\n"
      "1024,8,16,64,8,2,1,partial,0.25\n"
      "1024,8,16,64,8,4,0,full,0.30\n"
      ",,,,,,,,\n";  // says nothing, as a blank line: skipped and counted, not rejected
  const TableRuns runs = read_table_runs(table_of(csv), {}, registry(), schema());
  ASSERT_EQ(runs.notes.size(), 1u);
  EXPECT_THAT(runs.notes[0], HasSubstr("1 rows with every cell empty skipped"));
  ASSERT_EQ(runs.runs.size(), 2u);
  EXPECT_EQ(runs.runs[0].line, 2u);
  EXPECT_EQ(runs.runs[1].line, 5u);
  ASSERT_EQ(runs.rejected.size(), 2u);
  EXPECT_EQ(runs.rejected[0].line, 3u);
  EXPECT_THAT(runs.rejected[0].reason, HasSubstr("the llm space refuses this row: "));
  EXPECT_THAT(runs.rejected[0].reason, HasSubstr("zero"));
  EXPECT_EQ(runs.rejected[1].line, 4u);
  EXPECT_THAT(runs.rejected[1].reason, HasSubstr("recompute"));
  EXPECT_EQ(runs.runs[0].workload_key, runs.runs[1].workload_key);
}

TEST_F(HistoryImport, ReimportChangesNothingAndExportRoundTrips) {
  const TableRuns runs = read_table_runs(table_of(kMapped), {{"tensor parallelism", "tp"}, {"iteration time (ms)", "step_time_ms"}}, registry(), schema());
  Store store(path("a.db"));
  ImportCounts first = store.import_history(history_rows(runs.runs, "runs.csv", "llm"));
  EXPECT_EQ(first.inserted, 2);
  ImportCounts again = store.import_history(history_rows(runs.runs, "runs.csv", "llm"));
  EXPECT_EQ(again.inserted, 0);
  EXPECT_EQ(again.duplicates, 2);
  const std::string key = runs.runs[0].workload_key;
  ASSERT_EQ(store.history_for(key, "llm").size(), 2u);

  std::ostringstream csv;
  std::vector<std::string> warnings;
  EXPECT_EQ(write_history_csv(csv, store.export_history(key, "llm"), store, schema(), &warnings), 2u);
  EXPECT_TRUE(warnings.empty());
  const TableRuns back = read_table_runs(table_of(csv.str(), "exported.csv"), {}, registry(), schema());
  ASSERT_TRUE(back.rejected.empty()) << back.rejected.front().reason;
  ASSERT_EQ(back.runs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.runs[i].workload_key, key);
    EXPECT_EQ(config_key(json::parse(back.runs[i].config_json)), config_key(json::parse(runs.runs[i].config_json)));
    EXPECT_EQ(back.runs[i].status, runs.runs[i].status);
    for (const char* m : {"step_time_s", "tokens_per_s", "mfu", "loss"})
      EXPECT_DOUBLE_EQ(back.runs[i].metrics[m].get<double>(), runs.runs[i].metrics[m].get<double>()) << m;
  }
}

TEST_F(HistoryImport, CommandsEndToEnd) {
  const std::string runs = write("runs.csv", std::string(kMapped) + "1024,8,16,64,8,zz,1,1,1,1,1,x\n");
  const std::string db = path("cli.db");
  const std::string args = runs + " --space llm --store " + db +
                           " --map \"tensor parallelism=tp\" --map \"iteration time (ms)=step_time_ms\"";
  CliRun imported = cli("import " + args);
  EXPECT_EQ(imported.status, 1) << imported.out;  // one row rejected, the others in
  EXPECT_THAT(imported.out, HasSubstr("line 4: rejected: column tp: expected a number, got 'zz'"));
  EXPECT_THAT(imported.out, HasSubstr("3 rows: 2 imported, 0 already in the store, 1 rejected"));
  CliRun again = cli("import " + args);
  EXPECT_THAT(again.out, HasSubstr("0 imported, 2 already in the store"));

  const std::string out = path("exported.csv");
  CliRun exported = cli("export-history --all --store " + db + " -o " + out);
  EXPECT_EQ(exported.status, 0) << exported.out;
  CliRun reimported = cli("import " + out + " --space llm --store " + path("other.db"));
  EXPECT_EQ(reimported.status, 0) << reimported.out;
  EXPECT_THAT(reimported.out, HasSubstr("2 rows: 2 imported"));
  Store a(db), b(path("other.db"));
  const auto keys_a = stored_workloads(db), keys_b = stored_workloads(path("other.db"));
  ASSERT_EQ(keys_a.size(), 1u);
  EXPECT_EQ(keys_a, keys_b);
  EXPECT_EQ(b.history_for(keys_a[0].first, "llm").size(), 2u);

  CliRun bad = cli("import " + runs + " --space nosuch --store " + db);
  EXPECT_EQ(bad.status, 2);
  EXPECT_THAT(bad.out, HasSubstr("--space 'nosuch': no loaded space has that name"));
  // A space without a table schema (the test grid) is refused by name, before the store is touched.
  CliRun none = cli("import " + runs + " --space testgrid --store " + path("none.db") +
                    " --format csv 2>&1; COTUNE_PLUGIN_PATH=" COTUNE_BINARY_DIR "/lib/cotune/test-plugins " +
                    COTUNE_CLI + " export-history --space testgrid --all --store " + db);
  EXPECT_THAT(none.out, HasSubstr("--space 'testgrid': no loaded space has that name"));
  EXPECT_THAT(none.out, HasSubstr("--space 'testgrid': the space org.cotune.test.space.testgrid has no table schema"));
  EXPECT_FALSE(fs::exists(path("none.db")));
  // A run of the recsys space is read by its own schema: this llm file's rows lack its columns.
  CliRun recsys = cli("import " + runs + " --space recsys --store " + path("recsys.db"));
  EXPECT_EQ(recsys.status, 1);
  EXPECT_THAT(recsys.out, HasSubstr("lines 2, 3, 4: rejected: column preset: missing (required)"));
  CliRun no_key = cli("export-history --store " + db);
  EXPECT_EQ(no_key.status, 2);
  EXPECT_THAT(no_key.out, HasSubstr("give exactly one of --workload-key K and --all"));
  // simulate's own output is the model's, not measurements: not stored as history.
  const std::string simulated = path("simulated.csv");
  ASSERT_EQ(cli("simulate --batch " + write("layouts.csv", "hidden,layers,heads,global_batch,gpus,tp\n1024,8,16,64,8,1\n") +
                " --out " + simulated).status, 0);
  CliRun model = cli("import " + simulated + " --space llm --store " + path("simulated.db"));
  EXPECT_EQ(model.status, 2) << model.out;
  EXPECT_THAT(model.out, HasSubstr("simulated.csv: this is the output of cotune simulate --batch"));
  EXPECT_FALSE(fs::exists(path("simulated.db"))) << "a refused import makes no store";
}

// A study whose workload the columns cannot say (a preset with a changed field, a price): every
// trial is exported all the same, its workload whole in workload_json, and re-imports under the
// study's own workload key.
TEST_F(HistoryImport, ExportWritesEveryRowAWorkloadTheColumnsCannotSayIncluded) {
  json study = {{"name", "priced"},
                {"workload", {{"model", {{"preset", "llama3-8b"}, {"seq_len", 4096}}},
                              {"training", {{"global_batch", 256}}},
                              {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 4}, {"price_per_gpu_hour", 2.5}}}}},
                {"space", {{"name", "llm"}, {"options", {{"pp", {1}}, {"cp", {1}}, {"vpp", {1}}}}}},
                {"searcher", "random"},
                {"executor", "sim"},
                {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
                {"budget", {{"trials", 4}}}};
  const std::string file = write("priced.json", study.dump(2));
  const std::string db = path("priced.db"), out = path("priced.csv");
  CliRun run = cli("run " + file + " --store " + db);
  ASSERT_EQ(run.status, 0) << run.out;
  CliRun exported = cli("export-history --all --store " + db + " -o " + out);
  EXPECT_EQ(exported.status, 0) << exported.out;
  EXPECT_THAT(exported.out, HasSubstr("4 of 4 rows written"));
  std::ifstream in(out);
  std::string header;
  std::getline(in, header);
  EXPECT_THAT(header, HasSubstr("workload_json"));

  CliRun reimported = cli("import " + out + " --space llm --store " + path("again.db"));
  EXPECT_EQ(reimported.status, 0) << reimported.out;
  EXPECT_THAT(reimported.out, HasSubstr("4 rows: 4 imported"));
  Store original(db);
  const std::string key = original.find_study("priced")->workload_key;
  Store again(path("again.db"));
  EXPECT_EQ(again.history_for(key, "llm").size(), 4u) << "the same workload key: the same workload";
  // Each row keeps where it came from: importing the export into its own store adds nothing.
  CliRun same = cli("import " + out + " --space llm --store " + db);
  EXPECT_EQ(same.status, 0) << same.out;
  EXPECT_THAT(same.out, HasSubstr("4 rows: 0 imported, 4 already in the store"));

  // workload_json is the workload: the row may not also give the workload's own columns.
  const std::string both = write("both.csv", "hidden,tp,gpus,workload_json\n4096,1,8,\"{\"\"model\"\": {}}\"\n");
  CliRun refused = cli("import " + both + " --space llm --store " + path("x.db"));
  EXPECT_NE(refused.status, 0);
  EXPECT_THAT(refused.out, HasSubstr("column hidden: the row gives its workload in workload_json"));
}

}  // namespace


namespace {

// The step times simulate --batch gives the rows of `csv_path` (in order; empty for rows not timed).
std::vector<std::string> simulated_steps(const std::string& csv_path) {
  cli("simulate --batch " + csv_path + " --out " + csv_path + ".simulated");
  const CsvTable t = read_csv_file(csv_path + ".simulated");
  std::vector<std::string> steps;
  for (const CsvRecord& r : t.rows) steps.push_back(r.fields[size_t(t.column("step_time_s"))]);
  return steps;
}

}  // namespace

// A study launched for TorchTitan measured its trials as TorchTitan runs them (eager kernels, its
// rules): export-history says so in a format column, import keeps it, and simulate --batch and
// calibrate time such a row as the study did.
TEST_F(HistoryImport, AStudysFormatTravelsWithItsRuns) {
  json study = {{"name", "titan"},
                {"workload", {{"model", {{"preset", "llama3-8b"}}},
                              {"training", {{"global_batch", 64}}},
                              {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 1}}}}},
                {"space", {{"name", "llm"}, {"options", {{"pp", {1}}, {"cp", {1}}, {"vpp", {1}}}}}},
                {"searcher", "random"},
                {"executor", "sim"},
                {"format", "torchtitan"},
                {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
                {"budget", {{"trials", 3}}}};
  const std::string db = path("titan.db"), out = path("titan.csv");
  CliRun run = cli("run " + write("titan.json", study.dump(2)) + " --store " + db);
  ASSERT_EQ(run.status, 0) << run.out;
  // show names the workload key that export-history takes, in a command that can be pasted as is.
  const std::string key = Store(db).find_study("titan")->workload_key;
  const std::string hint = "cotune export-history --space llm --workload-key " + key + " --store " + db;
  EXPECT_THAT(cli("show titan --store " + db).out, HasSubstr("workload key " + key + " (its runs as CSV: " + hint + ")"));
  CliRun exported = cli(hint.substr(std::string("cotune ").size()) + " -o " + out);
  ASSERT_EQ(exported.status, 0) << exported.out;
  const TableRuns runs = read_table_runs(read_csv_file(out), {}, registry(), schema());
  ASSERT_EQ(runs.runs.size(), 3u);
  for (const TableRun& r : runs.runs) EXPECT_EQ(r.target, "torchtitan");

  // Imported elsewhere and exported again, the rows still say which framework ran them.
  ASSERT_EQ(cli("import " + out + " --space llm --store " + path("copy.db")).status, 0);
  const std::string again = path("again.csv");
  ASSERT_EQ(cli("export-history --all --store " + path("copy.db") + " -o " + again).status, 0);
  const TableRuns back = read_table_runs(read_csv_file(again), {}, registry(), schema());
  ASSERT_EQ(back.runs.size(), 3u);
  EXPECT_EQ(back.runs[0].target, "torchtitan");

  // The rows as simulate --batch takes them (the schema's columns and the format), and the same
  // rows without a format (Megatron's fused kernels) or with one no framework has.
  const CsvTable table = read_csv_file(out);
  std::ofstream titan_csv(path("titan-in.csv")), megatron(path("megatron.csv")), bad(path("bad.csv"));
  for (std::ofstream* f : {&titan_csv, &megatron, &bad}) {
    std::vector<size_t> kept;
    std::vector<std::string> header;
    for (size_t c = 0; c < table.header.size(); ++c)
      if (schema().reads(table.header[c]) || table.header[c] == "format") kept.push_back(c), header.push_back(table.header[c]);
    write_csv_record(*f, header);
    for (const CsvRecord& r : table.rows) {
      std::vector<std::string> fields;
      for (size_t c : kept)
        fields.push_back(table.header[c] != "format" ? r.fields[c] : f == &titan_csv ? r.fields[c] : f == &megatron ? "" : "pytorch");
      write_csv_record(*f, fields);
    }
  }
  titan_csv.close(), megatron.close(), bad.close();
  const std::vector<std::string> titan = simulated_steps(path("titan-in.csv")), fused = simulated_steps(path("megatron.csv"));
  ASSERT_EQ(titan.size(), 3u);
  ASSERT_EQ(fused.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_GT(std::stod(titan[i]), std::stod(fused[i])) << "row " << i;
  // calibrate reads the export as the study measured it: with the format, the catalogue already
  // explains the runs (the sim executor's noise); without it, they look slower than modelled.
  std::string text = cotune::testing::read_file(out);
  for (size_t at; (at = text.find(",torchtitan,")) != std::string::npos;) text.replace(at, 12, ",,");
  std::ofstream(path("unformatted.csv")) << text;
  auto mape_before = [&](const std::string& csv) {
    CliRun c = cli("calibrate --runs " + csv + " --json 2>/dev/null");
    return json::parse(c.out.substr(c.out.find('{')))["fits"][0]["before"]["mape"].get<double>();
  };
  EXPECT_LT(mape_before(out), 0.12);
  EXPECT_GT(mape_before(path("unformatted.csv")), mape_before(out) + 0.03);

  // The export itself holds measured columns named like simulate's output: refused, saying why.
  CliRun raw = cli("simulate --batch " + out);
  EXPECT_EQ(raw.status, 2);
  EXPECT_THAT(raw.out, HasSubstr("input columns named like the output's or measured (status, step_time_s, tokens_per_s, "
                                 "tflops_per_gpu, mfu, peak_mem_gib): drop or rename them"));

  CliRun unknown = cli("simulate --batch " + path("bad.csv"));
  EXPECT_EQ(unknown.status, 1);
  EXPECT_THAT(unknown.out, HasSubstr("column format: unknown format 'pytorch'"));

  // One configuration with --format gives the batch row's time.
  const json config = json::parse(runs.runs[0].config_json);
  std::ofstream(path("c.json")) << config.dump();
  std::ofstream(path("w.json")) << study["workload"].dump();
  CliRun one = cli("simulate --workload " + path("w.json") + " --config " + path("c.json") + " --format torchtitan --json");
  ASSERT_EQ(one.status, 0) << one.out;
  const json timed = json::parse(one.out);
  EXPECT_NEAR(timed["step_time_s"].get<double>() / std::stod(titan[0]), 1.0, 1e-5);
  EXPECT_EQ(timed["format"], "torchtitan");
  EXPECT_THAT(cli("simulate --workload " + path("w.json") + " --config " + path("c.json") + " --format TorchTitan").out,
              HasSubstr("format          torchtitan (timed as that framework runs it)"));
}
