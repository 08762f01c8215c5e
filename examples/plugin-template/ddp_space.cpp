// A search space for a single-model data-parallel job: the smallest useful space plugin, written
// against the installed SDK alone. Teams start their in-house model's space from this file.
//
// Workload JSON: {"global_batch": 256, "params_billion": 1.3, "activation_gib_per_sample": 0.8,
//                 "gpu_memory_gib": 80}
// Its table schema (one run per CSV row, for `cotune import`, `export-history`, `predictor eval`):
// the four workload fields and the three parameters as columns of the same names.
#include <cotune/cotune.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

const char* const kWorkloadColumns[] = {"global_batch", "params_billion", "activation_gib_per_sample",
                                        "gpu_memory_gib"};
const char* const kConfigColumns[] = {"gpus", "micro_batch", "checkpointing"};

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

// A cell of a table row as a number; INVALID_ARGUMENT naming the column otherwise.
double cell_number(std::string_view row, const std::string& column) {
  std::string text;
  try {
    text = cotune::json_string(row, "/" + column);
  } catch (const cotune::Error&) {
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "column " + column + ": missing (required)");
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v))
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "column " + column + ": expected a number, got '" + text + "'");
  return v;
}

// Whether `key` is true in a configuration this space rendered, as the host hands it back (compact
// or spaced JSON of numbers and booleans only: a scan is enough).
bool rendered_flag(std::string_view json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\"");
  if (at == std::string_view::npos) return false;
  const size_t value = json.find_first_not_of(" :", at + key.size() + 2);
  return value != std::string_view::npos && json.substr(value, 4) == "true";
}

class DdpSpace {
 public:
  DdpSpace(std::string_view workload, std::string_view options) {
    // This space takes no options: refuse any rather than ignore a typo in the study's space options.
    // (A space with options, or one that refuses unknown workload fields, reads them with a JSON
    // library: cotune::support brings nlohmann-json, docs/PLUGIN_GUIDE.md.)
    if (options.find_first_not_of(" \t\r\n{}") != std::string_view::npos)
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "options: the ddp space takes none, got " + std::string(options));
    global_batch_ = cotune::json_number(workload, "/global_batch");
    params_b_ = cotune::json_number(workload, "/params_billion");
    act_gib_ = cotune::json_number(workload, "/activation_gib_per_sample");
    mem_gib_ = cotune::json_number(workload, "/gpu_memory_gib");
    if (!(global_batch_ >= 1) || !(params_b_ > 0) || !(act_gib_ >= 0) || !(mem_gib_ > 0))
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "workload: sizes must be positive");
    params_.add_int("gpus", {1, 2, 4, 8}, 8, "GPUs", "Data-parallel replicas.");
    params_.add_int("micro_batch", {1, 2, 4, 8, 16, 32}, 4, "sequences", "Samples per GPU per micro-step.");
    params_.add_bool("checkpointing", false, "Recompute activations in backward to save memory.");
    features_ = {"gpus", "micro_batch", "checkpointing", "accumulation_steps", "memory_gib"};
  }

  const cotune::ParamList& params() const { return params_; }
  const std::vector<std::string>& feature_names() const { return features_; }

  void check(const double* c, size_t n, int32_t* valid) {
    for (size_t i = 0; i < n; ++i) valid[i] = explain(c + i * 3).empty() ? 1 : 0;
  }

  std::string explain(const double* c) {
    const double per_step = c[0] * c[1];
    if (std::fmod(global_batch_, per_step) != 0) return "global batch is not a multiple of gpus * micro_batch";
    // "out of memory" first: the host keeps measured runs of such a layout as oom (cotune.h, explain).
    if (memory_gib(c) > mem_gib_)
      return "out of memory: needs " + std::to_string(memory_gib(c)) + " GiB per GPU, the GPU has " +
             std::to_string(mem_gib_) + " GiB";
    return "";
  }

  size_t sample(uint64_t seed, size_t n, double* out) {
    std::mt19937_64 rng(seed);
    size_t found = 0;
    for (size_t tries = 0; found < n && tries < n * 100; ++tries) {
      double* c = out + found * 3;
      for (size_t p = 0; p < 3; ++p) {
        const cotune_param& param = params_[p];
        c[p] = param.num_values ? param.values[rng() % param.num_values] : double(rng() % 2);
      }
      if (explain(c).empty()) ++found;
    }
    return found;
  }

  void featurize(const double* c, size_t n, double* out) {
    for (size_t i = 0; i < n; ++i, c += 3, out += 5) {
      out[0] = c[0];
      out[1] = c[1];
      out[2] = c[2];
      out[3] = global_batch_ / (c[0] * c[1]);
      out[4] = memory_gib(c);
    }
  }

  // The table schema (cotune.h 1.4): static, since a row says its own workload.
  static std::string table_schema() {
    std::string columns, config;
    for (const char* c : kWorkloadColumns) columns += std::string(columns.empty() ? "" : ", ") + "\"" + c + "\"";
    for (const char* c : kConfigColumns) {
      columns += std::string(", \"") + c + "\"";
      config += std::string(config.empty() ? "" : ", ") + "\"" + c + "\"";
    }
    return "{\"columns\": [" + columns + "], \"config_columns\": [" + config + "]}";
  }

  static std::string table_read(std::string_view row) {
    std::string workload;
    for (const char* c : kWorkloadColumns)
      workload += std::string(workload.empty() ? "" : ", ") + "\"" + c + "\": " + number_text(cell_number(row, c));
    const double gpus = cell_number(row, "gpus"), micro_batch = cell_number(row, "micro_batch");
    bool checkpointing = false;
    try {
      const std::string t = cotune::json_string(row, "/checkpointing");
      if (t != "true" && t != "false")
        throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "column checkpointing: expected true or false, got '" + t + "'");
      checkpointing = t == "true";
    } catch (const cotune::Error& e) {
      if (e.code() == COTUNE_ERR_INVALID_ARGUMENT) throw;  // absent: false
    }
    const std::string config = "{\"gpus\": " + number_text(gpus) + ", \"micro_batch\": " + number_text(micro_batch) +
                               ", \"checkpointing\": " + (checkpointing ? "true" : "false") + "}";
    return "{\"workload\": {" + workload + "}, \"config\": " + config + ", \"options\": {}, \"devices\": " +
           number_text(gpus) + "}";
  }

  static std::string table_write(std::string_view workload, std::string_view config) {
    std::string cells, read_back;
    for (const char* c : kWorkloadColumns) {
      const std::string v = number_text(cotune::json_number(workload, std::string("/") + c));
      cells += std::string(cells.empty() ? "" : ", ") + "\"" + c + "\": \"" + v + "\"";
      read_back += std::string(read_back.empty() ? "" : ", ") + "\"" + c + "\": " + v;
    }
    if (!config.empty()) {
      for (const char* c : {"gpus", "micro_batch"})
        cells += std::string(", \"") + c + "\": \"" + number_text(cotune::json_number(config, std::string("/") + c)) + "\"";
      cells += std::string(", \"checkpointing\": \"") + (rendered_flag(config, "checkpointing") ? "true" : "false") + "\"";
    }
    // The space reads only these four fields, so their cells say all it knows of the workload.
    return "{\"cells\": {" + cells + "}, \"inexact\": \"\", \"read_back\": {" + read_back + "}}";
  }

  std::string render(const double* c, int32_t format) {
    if (format != COTUNE_RENDER_JSON) throw cotune::Error(COTUNE_ERR_UNSUPPORTED, "only JSON");
    return "{\"gpus\": " + std::to_string(int(c[0])) + ", \"micro_batch\": " + std::to_string(int(c[1])) +
           ", \"checkpointing\": " + (c[2] != 0 ? "true" : "false") + "}";
  }

 private:
  // Weights, gradients and Adam state in mixed precision: 16 bytes per parameter; activations
  // shrink to one layer's worth (about a tenth here) with checkpointing.
  double memory_gib(const double* c) const {
    const double states = params_b_ * 16;
    const double activations = act_gib_ * c[1] * (c[2] != 0 ? 0.1 : 1.0);
    return states + activations;
  }

  double global_batch_, params_b_, act_gib_, mem_gib_;
  cotune::ParamList params_;
  std::vector<std::string> features_;
};

}  // namespace

COTUNE_PLUGIN(cotune::space<DdpSpace>({"org.example.space.ddp", "ddp",
                                       "Data-parallel job: GPUs, micro-batch, checkpointing.", "0.1.0"}))
