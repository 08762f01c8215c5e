// Broken inputs on purpose, through the real `cotune` binary: the corpus in tests/corpus/bad-inputs/
// (study files, workload files, hardware descriptions, configurations, CSV imports) plus what is
// made at test time (deep nesting, 1 GB files as sparse files). Each must end with a clean error
// status (not a signal, not a hang) and a message naming the file and the field.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/cli_process.hpp"

namespace cotune::core {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::ScratchDir;

const std::string kCorpus = std::string(COTUNE_SOURCE_DIR) + "/tests/corpus/bad-inputs";
constexpr auto kHangLimit = std::chrono::seconds(60);  // far beyond any answer; only a hang reaches it

struct BadInput {
  std::vector<std::string> args;  // "{store}" stands for a scratch store
  int status;                     // 2: refused as bad input; 1: rows rejected
  std::vector<std::string> says;  // each must appear in stderr
};

void PrintTo(const BadInput& c, std::ostream* os) {
  for (const std::string& a : c.args) *os << a << " ";
}

class BadInputs : public ::testing::TestWithParam<BadInput> {
 protected:
  // Runs cotune in the corpus directory (so messages name the files as given).
  void expect_clean_error(const BadInput& c, const std::string& cwd) {
    std::vector<std::string> args;
    for (const std::string& a : c.args) args.push_back(a == "{store}" ? dir_.file("cotune.db") : a);
    pid_t pid = testing::spawn_cotune(cwd, args, dir_.file("out"), dir_.file("err"));
    int code = testing::wait_exit_within(pid, kHangLimit);
    const std::string err = read_file(dir_.file("err"));
    ASSERT_NE(code, -1) << "no answer (a hang)";
    EXPECT_LT(code, 128) << "ended by signal " << code - 128 << ":\n" << err;
    EXPECT_EQ(code, c.status) << err;
    for (const std::string& s : c.says) EXPECT_NE(err.find(s), std::string::npos) << "'" << s << "' in:\n" << err;
  }

  ScratchDir dir_{"bad-input"};
};

TEST_P(BadInputs, CleanErrorNamingFileAndField) { expect_clean_error(GetParam(), kCorpus); }

const std::vector<BadInput> kCorpusCases = {
    // study files
    {{"run", "study-wrong-type.json", "--store", "{store}"}, 2, {"study-wrong-type.json", "/budget/trials", "many"}},
    {{"run", "study-missing-objective.json", "--store", "{store}"}, 2, {"study-missing-objective.json", "/objective"}},
    {{"run", "study-huge-number.json", "--store", "{store}"}, 2, {"study-huge-number.json:1:", "1e400", "too large"}},
    {{"run", "study-huge-integer.json", "--store", "{store}"}, 2, {"study-huge-integer.json", "/parallel"}},
    {{"run", "study-negative-parallel.json", "--store", "{store}"}, 2, {"study-negative-parallel.json", "/parallel", "-4"}},
    {{"run", "study-nan.json", "--store", "{store}"}, 2, {"study-nan.json:1:", "not valid JSON", "noise"}},
    {{"run", "study-unknown-gpu.json", "--store", "{store}"}, 2, {"study-unknown-gpu.json", "/cluster/gpu", "h900-imaginary"}},
    {{"run", "study-invalid-utf8.json", "--store", "{store}"}, 2, {"study-invalid-utf8.json:1:", "UTF-8"}},
    {{"run", "study-not-an-object.json", "--store", "{store}"}, 2, {"study-not-an-object.json", "JSON object"}},
    {{"run", "study-empty.json", "--store", "{store}"}, 2, {"study-empty.json:1:1", "not valid JSON"}},
    {{"run", "study-with-bad-workload-file.json", "--store", "{store}"}, 2,
     {"study-with-bad-workload-file.json", "workload-negative-nodes.json", "/cluster/nodes", "-8"}},
    {{"run", "study-missing-workload-file.json", "--store", "{store}"}, 2,
     {"study-missing-workload-file.json", "/workload", "no-such-workload.json"}},
    // workload files and hardware descriptions (cluster.gpu_spec)
    {{"simulate", "--workload", "workload-negative-nodes.json", "--config", "config-ok.json"}, 2,
     {"workload-negative-nodes.json", "/cluster/nodes"}},
    {{"simulate", "--workload", "workload-negative-seq-len.json", "--config", "config-ok.json"}, 2,
     {"workload-negative-seq-len.json", "model/seq_len", "-2048"}},
    {{"simulate", "--workload", "workload-huge-batch.json", "--config", "config-ok.json"}, 2,
     {"workload-huge-batch.json", "training/global_batch"}},
    {{"simulate", "--workload", "workload-zero-gpus-per-node.json", "--config", "config-ok.json"}, 2,
     {"workload-zero-gpus-per-node.json", "/cluster/gpus_per_node"}},
    {{"simulate", "--workload", "hardware-negative-memory.json", "--config", "config-ok.json"}, 2,
     {"hardware-negative-memory.json", "/cluster/gpu_spec/hbm_gib", "-80"}},
    {{"simulate", "--workload", "hardware-huge-numbers.json", "--config", "config-ok.json"}, 2,
     {"hardware-huge-numbers.json", "/cluster/gpu_spec/"}},
    {{"simulate", "--workload", "hardware-wrong-type.json", "--config", "config-ok.json"}, 2,
     {"hardware-wrong-type.json", "/cluster/gpu_spec", "fast"}},
    {{"simulate", "--workload", "hardware-zero-bandwidth.json", "--config", "config-ok.json"}, 2,
     {"hardware-zero-bandwidth.json", "/cluster/gpu_spec/"}},
    {{"simulate", "--workload", "workload-ok.json", "--config", "config-wrong-type.json"}, 2,
     {"config-wrong-type.json", "tp", "two"}},
    {{"simulate", "--workload", "workload-ok.json", "--config", "config-negative.json"}, 2,
     {"config-negative.json", "tp", "-2"}},
    {{"simulate", "--workload", "study-invalid-utf8.json", "--config", "config-ok.json"}, 2,
     {"study-invalid-utf8.json:1:", "UTF-8"}},
    // CSV imports: a rejected row names the file, the line and the column (status 1, the others kept)
    {{"import", "runs-wrong-type.csv", "--space", "llm", "--store", "{store}"}, 1, {"runs-wrong-type.csv: line 3", "tp", "two"}},
    {{"import", "runs-missing-column.csv", "--space", "llm", "--store", "{store}"}, 1,
     {"runs-missing-column.csv: line 2", "global_batch", "missing"}},
    {{"import", "runs-negative.csv", "--space", "llm", "--store", "{store}"}, 1, {"runs-negative.csv: line 2", "tp", "-2"}},
    {{"import", "runs-nan.csv", "--space", "llm", "--store", "{store}"}, 1, {"runs-nan.csv: line 2", "step_time_s", "NaN"}},
    {{"import", "runs-huge-number.csv", "--space", "llm", "--store", "{store}"}, 1,
     {"runs-huge-number.csv: line 2", "step_time_s", "1e999"}},
    {{"import", "runs-huge-integer.csv", "--space", "llm", "--store", "{store}"}, 1,
     {"runs-huge-integer.csv: line 2", "layers"}},
    {{"import", "runs-unknown-gpu.csv", "--space", "llm", "--store", "{store}"}, 1,
     {"runs-unknown-gpu.csv: line 2", "gpu", "h900-imaginary"}},
    {{"import", "runs-invalid-utf8.csv", "--space", "llm", "--store", "{store}"}, 1, {"runs-invalid-utf8.csv: line 2", "gpu"}},
    {{"import", "runs-unclosed-quote.csv", "--space", "llm", "--store", "{store}"}, 2,
     {"runs-unclosed-quote.csv: line 2", "not closed"}},
    {{"simulate", "--batch", "batch-unclosed-quote.csv"}, 2, {"batch-unclosed-quote.csv: line 2", "not closed"}},
};

INSTANTIATE_TEST_SUITE_P(Corpus, BadInputs, ::testing::ValuesIn(kCorpusCases));

// Inputs too large to keep in the repository, made here.
class GeneratedBadInputs : public BadInputs {
 protected:
  // A file of `size` bytes that starts with `head`: sparse, so 1 GB costs nothing on disk.
  std::string sparse_file(const std::string& name, const std::string& head, off_t size) {
    std::string path = dir_.file(name);
    std::ofstream(path) << head;
    EXPECT_EQ(::truncate(path.c_str(), size), 0);
    return path;
  }
  void expect(const std::vector<std::string>& args, int status, const std::vector<std::string>& says) {
    expect_clean_error(BadInput{args, status, says}, dir_.path());
  }
  static constexpr off_t kGigabyte = off_t(1) << 30;
};

TEST_F(GeneratedBadInputs, DeeplyNestedJson) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::ofstream(dir_.file("deep-study.json")) << R"({"name": "deep", "workload": )" << deep << "}";
  expect({"run", "deep-study.json", "--store", "{store}"}, 2, {"deep-study.json", "/workload/0/0", "nested more than"});
  std::ofstream(dir_.file("deep-workload.json")) << R"({"model": {"preset": )" << deep << "}}";
  std::ofstream(dir_.file("config.json")) << R"({"tp": 1})";
  expect({"simulate", "--workload", "deep-workload.json", "--config", "config.json"}, 2,
         {"deep-workload.json", "/model/preset", "nested more than"});
}

TEST_F(GeneratedBadInputs, OneGigabyteLineIsRefusedEarly) {
  sparse_file("huge-study.json", R"({"name": ")", kGigabyte);
  expect({"run", "huge-study.json", "--store", "{store}"}, 2, {"huge-study.json", "1073741824 bytes", "at most"});
  sparse_file("huge-workload.json", "{", kGigabyte);
  std::ofstream(dir_.file("config.json")) << R"({"tp": 1})";
  expect({"simulate", "--workload", "huge-workload.json", "--config", "config.json"}, 2, {"huge-workload.json", "at most"});
  sparse_file("huge-runs.csv", "hidden,layers,heads,global_batch,gpus\n4096,", kGigabyte);
  expect({"import", "huge-runs.csv", "--space", "llm", "--store", "{store}"}, 2, {"huge-runs.csv: line 2", "longer than"});
  expect({"simulate", "--batch", "huge-runs.csv"}, 2, {"huge-runs.csv: line 2", "longer than"});
  EXPECT_FALSE(fs::exists(dir_.file("cotune.db")) && fs::file_size(dir_.file("cotune.db")) > (1u << 20));
}

}  // namespace
}  // namespace cotune::core
