// `cotune export` as a user runs it (the real binary, plugins and store): which trial it takes
// (--trial, --recommended, --best, and the default), --out, framework versions, and a target's
// refusal of a configuration it cannot launch; a recsys study exported as a TorchRec plan.
#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/store/store.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/cli_process.hpp"

namespace cotune::core {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using cotune::testing::read_file;

class ExportCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cotune-export-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_ = dir_ + "/cotune.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A 16-trial Llama-3 8B study on 32 H100 (sim executor with 10 % noise), run to its end. With these
  // seeds noise lifts another trial above the one the predictor recommends.
  void run_llm_study() {
    const json doc = {{"name", "llm"},
                      {"workload", json::parse(R"({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 256},
                                                  "cluster": {"gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8}})")},
                      {"searcher", "random"},
                      {"executor", {{"name", "sim"}, {"options", {{"noise", 0.1}, {"seed", 3}}}}},
                      {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
                      {"budget", {{"trials", 16}}},
                      {"parallel", 2},
                      {"seed", 1},
                      {"format", "megatron"}};
    std::ofstream(dir_ + "/llm.json") << doc.dump(2);
    ASSERT_EQ(run({"run", dir_ + "/llm.json", "--store", store_}), 0) << err();
  }

  int run(const std::vector<std::string>& args) {
    return cotune::testing::wait_exit(
        cotune::testing::spawn_cotune(dir_, args, dir_ + "/stdout", dir_ + "/stderr"));
  }
  std::string out() const { return read_file(dir_ + "/stdout"); }
  std::string err() const { return read_file(dir_ + "/stderr"); }

  // The canonical key of `cotune export STUDY --format json ARGS...`.
  std::string exported_key(const std::string& study, std::vector<std::string> args) {
    std::vector<std::string> all = {"export", study, "--format", "json", "--store", store_};
    all.insert(all.end(), args.begin(), args.end());
    EXPECT_EQ(run(all), 0) << err();
    return config_key(json::parse(out()));
  }

  std::string dir_, store_;
};

TEST_F(ExportCli, TakesTheTrialAskedForAndTheRecommendedOneByDefault) {
  run_llm_study();
  Store store(store_);
  const StudyRecord study = *store.find_study("llm");
  const std::vector<TrialRecord> trials = store.trials(study.id);
  ASSERT_TRUE(study.recommended_trial_id.has_value()) << "a finished single-objective run stores its recommendation";
  auto by_id = [&](std::int64_t id) {
    for (const TrialRecord& t : trials)
      if (t.id == id) return t;
    ADD_FAILURE() << "no trial id " << id;
    return trials.front();
  };
  const TrialRecord recommended = by_id(*study.recommended_trial_id);
  const TrialRecord best = by_id(store.best_trial(study.id)->id);
  ASSERT_NE(recommended.id, best.id) << "the seeds should make the recommendation another trial";

  EXPECT_EQ(exported_key("llm", {}), recommended.config_key);
  EXPECT_EQ(exported_key("llm", {"--recommended"}), recommended.config_key);
  EXPECT_EQ(exported_key("llm", {"--best"}), best.config_key);
  EXPECT_EQ(exported_key("llm", {"--trial", "5"}), trials[4].config_key);

  EXPECT_EQ(run({"export", "llm", "--trial", "99", "--store", store_}), 2);
  EXPECT_THAT(err(), HasSubstr("study 'llm' has no trial 99"));
  EXPECT_EQ(run({"export", "llm", "--trial", "2", "--best", "--store", store_}), 2);
  EXPECT_THAT(err(), HasSubstr("give one of them"));
  EXPECT_EQ(run({"export", "llm", "--trial", "0", "--store", store_}), 2);
  EXPECT_THAT(err(), HasSubstr("--trial: expected a trial number"));
}

TEST_F(ExportCli, WritesTheNamedVersionToAFileAndRefusesWhatTheFrameworkRefuses) {
  run_llm_study();
  const std::string launch = dir_ + "/launch.sh";
  ASSERT_EQ(run({"export", "llm", "--format", "megatron@core_v0.19.0", "--best", "--out", launch, "--store", store_}), 0)
      << err();
  EXPECT_EQ(out(), "") << "with --out nothing goes to standard output";
  EXPECT_THAT(err(), HasSubstr("written to " + launch));
  const std::string script = read_file(launch);
  EXPECT_THAT(script, HasSubstr("# Megatron-LM core_v0.19.0 (5be96267)"));
  EXPECT_THAT(script, HasSubstr("MEGATRON_ARGS=(\n"));
  EXPECT_FALSE(fs::exists(launch + ".tmp"));

  EXPECT_EQ(run({"export", "llm", "--out", dir_, "--store", store_}), 2);
  EXPECT_THAT(err(), HasSubstr("is a directory"));
  EXPECT_EQ(run({"export", "llm", "--out", dir_ + "/nodir/x.sh", "--store", store_}), 2);
  EXPECT_THAT(err(), HasSubstr("the directory " + dir_ + "/nodir does not exist"));
  EXPECT_EQ(run({"export", "llm", "--out", "", "--store", store_}), 2);
  EXPECT_THAT(err(), HasSubstr("--out: expected a file name"));

  EXPECT_EQ(run({"export", "llm", "--format", "megatron@v9", "--store", store_}), 2);
  EXPECT_THAT(err(), HasSubstr("megatron@v9"));
  EXPECT_THAT(err(), HasSubstr("core_v0.19.0"));  // the versions it knows

  // Every trial of this study runs the distributed optimizer (zero 1) or none; TorchTitan has no
  // optimizer-only sharding, so a zero 1 trial over several data-parallel ranks cannot go there.
  Store store(store_);
  std::int64_t zero1 = 0;
  for (const TrialRecord& t : store.trials(store.find_study("llm")->id)) {
    const json c = json::parse(t.config_json);
    if (c["zero"] == 1 && c["dp"].get<int>() * c["cp"].get<int>() > 1) zero1 = t.seq;
  }
  ASSERT_GT(zero1, 0) << "the study measured no zero 1 trial";
  EXPECT_EQ(run({"export", "llm", "--format", "torchtitan@v0.2.2", "--trial", std::to_string(zero1), "--store", store_}),
            2);
  EXPECT_THAT(err(), HasSubstr("TorchTitan v0.2.2"));
  EXPECT_THAT(err(), HasSubstr("no optimizer-only sharding"));
}

TEST_F(ExportCli, AStudyWhoseTargetRefusesEveryConfigurationSaysSo) {
  // TorchTitan has no optimizer-only sharding: a space of zero 1 over 32 data-parallel ranks alone
  // has nothing it launches.
  const json doc = {{"name", "titan"},
                    {"workload", json::parse(R"({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 256},
                                                "cluster": {"gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8}})")},
                    {"space", {{"name", "llm"}, {"options", {{"zero", {1}}, {"tp", {1}}, {"pp", {1}}, {"cp", {1}}}}}},
                    {"searcher", "random"},
                    {"executor", "sim"},
                    {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
                    {"budget", {{"trials", 4}}},
                    {"format", "torchtitan@v0.2.2"}};
  std::ofstream(dir_ + "/titan.json") << doc.dump(2);
  EXPECT_EQ(run({"run", dir_ + "/titan.json", "--store", store_}), 2);
  EXPECT_THAT(err(), HasSubstr("/format torchtitan@v0.2.2 refuses every configuration"));
  EXPECT_THAT(err(), HasSubstr("no optimizer-only sharding"));
}

TEST_F(ExportCli, ARecsysStudyExportsATorchRecPlan) {
  json doc = json::parse(read_file(COTUNE_SOURCE_DIR "/examples/studies/recsys-criteo-16xh100.json"));
  doc["budget"] = {{"trials", 6}};
  doc["format"] = "torchrec";
  std::ofstream(dir_ + "/recsys.json") << doc.dump(2);
  ASSERT_EQ(run({"run", dir_ + "/recsys.json", "--store", store_}), 0) << err();
  EXPECT_THAT(out(), HasSubstr("launch: cotune export recsys-criteo-16xh100 --format torchrec"));

  const std::string plan_path = dir_ + "/plan.json";
  ASSERT_EQ(run({"export", "recsys-criteo-16xh100", "--out", plan_path, "--store", store_}), 0) << err();
  const json plan = json::parse(read_file(plan_path));
  ASSERT_TRUE(plan["world_size"].is_number_integer()) << plan.dump();
  EXPECT_TRUE(plan["local_world_size"].is_number_integer());
  const json& tables = plan["plan"]["model.sparse_arch.embedding_bag_collection"];
  ASSERT_EQ(tables.size(), 26u) << "one entry per Criteo table";
  for (const auto& [name, t] : tables.items()) {
    EXPECT_TRUE(t.contains("sharding_type")) << name;
    for (const json& r : t.value("ranks", json::array())) EXPECT_TRUE(r.is_number_integer()) << name;
  }

  // Its own configuration as JSON: whole numbers as integers.
  ASSERT_EQ(run({"export", "recsys-criteo-16xh100", "--format", "json", "--store", store_}), 0) << err();
  const json config = json::parse(out());
  EXPECT_TRUE(config["batch_per_gpu"].is_number_integer()) << config.dump();
  EXPECT_TRUE(config["gpus"].is_number_integer()) << config.dump();

  EXPECT_EQ(run({"export", "recsys-criteo-16xh100", "--format", "megatron", "--store", store_}), 2);
  EXPECT_THAT(err(), HasSubstr("torchrec@main"));
}

}  // namespace
}  // namespace cotune::core
