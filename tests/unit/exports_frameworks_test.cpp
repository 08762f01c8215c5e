// Every export of every example study, for every framework version its space targets, checked
// against what that framework accepts (tests/support/framework_check.hpp, with the reference data
// of ../shared/data/frameworks): the space is narrowed to the target with Space::set_target, and
// each of its valid configurations (all of them on a small grid, else 2,000 drawn) is rendered in
// the target's format, checked, and compared with the configuration and the workload it came from.
#include "support/framework_check.hpp"

#include <cotune/core/abi/components.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/studyfile/study_file.hpp>
#include <cotune/core/run/study_setup.hpp>
#include <cotune/cotune.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

using cotune::core::Registry;
using cotune::core::Space;
using cotune::testing::CheckResult;
using cotune::testing::FrameworkData;
using nlohmann::json;

namespace {

struct Target {
  const char* space;
  const char* framework;
  const char* version;
  int32_t format;
};

const Target kTargets[] = {
    {"llm", "megatron", "main", COTUNE_RENDER_MEGATRON},   {"llm", "megatron", "core_v0.19.0", COTUNE_RENDER_MEGATRON},
    {"llm", "torchtitan", "main", COTUNE_RENDER_TORCHTITAN}, {"llm", "torchtitan", "v0.2.2", COTUNE_RENDER_TORCHTITAN},
    {"llm", "torchtitan", "v0.1.0", COTUNE_RENDER_TORCHTITAN}, {"llm", "nemo", "main", COTUNE_RENDER_NEMO},
    {"llm", "deepspeed", "master", COTUNE_RENDER_DEEPSPEED}, {"llm", "deepspeed", "v0.19.5", COTUNE_RENDER_DEEPSPEED},
    {"recsys", "torchrec", "main", COTUNE_RENDER_TORCHREC},
};

constexpr size_t kSample = 2000;             // configurations checked per study and target at most
// ... for the recsys space, whose every check and render runs the sharding planner (a plan of the
// 500-table ads workload takes about 0.1 s to make, render and check, so its grid is drawn from,
// not enumerated): 100 plans of 500 tables each still cover every sharding choice many times.
constexpr size_t kSampleRecsys = 100;
constexpr double kEnumerateBelow = 200000;   // grids this small are enumerated (check() over every point)

// The example studies, and studies under tests/fixtures/exports that reach what no example does
// (overlapped expert-parallel communication).
std::vector<std::string> example_studies() {
  std::vector<std::string> paths;
  for (const char* dir : {COTUNE_SOURCE_DIR "/examples/studies", COTUNE_SOURCE_DIR "/tests/fixtures/exports"})
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".json") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::string study_name(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// The valid configurations to check (rows of space.num_params() values): every valid point of a
// small grid, evenly thinned to `limit`, else `limit` drawn by Space::sample.
std::vector<double> configurations(const Space& space, size_t limit, std::string* how) {
  const size_t d = space.num_params();
  std::vector<std::vector<double>> domains;
  double size = 1;
  for (const auto& p : space.params()) {
    domains.push_back(p.domain());
    size *= std::max<double>(1, static_cast<double>(domains.back().size()));
    if (domains.back().empty()) size = kEnumerateBelow + 1;  // a float parameter: draw instead
  }
  std::vector<double> out;
  if (size > kEnumerateBelow || limit == kSampleRecsys) {
    out.resize(limit * d);
    out.resize(space.sample(1, limit, out.data()) * d);
    *how = "drawn";
    return out;
  }
  const size_t total = static_cast<size_t>(size);
  std::vector<double> grid(total * d);
  for (size_t i = 0; i < total; ++i) {
    size_t rest = i;
    for (size_t j = 0; j < d; ++j) {
      grid[i * d + j] = domains[j][rest % domains[j].size()];
      rest /= domains[j].size();
    }
  }
  std::vector<int32_t> valid(total, 0);
  if (total > 0) space.check(grid.data(), total, valid.data());
  const size_t n = static_cast<size_t>(std::count(valid.begin(), valid.end(), 1));
  const size_t stride = std::max<size_t>(1, (n + limit - 1) / limit);
  for (size_t i = 0, k = 0; i < total; ++i) {
    if (!valid[i]) continue;
    if (k++ % stride == 0) out.insert(out.end(), grid.begin() + i * d, grid.begin() + (i + 1) * d);
  }
  *how = "enumerated (" + std::to_string(n) + " valid of " + std::to_string(total) + ")";
  return out;
}

// Facts of the workload an export must carry as well: the global batch, and for the llm space the
// depth, sequence length and experts (read from the Megatron-LM export, which spells the model out).
json workload_facts(const cotune::core::StudySpec& spec, const Space& space, const double* config) {
  json facts = json::object();
  const json& training = spec.workload.value("training", json::object());
  if (training.contains("global_batch")) facts["global_batch"] = training["global_batch"];
  if (spec.space.name != "llm") return facts;
  cotune::testing::MegatronScript script;
  std::string error;
  if (!cotune::testing::parse_megatron_script(space.render(config, COTUNE_RENDER_MEGATRON), &script, &error))
    return facts;
  facts["num_experts"] = 0;
  for (const auto& [flag, key] : {std::pair<const char*, const char*>{"--num-layers", "num_layers"},
                                  {"--seq-length", "seq_len"},
                                  {"--num-experts", "num_experts"}})
    if (auto v = script.value(flag)) facts[key] = std::stoll(*v);
  return facts;
}

class ExportsFrameworks : public ::testing::TestWithParam<std::string> {};

TEST_P(ExportsFrameworks, EveryTargetAcceptsEveryExport) {
  const FrameworkData& data = FrameworkData::load(COTUNE_SHARED_DIR "/data/frameworks");
  const auto spec = cotune::core::load_study_file(GetParam());
  const std::string name = study_name(GetParam());
  Registry registry;
  cotune::core::load_study_plugins(registry, spec);
  const auto plain = cotune::core::make_study_space(registry, spec);
  std::vector<double> probe(plain->num_params());
  ASSERT_EQ(plain->sample(1, 1, probe.data()), 1u) << name << ": no valid configuration";
  const json facts = workload_facts(spec, *plain, probe.data());

  for (const Target& t : kTargets) {
    if (spec.space.name != t.space) continue;
    const std::string target = std::string(t.framework) + "@" + t.version;
    SCOPED_TRACE(name + " " + target);
    const auto space = cotune::core::make_study_space(registry, spec);
    try {
      ASSERT_TRUE(space->set_target(target)) << "the " << t.space << " space has no launch targets";
    } catch (const std::exception& e) {
      // A workload the framework cannot run at all (overlapped expert-parallel communication under
      // TorchTitan): refused up front, with the framework named.
      EXPECT_THAT(e.what(), ::testing::HasSubstr("cannot run it")) << name << " " << target;
      std::cout << name << " " << target << ": the workload is refused: " << e.what() << "\n";
      continue;
    }
    std::string how;
    const auto start = std::chrono::steady_clock::now();
    const std::vector<double> rows = configurations(*space, t.space == std::string("recsys") ? kSampleRecsys : kSample, &how);
    const size_t d = space->num_params(), n = rows.size() / d;
    size_t checked = 0;
    for (; checked < n; ++checked) {
      const double* c = rows.data() + checked * d;
      json config = json::parse(space->render(c, COTUNE_RENDER_JSON));
      config.update(facts);
      std::string text;
      try {
        text = space->render(c, t.format);
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << " " << target << ": render failed: " << e.what() << "\nconfiguration "
                      << config.dump();
        break;
      }
      const CheckResult r = check_export(data, t.framework, t.version, text, config);
      if (!r.ok) {
        ADD_FAILURE() << name << " " << target << ": [" << r.rule << "] " << r.message << "\nconfiguration "
                      << config.dump() << "\nexport:\n"
                      << text.substr(0, 6000);
        break;
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << name << " " << target << ": " << checked << " of " << n << " configurations " << how << " in "
              << s << " s\n";
  }
}

INSTANTIATE_TEST_SUITE_P(ExampleStudies, ExportsFrameworks, ::testing::ValuesIn(example_studies()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = study_name(info.param);
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

}  // namespace
