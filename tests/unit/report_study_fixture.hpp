// A store holding a study filled through the real Store API: configurations sampled by the real llm
// space plugin, measured by the performance model (as the sim executor would), with predictions,
// plus failed and oom trials whose texts hold markup. Shared by the report and serve tests.
#ifndef COTUNE_TESTS_REPORT_STUDY_FIXTURE_HPP_
#define COTUNE_TESTS_REPORT_STUDY_FIXTURE_HPP_

#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/studyfile/study_file.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>
#include <vector>

namespace cotune::testing {

inline const char* kMarkup = "<script>alert('x')</script>";

inline nlohmann::json report_study_doc(const std::string& name, bool pareto, const std::string& metric = "tokens_per_s",
                                       const std::string& gpu = "h100-sxm") {
  nlohmann::json doc = {
      {"name", name},
      {"description", std::string("report test ") + kMarkup},
      {"workload",
       {{"model", {{"preset", "llama3-8b"}}},
        {"training", {{"global_batch", 256}}},
        {"cluster", {{"gpu", gpu}, {"nodes", 4}, {"gpus_per_node", 8}}}}},
      {"space",
       {{"name", "llm"},
        {"options", nlohmann::json::parse(R"({"tp": [1, 2, 4, 8], "pp": [1, 2], "cp": [1], "vpp": [1], "zero": [1],
                                               "micro_batch": [1, 2]})")}}},
      {"predictor", {{"name", "krr"}}},
      {"searcher", "random"},
      {"executor", {{"name", "sim"}}},
      {"budget", {{"trials", 40}}},
      {"format", "megatron"}};
  if (pareto)
    doc["objectives"] = nlohmann::json::array({{{"metric", "tokens_per_s"}, {"direction", "maximize"}},
                                              {{"metric", "peak_mem_gib"}, {"direction", "minimize"}}});
  else
    doc["objective"] = {{"metric", metric}, {"direction", "maximize"}};
  return doc;
}

// Fills `store` with study `name`: `ok` measured trials, one oom and one failed trial, maximising
// `metric` (tokens_per_s or mfu). Returns the number of trials added.
inline int fill_report_study(core::Store& store, const std::string& dir, const std::string& name, int ok,
                             bool pareto = false, const std::string& metric = "tokens_per_s",
                             const std::string& gpu = "h100-sxm") {
  using namespace cotune::core;
  setenv("COTUNE_PLUGIN_PATH", COTUNE_PLUGIN_DIR, 1);
  // The study file carries a name the rule accepts; the store gets `name` itself, as a store written
  // before the name rule may hold any name (what reads the store must still escape it).
  StudySpec spec = parse_study_file(report_study_doc("fixture", pareto, metric, gpu).dump(2), dir + "/study.json", dir);
  spec.name = name;
  NewStudy n;
  n.name = spec.name;
  n.study_json = stored_study_json(spec);
  n.study_hash = spec.hash;
  n.workload_key = spec.workload_key();
  n.space = spec.space.name;
  n.objective_json = spec.objectives_json().dump();
  n.direction = spec.objectives.front().direction;
  n.environment_json = R"({"host": "test-host", "note": "<b>not bold</b>"})";
  StudyRecord study = store.create_study(n);

  Registry registry;
  load_study_plugins(registry, spec);
  std::unique_ptr<Space> space = make_study_space(registry, spec);
  const size_t d = space->num_params();
  std::vector<double> configs(static_cast<size_t>(ok + 2) * 4 * d);
  size_t got = space->sample(7, static_cast<size_t>(ok + 2) * 4, configs.data());
  int added = 0, measured = 0;
  for (size_t i = 0; i < got && added < ok + 2; ++i) {
    const double* c = &configs[i * d];
    NewTrial t;
    t.config_key = space->key(c);
    t.config_json = space->render(c, COTUNE_RENDER_JSON);
    t.status = TrialStatus::kRunning;
    t.executor = "sim";
    const cotune_trace& trace = space->lower(c);
    cotune_sim_result r{};
    r.struct_size = sizeof r;
    perf::simulate(trace, &r);
    const double objective = metric == "mfu" ? r.mfu : r.tokens_per_s;
    t.predicted = objective * (1.0 + 0.05 * static_cast<double>(i % 5));
    std::optional<TrialId> id = store.add_trial(study.id, t);
    if (!id) continue;  // the sampler repeated a configuration
    ++added;
    TrialOutcome out;
    if (measured < ok) {
      ++measured;
      nlohmann::json m = {{"step_time_s", r.step_time_s},
                          {"tokens_per_s", r.tokens_per_s},
                          {"mfu", r.mfu},
                          {"peak_mem_gib", r.peak_memory_bytes / 1073741824.0},
                          {"gpus", trace.gpus}};
      out.metrics_json = m.dump();
      out.objective = objective;
    } else if (added == ok + 1) {
      out.status = TrialStatus::kOom;
      out.error = "CUDA out of memory " + std::string(kMarkup);
    } else {
      out.status = TrialStatus::kFailed;
      out.error = "exit status 1 & more";
    }
    store.finish_trial(id->id, out);
  }
  return added;
}

}  // namespace cotune::testing

#endif  // COTUNE_TESTS_REPORT_STUDY_FIXTURE_HPP_
