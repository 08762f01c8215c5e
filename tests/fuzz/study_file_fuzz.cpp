// Fuzz target: the study-file parser (parse_study_file), then, for a study of the llm space, the
// llm space's own reading of the workload and options (what `cotune run` does next with a study).
// Bad input must end in UserError (from the host) or PluginError (from the space) with a message;
// nothing else may escape, crash or hang.
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.hpp"

namespace {

const cotune::core::Registry& registry() {
  static const cotune::core::Registry r = [] {
    cotune::core::Registry reg;
    reg.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-llm.so");
    return reg;
  }();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cotune::core;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Relative workload paths resolve against the example studies (none of which is a workload file,
  // so such a study reads a directory or a missing file: both refused).
  const std::string base_dir = COTUNE_SOURCE_DIR "/examples/studies";
  StudySpec spec;
  try {
    spec = parse_study_file(text, "fuzz.json", base_dir);
  } catch (const UserError& e) {
    FUZZ_CHECK(std::string_view(e.what()).find("fuzz.json") != std::string_view::npos ||
               std::string_view(e.what()).find("cannot read workload file") != std::string_view::npos);
    return 0;
  }
  FUZZ_CHECK(!spec.name.empty());
  FUZZ_CHECK(!spec.objectives.empty() && spec.objectives.size() <= 2);
  FUZZ_CHECK(spec.hash.size() == 64);
  FUZZ_CHECK(spec.workload.is_object());
  FUZZ_CHECK(spec.objectives_json().size() == spec.objectives.size());
  // The same text parses to the same study.
  FUZZ_CHECK(parse_study_file(text, "fuzz.json", base_dir).hash == spec.hash);
  (void)spec.workload_key();

  if (spec.space.name != "llm" || registry().try_find(COTUNE_KIND_SPACE, "llm") == nullptr) return 0;
  try {
    auto space = registry().make_space("llm", spec.workload.dump(), spec.space.options.dump());
    FUZZ_CHECK(space != nullptr);
    // A few samples of the space, each checked and featurized, as the first trials of a study are.
    const size_t d = space->num_params();
    std::vector<double> configs(2 * d);
    const size_t n = space->sample(spec.seed, 2, configs.data());
    FUZZ_CHECK(n <= 2);
    std::vector<double> features(n * space->feature_names().size());
    if (n > 0) space->featurize(configs.data(), n, features.data());
    for (size_t i = 0; i < n; ++i) {
      const double* config = configs.data() + i * d;
      FUZZ_CHECK(space->valid(config) == space->explain(config).empty());
    }
  } catch (const PluginError& e) {
    FUZZ_CHECK(e.what()[0] != '\0');
  } catch (const UserError& e) {
    FUZZ_CHECK(e.what()[0] != '\0');
  }
  return 0;
}
