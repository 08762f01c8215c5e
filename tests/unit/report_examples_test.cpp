// The report of the example studies, through the real CLI: each study runs a few trials on the
// simulator (`cotune run`), then `cotune report` writes its page, and every section renders with no
// internal error: no "could not be produced", and the predictor's partial dependence is drawn.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/cli_process.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using cotune::testing::read_file;
using cotune::testing::spawn_cotune;
using cotune::testing::wait_exit_within;

// Every example but the ads workload, whose validity check makes even a short run take 20 s (a
// minute and a half under ASan); the browser test (tests/integration/report_browser_test.sh)
// renders its report.
std::vector<std::string> example_studies() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(COTUNE_SOURCE_DIR "/examples/studies"))
    if (e.path().extension() == ".json" && e.path().stem() != "recsys-ads-128xh100")
      names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

class ExampleReport : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cotune-example-report-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    setenv("COTUNE_PLUGIN_PATH", COTUNE_PLUGIN_DIR, 1);
  }
  void TearDown() override { fs::remove_all(dir_); }

  int cotune(const std::vector<std::string>& args) {
    const pid_t pid = spawn_cotune(dir_, args, dir_ + "/out.txt", dir_ + "/err.txt");
    return wait_exit_within(pid, std::chrono::minutes(3));
  }
  std::string dir_;
};

TEST_P(ExampleReport, EverySectionRendersWithoutAnInternalError) {
  std::ifstream in(COTUNE_SOURCE_DIR "/examples/studies/" + GetParam() + ".json");
  json study = json::parse(in);
  study["budget"] = {{"trials", 6}};  // a few trials are enough for every section
  std::ofstream(dir_ + "/study.json") << study.dump(2);

  ASSERT_EQ(cotune({"run", "study.json", "--store", "s.db"}), 0) << read_file(dir_ + "/err.txt");
  const std::string name = study["name"].get<std::string>();
  ASSERT_EQ(cotune({"report", name, "--store", "s.db", "--out", "r.html"}), 0) << read_file(dir_ + "/err.txt");
  const std::string html = read_file(dir_ + "/r.html");
  for (const char* id : {"answer", "study", "best", "convergence", "prediction", "parameters", "parallel", "trials"})
    EXPECT_NE(html.find(std::string("<section id=\"") + id + "\">"), std::string::npos) << id;
  EXPECT_EQ(html.find("could not be produced"), std::string::npos);
  EXPECT_EQ(html.find("No partial dependence"), std::string::npos)
      << html.substr(html.find("<section id=\"parameters\">"), 20000);
  EXPECT_NE(html.find(">predictor<"), std::string::npos) << "the partial dependence curve is drawn";
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleReport, ::testing::ValuesIn(example_studies()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

}  // namespace
