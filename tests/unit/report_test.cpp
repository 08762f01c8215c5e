// The HTML study report from a real store (trials recorded through the Store API) and the real llm
// space and krr predictor plugins: its sections, charts, tables, escaping and the `cotune report`
// command.
#include <cotune/core/errors.hpp>
#include <cotune/core/report/study_html.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/run/study_setup.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "unit/report_study_fixture.hpp"

namespace cotune::core::report {
namespace {
namespace fs = std::filesystem;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// The HTML between <section id="ID"> and its </section>.
std::string section(const std::string& html, const std::string& id) {
  size_t start = html.find("<section id=\"" + id + "\">");
  if (start == std::string::npos) return "";
  return html.substr(start, html.find("</section>", start) - start);
}

class Report : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cotune-report-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_path_ = dir_ + "/cotune.db";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_, store_path_;
};

TEST_F(Report, HasEverySectionWithChartsAndARowPerTrial) {
  Store store(store_path_);
  const int trials = testing::fill_report_study(store, dir_, "llama", 30);
  ASSERT_EQ(trials, 32);
  std::string html = study_report_html(store, "llama");

  for (const char* id :
       {"answer", "study", "best", "convergence", "prediction", "parameters", "parallel", "breakdown", "failures",
        "trials"})
    EXPECT_NE(html.find(std::string("<section id=\"") + id + "\">"), std::string::npos) << id;
  EXPECT_EQ(html.find("<section id=\"pareto\">"), std::string::npos);  // one objective
  EXPECT_LT(html.find("<section id=\"answer\">"), html.find("<section id=\"study\">")) << "the answer comes first";

  // The answer: the best configuration with its value, against the first trial and the space's
  // default layout, the search cost and the launch arguments in the study's format.
  std::string answer = section(html, "answer");
  EXPECT_NE(answer.find("tokens_per_s <strong>"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Against the first feasible measured trial"), std::string::npos) << answer;
  EXPECT_NE(answer.find("default layout (tp=1 pp=1"), std::string::npos) << answer;
  // An oom trial is not a failed one, and the simulator's answers cost no GPU time.
  EXPECT_NE(answer.find("Search cost: 32 trials measured (1 out of memory, 1 failed), no GPU time: the performance "
                        "model answered them."),
            std::string::npos)
      << answer;
  // The memory estimate's word on the default layout is said as the estimate's, not as a fact.
  EXPECT_NE(answer.find(") does not fit by the memory estimate (out of memory: needs"), std::string::npos) << answer;
  EXPECT_NE(answer.find("--tensor-model-parallel-size"), std::string::npos) << answer;
  EXPECT_EQ(html.find("could not be produced"), std::string::npos) << html;
  EXPECT_EQ(html.find("could not be loaded"), std::string::npos);

  // Self-contained: no script, nothing fetched.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"), std::string::npos);

  // One row per trial in the table of all trials, with MFU, memory and the note a trial ended with.
  std::string all = section(html, "trials");
  EXPECT_EQ(count(all, "<tr>") - 1, static_cast<size_t>(trials));  // minus the header row
  EXPECT_NE(all.find("<th>mfu</th><th>peak_mem_gib</th>"), std::string::npos);
  EXPECT_NE(all.find("exit status 1 &amp; more"), std::string::npos);

  // Facts: the workload, the environment fingerprint, the objective and the budget.
  std::string facts = section(html, "study");
  EXPECT_NE(facts.find("llama3-8b"), std::string::npos);
  EXPECT_NE(facts.find("test-host"), std::string::npos);
  EXPECT_NE(facts.find("&lt;b&gt;not bold&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(facts.find("maximize tokens_per_s"), std::string::npos);
  EXPECT_NE(facts.find("32 of 40 trials"), std::string::npos);

  // Best configurations with Megatron-LM launch arguments.
  std::string best = section(html, "best");
  EXPECT_EQ(count(best, "<tr>") - 1, 10u);
  EXPECT_NE(best.find("Megatron-LM"), std::string::npos);
  EXPECT_NE(best.find("--tensor-model-parallel-size"), std::string::npos);

  // Convergence against random search's exact expectation (the space is small).
  std::string conv = section(html, "convergence");
  EXPECT_NE(conv.find("<svg"), std::string::npos);
  EXPECT_EQ(count(conv, "<polyline"), 2u);
  EXPECT_NE(conv.find("random search (expected)"), std::string::npos);

  // Predicted against measured: a point per trial with both, tau and MAPE.
  std::string pred = section(html, "prediction");
  EXPECT_EQ(count(pred, "<circle"), 30u);
  EXPECT_NE(pred.find("Kendall's tau"), std::string::npos);
  EXPECT_NE(pred.find("MAPE"), std::string::npos);

  // A chart per varying parameter, with the predictor's partial dependence.
  std::string params = section(html, "parameters");
  EXPECT_GE(count(params, "<svg"), 3u);
  EXPECT_NE(params.find(">tp<"), std::string::npos);
  EXPECT_NE(params.find(">predictor<"), std::string::npos);
  EXPECT_EQ(params.find("No partial dependence"), std::string::npos) << params;
  // The importance of each varying parameter, as shares that add up to 100 %.
  const size_t bars = params.find("Importance of each parameter");
  ASSERT_NE(bars, std::string::npos);
  const std::string bar_chart = params.substr(bars, params.find("</svg>", bars) - bars);
  EXPECT_GE(count(bar_chart, "class=\"bar\""), 2u);
  EXPECT_NE(bar_chart.find(">tp<"), std::string::npos);

  // Parallel coordinates: one line per measured trial, the best one marked.
  std::string parallel = section(html, "parallel");
  EXPECT_EQ(count(parallel, "<polyline"), 30u);
  EXPECT_EQ(count(parallel, "(best)"), 1u);
  EXPECT_NE(parallel.find(">tokens_per_s (max)<"), std::string::npos);

  // The step-time breakdown: compute at least.
  std::string bd = section(html, "breakdown");
  EXPECT_GE(count(bd, "class=\"segment\""), 1u);
  EXPECT_NE(bd.find("compute: "), std::string::npos);

  // The failed and oom trials with their reasons, escaped.
  std::string fail = section(html, "failures");
  EXPECT_EQ(count(fail, "<tr>") - 1, 2u);
  EXPECT_NE(fail.find("CUDA out of memory &lt;script&gt;"), std::string::npos);
  EXPECT_NE(fail.find("exit status 1 &amp; more"), std::string::npos);
}

// A default layout no trial measured is compared by the model's estimates of both configurations:
// a measurement against an estimate would carry the model's error on the machine.
TEST_F(Report, AnUnmeasuredDefaultLayoutIsComparedEstimateToEstimate) {
  Store store(store_path_);
  testing::fill_report_study(store, dir_, "roomy", 3, false, "tokens_per_s", "b200");
  const std::string answer = section(study_report_html(store, "roomy"), "answer");
  EXPECT_NE(answer.find("No trial measured the space&#39;s default layout (tp=1 pp=1"), std::string::npos) << answer;
  EXPECT_NE(answer.find("the performance model times it at tokens_per_s "), std::string::npos) << answer;
  EXPECT_NE(answer.find("estimates of both"), std::string::npos) << answer;
}

// A trial that measured the space's default layout outranks the memory estimate's word on it: the
// answer compares against that measurement.
TEST_F(Report, AMeasuredDefaultLayoutIsComparedAsMeasured) {
  using namespace cotune::core;
  Store store(store_path_);
  testing::fill_report_study(store, dir_, "llama", 10);
  const StudySpec spec =
      parse_study_file(testing::report_study_doc("fixture", false).dump(2), dir_ + "/study.json", dir_);
  Registry registry;
  load_study_plugins(registry, spec);
  std::unique_ptr<Space> space = make_study_space(registry, spec);
  const std::vector<double> defaults = space->parse("{}");
  ASSERT_FALSE(space->explain(defaults.data()).empty()) << "the fixture's default layout should not fit by the estimate";
  NewTrial t;
  t.config_key = space->key(defaults.data());
  t.config_json = space->render(defaults.data(), COTUNE_RENDER_JSON);
  t.status = TrialStatus::kRunning;
  t.executor = "sim";
  const std::optional<TrialId> id = store.add_trial(store.find_study("llama")->id, t);
  ASSERT_TRUE(id.has_value());
  TrialOutcome out;
  out.metrics_json = R"({"tokens_per_s": 1000, "step_time_s": 2000})";
  out.objective = 1000;
  store.finish_trial(id->id, out);
  const std::string answer = section(study_report_html(store, "llama"), "answer");
  EXPECT_NE(answer.find("), measured in trial " + std::to_string(id->seq) + " at tokens_per_s 1000: "), std::string::npos)
      << answer;
  EXPECT_EQ(answer.find("does not fit by the memory estimate"), std::string::npos) << answer;
}

// An objective below 1 (MFU) has negative logs: the partial dependence is fitted on them with the
// predictor told not to take the log again, as the study loop does.
TEST_F(Report, PartialDependenceWorksForAnObjectiveBelowOne) {
  Store store(store_path_);
  testing::fill_report_study(store, dir_, "mfu", 20, false, "mfu");
  const std::string params = section(study_report_html(store, "mfu"), "parameters");
  EXPECT_NE(params.find(">predictor<"), std::string::npos);
  EXPECT_EQ(params.find("No partial dependence"), std::string::npos) << params;
}

TEST_F(Report, TwoObjectivesShowTheParetoFront) {
  Store store(store_path_);
  testing::fill_report_study(store, dir_, "pareto", 20, true);
  std::string html = study_report_html(store, "pareto");
  std::string front = section(html, "pareto");
  ASSERT_FALSE(front.empty());
  EXPECT_EQ(count(front, "<circle"), 20u);
  EXPECT_GE(count(front, "#d62728"), 2u);  // the front's line and its points
  EXPECT_NE(section(html, "best").find("Pareto"), std::string::npos);
}

TEST_F(Report, StudyWithoutTrialsStillRenders) {
  Store store(store_path_);
  testing::fill_report_study(store, dir_, "empty", 0);
  std::string html = study_report_html(store, "empty");
  EXPECT_NE(html.find("No feasible measured configuration yet"), std::string::npos);
  EXPECT_NE(html.find("No trial has both a prediction and a measurement yet"), std::string::npos);
  EXPECT_EQ(html.find("could not be produced"), std::string::npos);
}

TEST_F(Report, UnknownStudyIsAUserError) {
  Store store(store_path_);
  try {
    study_report_html(store, "nope");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no study named 'nope'"), std::string::npos);
  }
}

TEST_F(Report, IndexListsStudiesWithEscapedLinks) {
  Store store(store_path_);
  testing::fill_report_study(store, dir_, "a<b", 3);
  std::string html = studies_index_html(store, [](const std::string& n) { return "/studies/" + n; });
  EXPECT_NE(html.find("<a href=\"/studies/a&lt;b\">a&lt;b</a>"), std::string::npos);
  EXPECT_NE(html.find("3 ok"), std::string::npos);
}

TEST_F(Report, CommandWritesTheFile) {
  {
    Store store(store_path_);
    testing::fill_report_study(store, dir_, "cli", 5);
  }
  const std::string out = dir_ + "/out.html";
  std::string cmd = std::string(COTUNE_CLI) + " report cli --store " + store_path_ + " -o " + out + " > " + dir_ + "/log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str().rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(text.str().find("<section id=\"trials\">"), std::string::npos);
  EXPECT_FALSE(fs::exists(out + ".tmp"));

  std::string bad = std::string(COTUNE_CLI) + " report missing --store " + store_path_ + " -o " + out + " > " + dir_ +
                    "/log2 2>&1";
  int rc = std::system(bad.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
}

}  // namespace
}  // namespace cotune::core::report
