// The study file: valid files with their defaults, the workload given by path, the content hash, and
// every validation error with the JSON pointer of its field. Also the canonical JSON helpers.
#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "studyfile/json_checks.hpp"

namespace cotune::core {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

const json kMinimal = json::parse(R"({
  "name": "llama-8b-64gpu",
  "workload": {"model": {"family": "llama", "layers": 32}, "cluster": {"nodes": 8, "gpus_per_node": 8}},
  "objective": {"metric": "tokens_per_s", "direction": "maximize"},
  "budget": {"trials": 50}
})");

// The message of the UserError that parsing `doc` throws ("" when it parses).
std::string error_of(const json& doc) {
  try {
    parse_study_file(doc.dump(2), "study.json", "");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

std::string error_of_text(const std::string& text) {
  try {
    parse_study_file(text, "study.json", "");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

json patched(const json& patch) {
  json doc = kMinimal;
  doc.merge_patch(patch);  // null removes a field
  return doc;
}

class StudyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "cotune-study-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& relative, const std::string& text) {
    fs::path p = fs::path(dir_) / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::string dir_;
};

TEST(StudyFile, AMinimalFileGetsTheDocumentedDefaults) {
  StudySpec s = parse_study_file(kMinimal.dump(2), "study.json", "");
  EXPECT_EQ(s.file, "study.json");
  EXPECT_EQ(s.name, "llama-8b-64gpu");
  EXPECT_EQ(s.description, "");
  EXPECT_EQ(s.workload, kMinimal["workload"]);
  EXPECT_TRUE(s.workload_file.empty());
  EXPECT_EQ(s.space.name, "llm");
  EXPECT_EQ(s.space.options, json::object());
  EXPECT_EQ(s.predictor.name, "krr");
  EXPECT_EQ(s.predictor.prior, Prior::kAnalytic);
  EXPECT_EQ(s.searcher.name, "reinforce");
  EXPECT_EQ(s.executor.name, "sim");
  ASSERT_EQ(s.objectives.size(), 1u);
  EXPECT_FALSE(s.pareto());
  EXPECT_EQ(s.objectives[0].metric, "tokens_per_s");
  EXPECT_EQ(s.objectives[0].direction, Direction::kMaximize);
  EXPECT_TRUE(s.objectives[0].constraints.empty());
  EXPECT_EQ(s.budget.trials, 50);
  EXPECT_FALSE(s.budget.wall_time_s);
  EXPECT_FALSE(s.budget.gpu_hours);
  EXPECT_FALSE(s.budget.target);
  EXPECT_FALSE(s.budget.patience);
  EXPECT_EQ(s.parallel, 1);
  EXPECT_EQ(s.seed, 1u);
  EXPECT_TRUE(s.plugin_paths.empty());
  EXPECT_EQ(s.format, RenderFormat::kJson);
  EXPECT_EQ(s.on_stop, OnStop::kCancel);
  EXPECT_EQ(s.text, kMinimal.dump(2));
  EXPECT_EQ(s.hash.size(), 64u);
  EXPECT_EQ(s.workload_key(), workload_key(kMinimal["workload"], "llm"));
}

TEST(StudyFile, EveryFieldIsRead) {
  json doc = json::parse(R"({
    "name": "pareto", "description": "speed vs cost",
    "workload": {"model": "dlrm"},
    "space": {"name": "recsys", "options": {"max_tables": 12}},
    "predictor": {"name": "mlp", "options": {"hidden": [64, 64]}, "prior": "none"},
    "searcher": "evolution",
    "executor": {"name": "slurm", "options": {"partition": "gpu"}},
    "objectives": [
      {"metric": "samples_per_s", "direction": "maximize",
       "constraints": [{"metric": "peak_mem_gb", "max": 80}, {"metric": "gpus", "min": 8, "max": 64}]},
      {"metric": "cost_per_sample", "direction": "minimize"}],
    "budget": {"trials": 200, "wall_time_s": 3600.5, "gpu_hours": 12, "target": 1e6, "patience": 25},
    "parallel": 4, "seed": 18446744073709551615,
    "plugin_paths": ["plugins", "/opt/cotune/plugins"],
    "format": "torchtitan", "on_stop": "wait", "deadlines": {"executor": 30, "searcher": 7.5}
  })");
  StudySpec s = parse_study_file(doc.dump(), "dir/study.json", "dir");
  EXPECT_EQ(s.description, "speed vs cost");
  EXPECT_EQ(s.space.name, "recsys");
  EXPECT_EQ(s.space.options["max_tables"], 12);
  EXPECT_EQ(s.predictor.name, "mlp");
  EXPECT_EQ(s.predictor.prior, Prior::kNone);
  doc["predictor"]["prior"] = "roofline";
  EXPECT_EQ(parse_study_file(doc.dump(), "dir/study.json", "dir").predictor.prior, Prior::kRoofline);
  EXPECT_EQ(s.predictor.options["hidden"], json::parse("[64, 64]"));
  EXPECT_EQ(s.searcher.name, "evolution");
  EXPECT_EQ(s.searcher.options, json::object());
  EXPECT_EQ(s.executor.options["partition"], "gpu");
  ASSERT_TRUE(s.pareto());
  EXPECT_EQ(s.objectives[1].direction, Direction::kMinimize);
  ASSERT_EQ(s.objectives[0].constraints.size(), 2u);
  EXPECT_EQ(s.objectives[0].constraints[0].max, 80.0);
  EXPECT_FALSE(s.objectives[0].constraints[0].min);
  EXPECT_EQ(s.objectives[0].constraints[1].min, 8.0);
  EXPECT_EQ(s.budget.wall_time_s, 3600.5);
  EXPECT_EQ(s.budget.gpu_hours, 12.0);
  EXPECT_EQ(s.budget.target, 1e6);
  EXPECT_EQ(s.budget.patience, 25);
  EXPECT_EQ(s.parallel, 4);
  EXPECT_EQ(s.seed, 18446744073709551615ull);
  EXPECT_EQ(s.plugin_paths, (std::vector<std::string>{"dir/plugins", "/opt/cotune/plugins"}));
  EXPECT_EQ(s.format, RenderFormat::kTorchtitan);
  EXPECT_EQ(s.on_stop, OnStop::kWait);
  EXPECT_EQ(s.deadlines.executor_s, 30.0);
  EXPECT_EQ(s.deadlines.searcher_s, 7.5);
  EXPECT_EQ(s.deadlines.predictor_s, CallDeadlines{}.predictor_s) << "the default where not given";
  json objectives = s.objectives_json();
  EXPECT_EQ(objectives[0]["constraints"][1], json::parse(R"({"metric": "gpus", "min": 8.0, "max": 64.0})"));
  EXPECT_EQ(objectives[1]["direction"], "minimize");
}

TEST(StudyFile, TheHashIgnoresLayoutButNotContent) {
  std::string compact = kMinimal.dump();
  std::string spaced = kMinimal.dump(4);
  std::string reordered = R"({"budget": {"trials": 50}, "objective": {"direction": "maximize", "metric": "tokens_per_s"},
    "workload": {"cluster": {"gpus_per_node": 8, "nodes": 8}, "model": {"layers": 32, "family": "llama"}},
    "name": "llama-8b-64gpu"})";
  std::string hash = parse_study_file(compact, "a.json", "").hash;
  EXPECT_EQ(parse_study_file(spaced, "b.json", "").hash, hash);
  EXPECT_EQ(parse_study_file(reordered, "c.json", "").hash, hash);
  EXPECT_NE(parse_study_file(patched({{"searcher", "random"}}).dump(), "d.json", "").hash, hash);
  // What may change between runs of a study (its budget) leaves the hash; the legacy hash, which
  // stores of earlier versions hold, covers it.
  const StudySpec more = parse_study_file(patched({{"budget", {{"trials", 51}}}}).dump(), "e.json", "");
  EXPECT_EQ(more.hash, hash);
  EXPECT_NE(more.legacy_hash, parse_study_file(compact, "a.json", "").legacy_hash);
}

TEST_F(StudyFileTest, TheWorkloadMayBeAPathRelativeToTheStudyFile) {
  write("workloads/llama.json", kMinimal["workload"].dump(2));
  json doc = patched({{"workload", "workloads/llama.json"}});
  std::string study = write("study.json", doc.dump(2));
  // Loaded from elsewhere: the path resolves against the study file, not the working directory.
  StudySpec s = load_study_file(study);
  EXPECT_EQ(s.workload, kMinimal["workload"]);
  EXPECT_EQ(fs::canonical(s.workload_file), fs::canonical(fs::path(dir_) / "workloads/llama.json"));
  EXPECT_EQ(s.workload_key(), workload_key(kMinimal["workload"], "llm"));
  // Same meaning as the inline workload: same hash. A changed workload file changes it.
  EXPECT_EQ(s.hash, parse_study_file(kMinimal.dump(), "x.json", "").hash);
  json changed = kMinimal["workload"];
  changed["cluster"]["nodes"] = 16;
  write("workloads/llama.json", changed.dump());
  EXPECT_NE(load_study_file(study).hash, s.hash);
}

TEST_F(StudyFileTest, WorkloadFileProblemsNameTheFileAndTheField) {
  std::string study = write("study.json", patched({{"workload", "missing.json"}}).dump());
  try {
    load_study_file(study);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr(study + ": /workload: cannot read workload file"));
    EXPECT_THAT(e.what(), HasSubstr("missing.json"));
  }
  write("bad.json", "{\n  \"model\": \"x\",\n  oops\n}");
  study = write("study.json", patched({{"workload", "bad.json"}}).dump());
  try {
    load_study_file(study);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/workload: "));
    EXPECT_THAT(e.what(), HasSubstr("bad.json:3:3: not valid JSON"));
  }
  write("list.json", "[1, 2]");
  study = write("study.json", patched({{"workload", "list.json"}}).dump());
  try {
    load_study_file(study);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/workload: the workload file"));
    EXPECT_THAT(e.what(), HasSubstr("expected a JSON object"));
  }
}

TEST_F(StudyFileTest, AMissingStudyFileIsAClearError) {
  try {
    load_study_file(dir_ + "/nope.json");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot read study file " + dir_ + "/nope.json"));
  }
}

TEST(StudyFile, InvalidJsonGivesLineAndColumn) {
  std::string text = "{\n  \"name\": \"x\",\n  \"budget\": {\"trials\": 5,}\n}";
  EXPECT_THAT(error_of_text(text), HasSubstr("study.json:3:26: not valid JSON"));
  EXPECT_THAT(error_of_text(""), HasSubstr("study.json:1:1: not valid JSON"));
}

TEST(StudyFile, AFieldGivenTwiceIsAnError) {
  std::string text = R"({"name": "a", "budget": {"trials": 5, "trials": 6}})";
  EXPECT_EQ(error_of_text(text), "study.json: /budget/trials: this field is given twice in the same object (only one may be given)");
  EXPECT_THAT(error_of_text(R"({"name": "a", "x": [{"k": 1}, {"k": 2, "k": 3}]})"), HasSubstr("/x/1/k: this field is given twice"));
}

TEST(StudyFile, UnknownFieldsAreErrorsThatListTheKnownOnes) {
  std::string e = error_of(patched({{"budgte", {{"trials", 5}}}}));
  EXPECT_THAT(e, HasSubstr("study.json: /budgte: unknown field (did you mean \"budget\"?)"));
  EXPECT_THAT(e, HasSubstr("known fields here: name, description, workload, space, predictor, searcher, executor, "
                           "objective, objectives, budget, parallel, seed, plugin_paths, format, on_stop"));
  EXPECT_THAT(error_of(patched({{"space", {{"name", "llm"}, {"option", json::object()}}}})),
              HasSubstr("/space/option: unknown field (did you mean \"options\"?)"));
  EXPECT_THAT(error_of(patched({{"budget", {{"trials", 5}, {"max_trials", 9}}}})),
              HasSubstr("/budget/max_trials: unknown field"));
}

struct BadField {
  json patch;
  std::string message;  // expected substring of the error
};

class StudyFileErrors : public ::testing::TestWithParam<BadField> {};

TEST_P(StudyFileErrors, PointAtTheFieldAndSayWhatWasExpected) {
  EXPECT_THAT(error_of(patched(GetParam().patch)), HasSubstr(GetParam().message)) << GetParam().patch.dump();
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, StudyFileErrors,
    ::testing::Values(
        BadField{{{"budget", {{"trials", -3}}}}, "study.json: /budget/trials: expected a positive integer, got -3"},
        BadField{{{"budget", {{"trials", 2.5}}}}, "/budget/trials: expected a positive integer, got 2.5"},
        BadField{{{"budget", {{"trials", "10"}}}}, "/budget/trials: expected a positive integer, got \"10\""},
        BadField{{{"budget", {{"trials", nullptr}, {"patience", 3}}}},
                 "/budget: expected at least one of trials, wall_time_s, gpu_hours"},
        BadField{{{"budget", nullptr}}, "study.json: /budget: required field missing"},
        BadField{{{"budget", 7}}, "/budget: expected an object with at least one of"},
        BadField{{{"budget", {{"wall_time_s", 0}}}}, "/budget/wall_time_s: expected a positive number, got 0"},
        BadField{{{"budget", {{"gpu_hours", -1.5}}}}, "/budget/gpu_hours: expected a positive number, got -1.5"},
        BadField{{{"budget", {{"target", "fast"}}}}, "/budget/target: expected a number, got \"fast\""},
        BadField{{{"budget", {{"patience", 0}}}}, "/budget/patience: expected a positive integer, got 0"},
        BadField{{{"budget", {{"max_unavailable", 0}}}}, "/budget/max_unavailable: expected a positive integer, got 0"},
        BadField{{{"name", nullptr}}, "study.json: /name: required field missing: expected a non-empty string"},
        BadField{{{"name", ""}}, "/name: expected a non-empty string, got \"\""},
        BadField{{{"name", 5}}, "/name: expected a non-empty string, got 5"},
        BadField{{{"description", false}}, "/description: expected a string, got false"},
        BadField{{{"workload", nullptr}}, "/workload: required field missing: expected an object (the workload)"},
        BadField{{{"workload", 5}}, "/workload: expected an object (the workload) or a string path"},
        BadField{{{"workload", ""}}, "/workload: expected an object (the workload) or a string path"},
        BadField{{{"objective", nullptr}}, "/objective: required field missing"},
        BadField{{{"objectives", json::array({{{"metric", "a"}, {"direction", "maximize"}},
                                              {{"metric", "b"}, {"direction", "minimize"}}})}},
                 "/objectives: give either \"objective\" or \"objectives\", not both"},
        BadField{{{"objective", nullptr}, {"objectives", json::array({{{"metric", "a"}, {"direction", "maximize"}}})}},
                 "/objectives: expected an array of two objectives (a Pareto study), got [{"},
        BadField{{{"objective", nullptr},
                  {"objectives", json::array({{{"metric", "a"}, {"direction", "maximize"}},
                                              {{"metric", "a"}, {"direction", "minimize"}}})}},
                 "/objectives/1/metric: expected a metric other than the first objective's"},
        BadField{{{"objective", nullptr},
                  {"objectives", json::array({{{"metric", "a"}, {"direction", "maximize"}}, {{"metric", "b"}}})}},
                 "/objectives/1/direction: required field missing"},
        BadField{{{"objective", {{"direction", "up"}}}},
                 "/objective/direction: expected one of \"maximize\" or \"minimize\", got \"up\""},
        BadField{{{"objective", {{"metric", nullptr}}}}, "/objective/metric: required field missing"},
        BadField{{{"objective", {{"goal", 1}}}}, "/objective/goal: unknown field"},
        BadField{{{"objective", "tokens_per_s"}}, "/objective: expected an object {\"metric\""},
        BadField{{{"objective", {{"constraints", {{"metric", "mem"}}}}}},
                 "/objective/constraints: expected an array of constraints"},
        BadField{{{"objective", {{"constraints", json::array({{{"metric", "mem"}}})}}}},
                 "/objective/constraints/0: expected a bound: \"max\", \"min\" or both"},
        BadField{{{"objective", {{"constraints", json::array({{{"metric", "mem"}, {"min", 5}, {"max", 1}}})}}}},
                 "/objective/constraints/0/min: expected min <= max"},
        BadField{{{"objective", {{"constraints", json::array({{{"max", 1}}})}}}},
                 "/objective/constraints/0/metric: required field missing"},
        BadField{{{"objective", {{"constraints", json::array({{{"metric", "mem"}, {"max", "80GB"}}})}}}},
                 "/objective/constraints/0/max: expected a number, got \"80GB\""},
        BadField{{{"name", "a/b"}}, "/name: expected 1-100 letters, digits, '.', '_' or '-', starting with a letter"},
        BadField{{{"name", "x y"}}, "(the name is a file name and a shell word), got \"x y\""},
        BadField{{{"name", ".hidden"}}, "starting with a letter or digit"},
        BadField{{{"name", std::string(101, 'n')}}, "/name: expected 1-100"},
        BadField{{{"name", "tab\there"}}, "got \"tab\\x09here\""},
        BadField{{{"parallel", 0}}, "study.json: /parallel: expected an integer >= 1, got 0"},
        BadField{{{"parallel", "4"}}, "/parallel: expected an integer >= 1, got \"4\""},
        BadField{{{"seed", -1}}, "/seed: expected a non-negative integer, got -1"},
        BadField{{{"seed", 1.5}}, "/seed: expected a non-negative integer, got 1.5"},
        BadField{{{"format", "pytorch"}},
                 "/format: unknown format 'pytorch' (expected megatron, torchtitan, nemo, deepspeed, torchrec, json"},
        BadField{{{"format", "megatorn@core_r0.12.0"}}, "/format: unknown format 'megatorn@core_r0.12.0' (did you mean \"megatron\"?)"},
        BadField{{{"format", "megatron@"}}, "/format: 'megatron@' names no version after '@'"},
        BadField{{{"format", "json@v1"}}, "/format: json has no versions (got 'json@v1')"},
        BadField{{{"format", 3}}, "/format: expected a framework name, optionally with @version, got 3"},
        BadField{{{"on_stop", "kill"}}, "/on_stop: expected one of \"cancel\" or \"wait\", got \"kill\""},
        BadField{{{"deadlines", 60}}, "/deadlines: expected an object of seconds per plugin kind"},
        BadField{{{"deadlines", {{"executor", 0}}}}, "/deadlines/executor: expected a positive number, got 0"},
        BadField{{{"deadlines", {{"exector", 5}}}}, "/deadlines/exector: unknown field (did you mean \"executor\"?)"},
        BadField{{{"predictor", {{"prior", "magic"}}}},
                 "/predictor/prior: expected one of \"analytic\", \"roofline\" or \"none\", got \"magic\""},
        BadField{{{"predictor", {{"name", 3}}}}, "/predictor/name: expected a non-empty string, got 3"},
        BadField{{{"searcher", {{"prior", "none"}}}}, "/searcher/prior: unknown field"},
        BadField{{{"space", {{"options", 3}}}}, "/space/options: expected an object, got 3"},
        BadField{{{"space", ""}}, "/space: expected a non-empty string, got \"\""},
        BadField{{{"executor", 7}}, "/executor: expected an object {\"name\": ..., \"options\": {...}} or a component name"},
        BadField{{{"plugin_paths", "plugins"}}, "/plugin_paths: expected an array of directory or library paths"},
        BadField{{{"plugin_paths", {"ok", ""}}}, "/plugin_paths/1: expected a non-empty string, got \"\""}));

TEST(StudyFile, TheTopLevelMustBeAnObject) {
  EXPECT_EQ(error_of_text("[1, 2]"), "study.json: expected a JSON object (the study) at the top level, got [1,2]");
}

TEST(CanonicalJson, OneSpellingPerValue) {
  json a = json::parse(R"({"b": 2.0, "a": {"y": [1, 2.5, "x"], "x": null}, "c": true})");
  json b = json::parse(R"({"c": true, "a": {"x": null, "y": [1.0, 2.5, "x"]}, "b": 2})");
  EXPECT_EQ(canonical_json(a), R"({"a":{"x":null,"y":[1,2.5,"x"]},"b":2,"c":true})");
  EXPECT_EQ(canonical_json(a), canonical_json(b));
  EXPECT_EQ(config_key(a), config_key(b));
  EXPECT_NE(canonical_json(json::parse("[1, 2]")), canonical_json(json::parse("[2, 1]")));  // order of arrays counts
  EXPECT_EQ(canonical_json(json::parse("1e20")), "1e+20");  // beyond 2^53 stays a float
  EXPECT_EQ(canonical_json(json::parse("-0.0")), "0");
  EXPECT_EQ(canonical_json(json::parse(R"("h\u00e9")")), "\"h\xC3\xA9\"");
}

TEST(CanonicalJson, WorkloadKeysDependOnWorkloadAndSpace) {
  json w = {{"model", "llama"}, {"nodes", 8}};
  std::string k = workload_key(w, "llm");
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k, workload_key(json::parse(R"({"nodes": 8.0, "model": "llama"})"), "llm"));
  EXPECT_NE(k, workload_key(w, "recsys"));
  EXPECT_NE(k, workload_key({{"model", "llama"}, {"nodes", 16}}, "llm"));
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
TEST(LikelyMeant, FindsTheNameATypoResembles) {
  const std::vector<std::string> names = {"step_time_s", "tokens_per_s", "mfu", "peak_mem_gib"};
  EXPECT_EQ(likely_meant("tokens_per_sec", names), "tokens_per_s");
  EXPECT_EQ(likely_meant("tokens_per_second", names), "tokens_per_s") << "spelled out further";
  EXPECT_EQ(likely_meant("peak_mem_gb", names), "peak_mem_gib");
  EXPECT_EQ(likely_meant("MFU", names), "mfu") << "case does not count";
  EXPECT_EQ(likely_meant("Peak-Mem-GiB", names), "peak_mem_gib") << "nor '-' for '_'";
  EXPECT_EQ(likely_meant("time_step_s", names), "step_time_s") << "the same words in another order";
  EXPECT_EQ(likely_meant("mfu_pct", names), "") << "another word";
  EXPECT_EQ(likely_meant("val_loss", names), "");
  EXPECT_EQ(likely_meant("step", names), "") << "too short a prefix to be a guess";
}

// Plugins' form of it (cotune::support): the hint an error appends, from the list it prints.
TEST(LikelyMeant, PluginsAppendTheHintFromTheListTheyPrint) {
  EXPECT_EQ(support::did_you_mean_listed("sed", "noise, seed, hardware"), " (did you mean \"seed\"?)");
  EXPECT_EQ(support::did_you_mean_listed("Hard-Ware", " noise,seed , hardware "), " (did you mean \"hardware\"?)");
  EXPECT_EQ(support::did_you_mean_listed("colour", "noise, seed, hardware"), "");
  EXPECT_EQ(support::did_you_mean_listed("seed", ""), "");
  EXPECT_EQ(support::did_you_mean("gpu", {"gpus", "nodes"}), " (did you mean \"gpus\"?)");
}

}  // namespace cotune::core
