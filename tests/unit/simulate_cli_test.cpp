// `cotune simulate` through the real binary: the breakdown, --json, and the CSV batch path with bad
// rows that do not stop the others.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cotune/core/io/output_file.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using nlohmann::json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

struct CliRun {
  int status;
  std::string out;
};

CliRun cli(const std::string& args) {
  const std::string cmd = std::string(COTUNE_CLI) + " simulate " + args + " 2>&1";
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

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    std::vector<std::string> cells;
    std::string cell;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      else if (c == ',' && !quoted) cells.push_back(cell), cell.clear();
      else cell += c;
    }
    cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

class SimulateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(COTUNE_BINARY_DIR) / "test-tmp" / ("simulate_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  // `simulate --batch` of the CSV `in` into OUT_NAME: the exit status, and the rows it wrote
  // (header first).
  std::vector<std::vector<std::string>> batch(const std::string& in, const std::string& out_name, int* status) {
    const std::string out = (dir_ / out_name).string();
    CliRun r = cli("--batch " + in + " --out " + out);
    *status = r.status;
    std::ifstream f(out);
    std::stringstream ss;
    ss << f.rdbuf();
    return parse_csv(ss.str());
  }
  fs::path dir_;
};

// The index of each named column in a CSV header (its size when absent).
auto columns_of(const std::vector<std::string>& header) {
  return [&header](const std::string& name) { return std::find(header.begin(), header.end(), name) - header.begin(); };
}

const char* kWorkload = R"({"model": {"preset": "llama3-70b"},
  "training": {"global_batch": 1024, "dtype": "bf16"},
  "cluster": {"gpu": "h100-sxm", "nodes": 64, "price_per_gpu_hour": 2.5}})";


}  // namespace

TEST_F(SimulateCli, PrintsTheBreakdown) {
  const std::string w = write("w.json", kWorkload);
  const std::string c = write("c.json", R"({"tp": 8, "pp": 4, "vpp": 5, "sp": true, "recompute": "selective", "zero": 1})");
  CliRun r = cli("--workload " + w + " --config " + c);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("step time"));
  EXPECT_THAT(r.out, HasSubstr("MFU"));
  EXPECT_THAT(r.out, HasSubstr("pipeline bubble"));
  EXPECT_THAT(r.out, HasSubstr("exposed tp comm"));
  EXPECT_THAT(r.out, HasSubstr("512 x h100-sxm"));
}

TEST_F(SimulateCli, ListsTheHeaviestOpsHeaviestFirst) {
  const std::string w = write("w.json", kWorkload);
  const std::string c = write("c.json", R"({"tp": 8, "pp": 4, "vpp": 5, "sp": true, "recompute": "selective", "zero": 1})");
  CliRun r = cli("--workload " + w + " --config " + c + " --ops 6");
  ASSERT_EQ(r.status, 0) << r.out;
  const size_t at = r.out.find("heaviest ops per step");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::stringstream lines(r.out.substr(at));
  std::string line;
  std::getline(lines, line);  // the heading, two lines
  std::getline(lines, line);
  std::getline(lines, line);  // the column names
  EXPECT_THAT(line, HasSubstr("label"));
  std::vector<double> seconds;
  double compute_share = 0;
  while (std::getline(lines, line)) {
    std::stringstream words(line);
    std::string label, phase, stream, share;
    double s = 0;
    ASSERT_TRUE(words >> label >> phase >> stream >> s >> share) << line;
    EXPECT_TRUE(phase == "forward" || phase == "backward" || phase == "step") << line;
    EXPECT_TRUE(stream == "compute" || stream == "overlapped") << line;
    if (stream == "compute") compute_share += std::stod(share);
    else EXPECT_EQ(share, "-") << line;
    seconds.push_back(s);
  }
  ASSERT_EQ(seconds.size(), 6u) << r.out;
  EXPECT_TRUE(std::is_sorted(seconds.rbegin(), seconds.rend())) << r.out;
  EXPECT_GT(seconds.back(), 0);
  EXPECT_GT(compute_share, 0);
  EXPECT_LE(compute_share, 100.0);

  // Every op: the compute stream's shares add up to the whole of it; as JSON, the same list.
  CliRun all = cli("--workload " + w + " --config " + c + " --ops 100000 --json");
  ASSERT_EQ(all.status, 0) << all.out;
  const json j = json::parse(all.out);
  double total = 0, shares = 0;
  for (const json& o : j["ops"]["heaviest"]) {
    if (o["stream"] == "compute") total += o["seconds_per_step"].get<double>(), shares += o["share_of_compute_stream"].get<double>();
    else EXPECT_FALSE(o.contains("share_of_compute_stream")) << o;
  }
  EXPECT_NEAR(total, j["ops"]["compute_stream_s"].get<double>(), 1e-9);
  EXPECT_NEAR(shares, 1.0, 1e-9);
  EXPECT_LE(j["ops"]["compute_stream_s"].get<double>(), j["step_time_s"].get<double>() + 1e-9);

  for (const char* bad : {" --ops 0", " --ops -1"}) {
    CliRun b = cli("--workload " + w + " --config " + c + bad);
    EXPECT_EQ(b.status, 2) << bad;
    EXPECT_THAT(b.out, HasSubstr("--ops: expected a count of at least 1")) << bad;
  }
  CliRun batch = cli("--batch " + write("b.csv", "preset,gpu,gpus,global_batch\nllama3-8b,h100,8,64\n") + " --ops 3");
  EXPECT_EQ(batch.status, 2);
  EXPECT_THAT(batch.out, HasSubstr("drop it with --batch"));
  CliRun batch_json = cli("--batch " + (dir_ / "b.csv").string() + " --json");
  EXPECT_EQ(batch_json.status, 2);
  EXPECT_THAT(batch_json.out, HasSubstr("--batch writes CSV (drop --json"));
  // A bad space option is the option's fault, not the workload's.
  CliRun options = cli("--workload " + w + " --config " + c + " --space-options '{\"micro-batch\": [1]}'");
  EXPECT_EQ(options.status, 2);
  EXPECT_THAT(options.out, HasSubstr("--space-options: "));
  EXPECT_THAT(options.out, HasSubstr("(did you mean \"micro_batch\"?)"));
}

TEST_F(SimulateCli, PrintsJson) {
  const std::string w = write("w.json", kWorkload);
  const std::string c = write("c.json", R"({"tp": 8, "pp": 4, "vpp": 5, "sp": true, "recompute": "selective", "zero": 1})");
  CliRun r = cli("--workload " + w + " --config " + c + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  json j = json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["config"]["dp"], 16);
  for (const char* k : {"step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "peak_mem_gib", "cost_per_mtokens"})
    EXPECT_GT(j[k].get<double>(), 0) << k;
  EXPECT_GT(j["breakdown"]["compute_s"].get<double>(), 0);
  EXPECT_GT(j["breakdown"]["bubble_s"].get<double>(), 0);
}

// What the configuration alone does not show: the FP8 scaling the workload's recipe (auto: by GPU)
// chose, and whether tensor-parallel transfers overlap the GEMMs (only with sp and tp > 1).
TEST_F(SimulateCli, SaysHowGemmsAreScaledAndWhetherTpCommOverlaps) {
  auto workload = [&](const std::string& gpu, const std::string& recipe) {
    return write(gpu + recipe + ".json", R"({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 64,
        "dtype": "fp8", "tp_comm_overlap": true)" + (recipe.empty() ? "" : ", \"fp8_recipe\": \"" + recipe + "\"") +
                                             R"(}, "cluster": {"gpu": ")" + gpu + R"(", "nodes": 1}})");
  };
  const std::string sp = write("sp.json", R"({"tp": 2, "sp": true, "zero": 1})");
  const std::string no_sp = write("nosp.json", R"({"tp": 2, "sp": false, "zero": 1})");

  CliRun blackwell = cli("--workload " + workload("b200", "") + " --config " + sp);
  ASSERT_EQ(blackwell.status, 0) << blackwell.out;
  EXPECT_THAT(blackwell.out, HasSubstr("(recipe mxfp8, scaled per-block)"));  // auto, on Blackwell
  EXPECT_THAT(blackwell.out, HasSubstr("tp comm         overlapped with the GEMMs"));
  CliRun hopper = cli("--workload " + workload("h100-sxm", "") + " --config " + no_sp + " --json");
  ASSERT_EQ(hopper.status, 0) << hopper.out;
  const json j = json::parse(hopper.out)["execution"];
  EXPECT_EQ(j["fp8_scaling"], "per-tensor");
  EXPECT_EQ(j["fp8_recipe"], "tensorwise");  // auto, before Blackwell
  EXPECT_EQ(j["tp_comm"], "blocking");  // asked for, but without sequence parallelism: said why
  EXPECT_THAT(j["tp_comm_note"].get<std::string>(), HasSubstr("only with sequence parallelism (sp) and tp > 1"));
  CliRun no_sp_text = cli("--workload " + workload("h100-sxm", "") + " --config " + no_sp);
  EXPECT_THAT(no_sp_text.out, HasSubstr("note: training.tp_comm_overlap takes effect only with"));
  CliRun tp1 = cli("--workload " + workload("h100-sxm", "") + " --config " + write("tp1.json", R"({"zero": 1, "recompute": "full"})") +
                   " --json");
  ASSERT_EQ(tp1.status, 0) << tp1.out;
  EXPECT_FALSE(json::parse(tp1.out)["execution"].contains("tp_comm"));
  EXPECT_THAT(json::parse(tp1.out)["execution"]["tp_comm_note"].get<std::string>(), HasSubstr("(tp 1)"));
  // The output layer stays in bf16: FP8 carries most of the GEMM FLOPs, not all.
  EXPECT_GT(j["gemm_flops_share"]["fp8"].get<double>(), 0.8);
  EXPECT_NEAR(j["gemm_flops_share"]["fp8"].get<double>() + j["gemm_flops_share"]["bf16"].get<double>(), 1.0, 1e-9);
  CliRun blockwise = cli("--workload " + workload("h100-sxm", "blockwise") + " --config " + sp + " --json");
  ASSERT_EQ(blockwise.status, 0) << blockwise.out;
  EXPECT_EQ(json::parse(blockwise.out)["execution"]["fp8_scaling"], "per-block");
  EXPECT_EQ(json::parse(blockwise.out)["execution"]["fp8_recipe"], "blockwise");

  // A recipe the GPU cannot run is the pair's fault: both files are named.
  const std::string mx = workload("h100-sxm", "mxfp8");
  CliRun refused = cli("--workload " + mx + " --config " + sp);
  EXPECT_EQ(refused.status, 2);
  EXPECT_THAT(refused.out, AllOf(HasSubstr("is invalid with --workload '" + mx + "'"),
                                 HasSubstr("fp8_recipe mxfp8 needs tensor cores that scale blocks")));
}

TEST_F(SimulateCli, BadInputExitsWithTwoAndSaysWhy) {
  const std::string w = write("w.json", kWorkload);
  const std::string c = write("c.json", R"({"tp": 8, "pp": 3})");
  CliRun r = cli("--workload " + w + " --config " + c);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.out, HasSubstr("pp"));
  r = cli("--workload " +
          write("bad.json", R"({"model": {"preset": "nope"}, "training": {"global_batch": 8},
                                "cluster": {"gpu": "h100-sxm", "nodes": 1}})") +
          " --config " + c);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.out, HasSubstr("/model/preset"));
  EXPECT_EQ(cli("").status, 2);
  // A typo in a configuration key is not a default; a categorical value is one of its labels.
  r = cli("--workload " + w + " --config " + write("typo.json", R"({"tp": 8, "tpp": 2})"));
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.out, AllOf(HasSubstr("/tpp: not a parameter of the space 'llm'"), HasSubstr("tp, pp, dp")));
  r = cli("--workload " + w + " --config " + write("typo2.json", R"({"micro_bach": 2})"));
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.out, HasSubstr("/micro_bach: not a parameter of the space 'llm' (did you mean \"micro_batch\"?)"));
  r = cli("--workload " + w + " --config " + write("index.json", R"({"tp": 8, "recompute": 2})"));
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.out, HasSubstr("/recompute: expected one of none, selective, full, got 2"));
}

TEST_F(SimulateCli, ARefusedBatchLeavesTheOutFileAsItWas) {
  const std::string measured = write("measured.csv", "preset,gpu,gpus,global_batch,status,step_time_s\n"
                                                     "llama3-8b,h100-sxm,8,64,ok,1.0\n");
  const std::string out = (dir_ / "kept.csv").string();
  std::ofstream(out) << "an earlier result\n";
  CliRun r = cli("--batch " + measured + " --out " + out);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("drop or rename them"));
  std::ifstream kept(out);
  std::string line;
  std::getline(kept, line);
  EXPECT_EQ(line, "an earlier result");
  EXPECT_FALSE(std::filesystem::exists(out + ".partial"));
  // Nothing at the path before: nothing after.
  const std::string fresh = (dir_ / "fresh.csv").string();
  EXPECT_EQ(cli("--batch " + measured + " --out " + fresh).status, 2);
  EXPECT_FALSE(std::filesystem::exists(fresh));
}

// A pipe or a device as --out (a FIFO another program reads, /dev/null) is written into. Renamed
// over, it became a regular file (run as root, /dev/null itself), and a refused batch removed it.
TEST_F(SimulateCli, AnOutThatIsAPipeOrADeviceIsWrittenIntoNotReplaced) {
  EXPECT_TRUE(cotune::core::writes_in_place("/dev/null"));
  EXPECT_FALSE(cotune::core::writes_in_place(dir_.string()));
  EXPECT_FALSE(cotune::core::writes_in_place((dir_ / "absent.csv").string()));
  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(cotune::core::writes_in_place(fifo));
  // Holds the pipe open for reading from before the command starts (so its open for writing does
  // not wait) and reads what it writes until it has exited: never waits on a pipe the command
  // replaced or did not open.
  auto read_while = [&](const std::string& args, std::string* got) {
    got->clear();
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    // Without a reader the command's open for writing would wait forever: no command then.
    if (fd < 0) {
      ADD_FAILURE() << "cannot open " << fifo << " for reading";
      return CliRun{-1, ""};
    }
    std::atomic<bool> done{false};
    std::thread reader([&] {
      char buf[4096];
      for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) got->append(buf, size_t(n));
        else if (n == 0 && done) break;
        else std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    CliRun r = cli(args);
    done = true;
    reader.join();
    ::close(fd);
    return r;
  };
  const std::string in = write("in.csv", "preset,gpu,gpus,global_batch,tp,recompute\nllama3-8b,h100-sxm,8,64,2,full\n");
  std::string got;
  CliRun r = read_while("--batch " + in + " --out " + fifo, &got);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(got, HasSubstr("step_time_s"));
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_FALSE(fs::exists(fifo + ".partial"));
  // A refused batch leaves the pipe where it was.
  const std::string measured = write("measured.csv", "preset,gpu,gpus,global_batch,status,step_time_s\n"
                                                     "llama3-8b,h100-sxm,8,64,ok,1.0\n");
  r = read_while("--batch " + measured + " --out " + fifo, &got);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_TRUE(fs::is_fifo(fifo));
}

// A batch row's layout is its own space: --space-options is refused there. Rows that are not ok
// are counted on stderr when the result goes to a file, a cell the space refuses through its
// options is named as the column it came from, and a field the row lacks as the column to add. A
// mixture of experts without top_k routes to two experts in either form.
TEST_F(SimulateCli, BatchSaysWhatWentWrongAndAgreesWithTheSingleForm) {
  const std::string in = write("moe.csv",
                               "name,hidden,layers,heads,vocab,seq_len,experts,gpu,gpus,global_batch,ep,recompute,expert_groups\n"
                               "moe,1024,4,8,32000,1024,8,h100-sxm,8,64,8,none,\n"
                               "partial,1024,4,8,32000,1024,8,h100-sxm,8,64,8,partial,\n"
                               "groups,1024,4,8,32000,1024,8,h100-sxm,8,64,8,none,4\n");
  const std::string out = (dir_ / "moe-out.csv").string();
  CliRun r = cli("--batch " + in + " --space-options '{\"pp\": [1]}'");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.out, HasSubstr("--space-options: with --batch each row's layout is its own space"));
  r = cli("--batch " + in + " --out " + out);
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("simulate --batch: 2 row(s) not ok (status and reason in '" + out + "')"));
  std::ifstream f(out);
  std::stringstream text;
  text << f.rdbuf();
  const auto rows = parse_csv(text.str());
  ASSERT_EQ(rows.size(), 4u);
  const auto col = columns_of(rows[0]);
  EXPECT_EQ(rows[1][col("status")], "ok") << rows[1][col("reason")];
  EXPECT_THAT(rows[3][col("reason")], HasSubstr("column group_top_k (absent): "));
  EXPECT_THAT(rows[2][col("reason")], HasSubstr("column recompute ('partial'): "));
  EXPECT_THAT(rows[2][col("reason")], HasSubstr("space options/recompute: expected none, selective or full, got 'partial'"));
  const std::string w = write("moe.json", R"({"model": {"hidden": 1024, "layers": 4, "heads": 8, "vocab": 32000,
    "seq_len": 1024, "experts": 8}, "training": {"global_batch": 64}, "cluster": {"gpu": "h100-sxm", "nodes": 1}})");
  r = cli("--workload " + w + " --config " + write("moe-c.json", R"({"ep": 8, "dp": 8})") + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NEAR(json::parse(r.out)["step_time_s"].get<double>(), std::stod(rows[1][col("step_time_s")]), 1e-5);
}

// The FP8 recipe as a column or as the precision a log names: per-tensor scaling is faster on
// Blackwell than MXFP8 (its default there); a bf16 row's recipe, which Megatron-LM's argument dump
// writes for every run, is not read.
TEST_F(SimulateCli, BatchReadsTheFp8Recipe) {
  const std::string in = write("fp8.csv",
                               "name,preset,gpu,gpus,global_batch,zero,dtype,fp8_recipe\n"
                               "mx,llama3-8b,gb200,8,64,1,fp8,\n"
                               "tensorwise,llama3-8b,gb200,8,64,1,fp8,tensorwise\n"
                               "named,llama3-8b,gb200,8,64,1,fp8_cs,\n"
                               "h100-mx,llama3-8b,h100-sxm,8,64,1,mxfp8,\n"
                               "bf16,llama3-8b,gb200,8,64,1,bf16,mxfp8\n"
                               "both,llama3-8b,gb200,8,64,1,mxfp8,tensorwise\n");
  int status = 0;
  const auto rows = batch(in, "fp8-out.csv", &status);
  EXPECT_EQ(status, 1);  // MXFP8 on H100 is refused, and a recipe the dtype contradicts
  ASSERT_EQ(rows.size(), 7u);
  const auto col = columns_of(rows[0]);
  for (size_t i : {1, 2, 3, 5}) EXPECT_EQ(rows[i][col("status")], "ok") << rows[i][col("reason")];
  const double mx = std::stod(rows[1][col("step_time_s")]), tensorwise = std::stod(rows[2][col("step_time_s")]);
  EXPECT_GT(mx, 1.03 * tensorwise);
  EXPECT_EQ(rows[3][col("step_time_s")], rows[2][col("step_time_s")]);
  // The recipe each ran with: auto is MXFP8 on Blackwell; a bf16 row has none.
  EXPECT_EQ(rows[1][col("fp8_recipe_used")], "mxfp8");
  EXPECT_EQ(rows[2][col("fp8_recipe_used")], "tensorwise");
  EXPECT_EQ(rows[3][col("fp8_recipe_used")], "tensorwise");
  EXPECT_EQ(rows[5][col("fp8_recipe_used")], "");
  EXPECT_EQ(rows[4][col("fp8_recipe_used")], "");  // not timed
  EXPECT_EQ(rows[4][col("status")], "invalid");
  EXPECT_THAT(rows[4][col("reason")], HasSubstr("fp8_recipe mxfp8 needs tensor cores that scale blocks"));
  EXPECT_EQ(rows[6][col("status")], "invalid");
  EXPECT_THAT(rows[6][col("reason")], HasSubstr("column fp8_recipe: 'tensorwise' disagrees with the dtype 'mxfp8'"));
}

// Group-limited routing from a table's columns: DeepSeek-V3's preset routes within 4 of 8 groups, a
// row may say otherwise (1 group: over all experts), and the flex dispatcher then sends each token
// to more of the other nodes; groups that do not split the experts evenly are refused.
TEST_F(SimulateCli, BatchReadsGroupLimitedRouting) {
  const std::string in = write("groups.csv",
                               "name,preset,gpu,gpus,global_batch,tp,pp,ep,etp,zero,recompute,expert_groups,group_top_k,moe_dispatcher\n"
                               "preset,deepseek-v3,h100-sxm,1024,8192,2,8,64,1,1,full,,,flex\n"
                               "all,deepseek-v3,h100-sxm,1024,8192,2,8,64,1,1,full,1,1,flex\n"
                               "bad,deepseek-v3,h100-sxm,1024,8192,2,8,64,1,1,full,3,1,flex\n");
  int status = 0;
  const auto rows = batch(in, "groups-out.csv", &status);
  EXPECT_EQ(status, 1);
  ASSERT_EQ(rows.size(), 4u);
  const auto col = columns_of(rows[0]);
  for (size_t i : {1, 2}) EXPECT_EQ(rows[i][col("status")], "ok") << rows[i][col("reason")];
  EXPECT_LT(std::stod(rows[1][col("step_time_s")]), std::stod(rows[2][col("step_time_s")]));
  EXPECT_EQ(rows[3][col("status")], "invalid");
  EXPECT_THAT(rows[3][col("reason")], HasSubstr("expert_groups: must divide experts (256), got 3"));
}

// A published table names the FP8 recipe in its precision note (dtype_detail): MXFP8 as MXFP8, any
// other FP8 note as per-tensor scaling; a recipe column or a dtype that names one comes first, and a
// bf16 row's note says nothing of FP8.
TEST_F(SimulateCli, BatchReadsTheFp8RecipeOfAPublishedPrecisionNote) {
  const std::string in = write("detail.csv",
                               "name,preset,gpu,gpus,global_batch,zero,dtype,dtype_detail,fp8_recipe\n"
                               "mx,llama3-8b,gb200,8,64,1,fp8,MXFP8,\n"
                               "mx-dash,llama3-8b,gb200,8,64,1,fp8,FP8-MX,\n"
                               "cs,llama3-8b,gb200,8,64,1,fp8,FP8-CS,\n"
                               "plain,llama3-8b,gb200,8,64,1,fp8,\"FP8, primary value\",\n"
                               "blockwise,llama3-8b,gb200,8,64,1,fp8,FP8 blockwise per page footnote,\n"
                               "column-first,llama3-8b,gb200,8,64,1,fp8,MXFP8,tensorwise\n"
                               "dtype-first,llama3-8b,gb200,8,64,1,fp8_cs,MXFP8,\n"
                               "bf16,llama3-8b,gb200,8,64,1,bf16,MXFP8,\n");
  int status = 0;
  const auto rows = batch(in, "detail-out.csv", &status);
  EXPECT_EQ(status, 0);
  ASSERT_EQ(rows.size(), 9u);
  const auto col = columns_of(rows[0]);
  const std::vector<std::string> used = {"mxfp8",      "mxfp8",      "tensorwise", "tensorwise",
                                         "blockwise",  "tensorwise", "tensorwise", ""};
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][col("status")], "ok") << rows[i][col("reason")];
    EXPECT_EQ(rows[i][col("fp8_recipe_used")], used[i - 1]) << rows[i][col("name")];
  }
  EXPECT_GT(std::stod(rows[1][col("step_time_s")]), 1.03 * std::stod(rows[3][col("step_time_s")]));
}

// A published table's fsdp cell as PyTorch FSDP logs print it, mixed-precision and checkpointing
// words as trainers write them; a strategy the reader does not know is refused, naming the column.
TEST_F(SimulateCli, BatchReadsFsdpStrategiesAndTrainersWords) {
  const std::string in = write("fsdp.csv",
                               "name,preset,gpu,gpus,global_batch,dtype,recompute,fsdp\n"
                               "degree,llama3-8b,h100-sxm,8,64,bf16,full,8\n"
                               "full,llama3-8b,h100-sxm,8,64,amp_bf16,full,FULL_SHARD\n"
                               "hybrid,llama3-8b,h100-sxm,8,64,bf16-mixed,full,HYBRID_SHARD\n"
                               "grad-op,llama3-8b,h100-sxm,8,64,bfloat16,full,ShardingStrategy.SHARD_GRAD_OP\n"
                               "none,llama3-8b,h100-sxm,8,64,bf16,full,NO_SHARD\n"
                               "zero-degree,llama3-8b,h100-sxm,8,64,bf16,full,0\n"
                               "op,llama3-8b,h100-sxm,8,64,bf16-true,selective (op),FULL_SHARD\n"
                               "bad,llama3-8b,h100-sxm,8,64,bf16,full,SHARD_EVERYTHING\n"
                               "inf,llama3-8b,h100-sxm,8,64,bf16,full,inf\n");
  int status = 0;
  const auto rows = batch(in, "fsdp-out.csv", &status);
  EXPECT_EQ(status, 1);
  ASSERT_EQ(rows.size(), 10u);
  const auto col = columns_of(rows[0]);
  for (size_t i = 1; i <= 7; ++i) EXPECT_NE(rows[i][col("status")], "invalid") << rows[i][col("reason")];
  EXPECT_EQ(rows[9][col("status")], "invalid");
  EXPECT_THAT(rows[9][col("reason")], HasSubstr("got 'inf'"));
  // Full and hybrid sharding are the degree's ZeRO-3; SHARD_GRAD_OP keeps whole weights (more memory);
  // NO_SHARD and a degree of 0 keep everything whole (most).
  const auto mem = [&](size_t i) { return std::stod(rows[i][col("peak_mem_gib")]); };
  EXPECT_EQ(rows[2][col("step_time_s")], rows[1][col("step_time_s")]);
  EXPECT_EQ(rows[3][col("step_time_s")], rows[1][col("step_time_s")]);
  EXPECT_GT(mem(4), mem(1) + 5);
  EXPECT_GT(mem(5), mem(4) + 5);
  EXPECT_EQ(rows[6][col("peak_mem_gib")], rows[5][col("peak_mem_gib")]);
  EXPECT_LT(std::stod(rows[7][col("step_time_s")]), std::stod(rows[1][col("step_time_s")]));  // selective < full
  EXPECT_EQ(rows[8][col("status")], "invalid");
  EXPECT_THAT(rows[8][col("reason")], HasSubstr("column fsdp: expected a sharding degree (0: none) or a ShardingStrategy"));
  EXPECT_THAT(rows[8][col("reason")], HasSubstr("got 'SHARD_EVERYTHING'"));
}

// A published table's measured figures beside the model's would read as its answer: refused.
TEST_F(SimulateCli, BatchRefusesAPublishedTablesMeasuredColumns) {
  const std::string in = write("measured.csv",
                               "preset,gpu,gpus,global_batch,tokens_per_s_per_gpu,mfu_pct\n"
                               "llama3-8b,h100-sxm,8,64,9000,40\n");
  const CliRun r = cli("simulate --batch " + in);
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.out, HasSubstr("named like the output's or measured (tokens_per_s_per_gpu, mfu_pct)"));
}

// A bad cell is named as the column it came from, before the space's own words for the field.
TEST_F(SimulateCli, BatchReadsAPublishedTablesTaskAndAKorthikantiName) {
  // A published table's task column: a LoRA run freezes the base weights (no weight-gradient GEMMs,
  // no optimizer state for them), so it is faster than the pretraining and full fine-tuning rows of
  // the same layout. A published table names its model in a model column: Korthikanti et al.'s gpt-175b
  // is the preset gpt3-175b.
  const std::string in = write("tasks.csv",
                               "model,gpu,gpus,global_batch,tp,pp,dp,zero,recompute,task\n"
                               "llama3-8b,h100-sxm,8,64,1,1,8,1,full,pretrain\n"
                               "llama3-8b,h100-sxm,8,64,1,1,8,1,full,sft\n"
                               "llama3-8b,h100-sxm,8,64,1,1,8,1,full,lora\n"
                               "gpt-175b,a100-80gb,64,64,8,8,1,1,full,pretrain\n");
  int status = 0;
  const auto rows = batch(in, "tasks-out.csv", &status);
  ASSERT_EQ(rows.size(), 5u);
  const auto col = columns_of(rows[0]);
  for (size_t i = 1; i < rows.size(); ++i) ASSERT_EQ(rows[i][col("status")], "ok") << rows[i][col("reason")];
  const double pretrain = std::stod(rows[1][col("step_time_s")]), lora = std::stod(rows[3][col("step_time_s")]);
  EXPECT_EQ(rows[2][col("step_time_s")], rows[1][col("step_time_s")]);
  EXPECT_LT(lora, 0.9 * pretrain);
}

TEST_F(SimulateCli, BatchNamesTheCellABadFieldCameFrom) {
  const std::string in = write("cells.csv", "preset,gpu,gpus,global_batch,dtype,kernels\n"
                                            "llama3-8b,h100-sxm,8,64,bf17,\n"
                                            "llama3-8b,h100-sxm,8,64,bf16,eagr\n"
                                            "llama3-8b,h100-sxm,8,-4,bf16,\n");
  int status = 0;
  const auto rows = batch(in, "cells-out.csv", &status);
  EXPECT_EQ(status, 1);
  ASSERT_EQ(rows.size(), 4u);
  const auto& h = rows[0];
  const auto reason = std::find(h.begin(), h.end(), "reason") - h.begin();
  EXPECT_THAT(rows[1][reason], HasSubstr("column dtype ('bf17'): "));
  EXPECT_THAT(rows[1][reason], HasSubstr("expected bf16, fp16, fp8 or fp4"));
  EXPECT_THAT(rows[2][reason], HasSubstr("column kernels ('eagr'): "));
  EXPECT_THAT(rows[3][reason], HasSubstr("column global_batch: expected a whole number, got '-4' (a count or a degree "
                                         "cannot be negative)"));
}

TEST_F(SimulateCli, BatchWritesOneRowPerInputRow) {
  const std::string in = write("in.csv",
                               "name,hidden,layers,heads,kv_heads,ffn_hidden,vocab,seq_len,global_batch,gpu,gpus,tp,pp,"
                               "micro_batch,recompute,sp,zero\n"
                               "good,8192,80,64,8,28672,128256,8192,1024,h100-sxm,512,8,4,1,selective,true,1\n"
                               "bad-heads,8192,80,64,8,28672,128256,8192,1024,h100-sxm,512,3,1,1,none,false,0\n"
                               "bad-number,8192,80,64,8,28672,128256,8192,1024,h100-sxm,512,eight,4,1,none,false,0\n"
                               "too-big,8192,80,64,8,28672,128256,8192,1024,h100-sxm,512,1,1,1,none,false,0\n"
                               "\"a, b\",2304,24,24,,,,2048,512,a100-80gb,32,1,1,4,full,false,0\n");
  int status = 0;
  const auto rows = batch(in, "out.csv", &status);
  EXPECT_EQ(status, 1);  // some rows are not ok
  ASSERT_EQ(rows.size(), 6u);
  const auto col = columns_of(rows[0]);
  ASSERT_LT(col("status"), (long)rows[0].size());
  ASSERT_LT(col("reason"), (long)rows[0].size());
  EXPECT_EQ(rows[1][col("name")], "good");
  EXPECT_EQ(rows[1][col("status")], "ok") << rows[1][col("reason")];
  EXPECT_GT(std::stod(rows[1][col("step_time_s")]), 0);
  EXPECT_GT(std::stod(rows[1][col("mfu")]), 0.1);
  EXPECT_EQ(rows[2][col("status")], "invalid");
  EXPECT_THAT(rows[2][col("reason")], HasSubstr("gpus (512) is not divisible by tp*pp*cp (3)"));
  EXPECT_EQ(rows[3][col("status")], "invalid");
  EXPECT_THAT(rows[3][col("reason")], HasSubstr("column tp: expected a number, got 'eight'"));
  EXPECT_EQ(rows[4][col("status")], "oom");
  EXPECT_THAT(rows[4][col("reason")], HasSubstr("out of memory"));
  EXPECT_EQ(rows[5][col("name")], "a, b");  // copied through, quoting kept
  EXPECT_EQ(rows[5][col("status")], "ok") << rows[5][col("reason")];

  CliRun to_stdout = cli("--batch " + in);
  EXPECT_EQ(parse_csv(to_stdout.out).size(), 6u) << to_stdout.out;

  // The same first row under Megatron-LM's argument names times alike, and keeps those names.
  const std::string megatron = write("megatron.csv",
                                     "hidden_size,num_layers,num_attention_heads,num_query_groups,ffn_hidden_size,"
                                     "padded_vocab_size,seq_length,global_batch_size,gpu_type,world_size,"
                                     "tensor_model_parallel_size,pipeline_model_parallel_size,micro_batch_size,"
                                     "recompute_granularity,sequence_parallel,zero\n"
                                     "8192,80,64,8,28672,128256,8192,1024,h100-sxm,512,8,4,1,selective,true,1\n");
  auto named = parse_csv(cli("--batch " + megatron).out);
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0][0], "hidden_size");
  const auto at = std::find(named[0].begin(), named[0].end(), "step_time_s") - named[0].begin();
  ASSERT_LT(at, (long)named[0].size());
  EXPECT_EQ(named[1][at], rows[1][col("step_time_s")]);
}
