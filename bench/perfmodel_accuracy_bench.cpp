// Accuracy of the performance model on published measurements: prints every row of Megatron-LM
// SC'21 Table 1 (TFLOP/s per GPU) and Korthikanti et al. MLSys'23 Table 5 (iteration time), the
// error of each, the mean absolute percentage error and the pairwise ordering.
//   build-perf/bin/perfmodel_accuracy_bench [DATA_DIR]
#include <cotune/core/registry.hpp>

#include <cmath>
#include <cstdio>
#include <exception>

#include "perfmodel/published_runs.hpp"

int main(int argc, char** argv) {
  try {
    const std::string dir = argc > 1 ? argv[1] : COTUNE_SHARED_DIR "/data";
    cotune::core::Registry registry;
    if (!registry.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-llm.so")) {
      std::fprintf(stderr, "cannot load the llm space from %s\n", COTUNE_PLUGIN_DIR);
      return 1;
    }
    for (const auto& t : cotune::core::perf::check_published_runs(registry, dir)) {
      std::printf("\n%s (%s)\n", t.table.c_str(), t.metric.c_str());
      std::printf("| row | measured | predicted | error | configuration simulated |\n|---|---:|---:|---:|---|\n");
      for (const auto& r : t.rows)
        std::printf("| %s | %.2f | %.2f | %+.1f%% | `%s` |\n", r.label.c_str(), r.measured, r.predicted,
                    100 * r.error(), r.config.c_str());
      std::printf("MAPE %.1f%%; pairs more than 5%% apart ordered right: %d of %d\n", 100 * t.mape, t.pairs_ordered,
                  t.pairs);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
