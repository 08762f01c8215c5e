// The recommendation-model (DLRM-style) training search space (component "recsys"): embedding
// sharding and placement, precisions, offload, batch, pipelining and dense parallelism, planned
// per configuration, lowered to step traces and rendered as TorchRec sharding plans.
#include <cotune/cotune.h>
#include <cotune/cotune.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.hpp"
#include "features.hpp"
#include "lowering.hpp"
#include "planner.hpp"
#include "render.hpp"
#include "table.hpp"
#include "validity.hpp"
#include "workload.hpp"

namespace cotune_recsys {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& msg) { throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, msg); }

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

bool contains(const std::vector<double>& d, double x) { return std::find(d.begin(), d.end(), x) != d.end(); }

// The choice names of a categorical (or bool) parameter, empty for numeric ones.
std::vector<std::string> choices_of(size_t p) {
  auto list = [](const char* const* names, size_t n) { return std::vector<std::string>(names, names + n); };
  switch (p) {
    case kSharding: return list(kShardingNames, 4);
    case kBalance: return list(kBalanceNames, 3);
    case kEmbPrecision: return list(kEmbPrecisionNames, 3);
    case kA2aPrecision: return list(kA2aPrecisionNames, 2);
    case kPipeline: return list(kPipelineNames, 2);
    case kDenseParallel: return list(kDenseParallelNames, 2);
    default: return {};
  }
}

std::string domain_text(size_t p, const std::vector<double>& d) {
  const std::vector<std::string> names = choices_of(p);
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) {
    s += i ? ", " : "";
    if (!names.empty()) s += names[static_cast<size_t>(d[i])];
    else if (p == kOffload) s += d[i] != 0 ? "true" : "false";
    else s += num(d[i]);
  }
  return s + "]";
}

}  // namespace

// The TorchRec commit whose plan types the renderer follows.
constexpr const char* kTorchrecCommit = "a48cef79ebc333da92af1311c04b041ee21a8e75";

class RecsysSpace {
 public:
  RecsysSpace(std::string_view workload_json, std::string_view options_json) {
    json wj, oj;
    try {
      wj = json::parse(workload_json);
    } catch (const std::exception& e) {
      bad(std::string("workload: not valid JSON: ") + e.what());
    }
    try {
      oj = options_json.empty() ? json::object() : json::parse(options_json);
    } catch (const std::exception& e) {
      bad(std::string("space options: not valid JSON: ") + e.what());
    }
    if (!oj.is_object()) bad("space options: expected a JSON object");
    try {
      w_ = parse_workload(wj);
    } catch (const std::invalid_argument& e) {
      bad(std::string("workload") + e.what());
    }
    try {
      hw_ = cotune::resolve_hardware(w_.cluster.dump());
    } catch (const cotune::Error& e) {
      throw cotune::Error(e.code(), std::string("workload/cluster: ") + e.what());
    }
    build_params(oj);
    for (size_t i = 0; i < kNumParams; ++i) features_.push_back(kParamNames[i]);
    for (size_t i = 0; i < kNumDerived; ++i) features_.push_back(kDerivedFeatures[i]);
  }

  const cotune::ParamList& params() const { return params_; }
  const std::vector<std::string>& feature_names() const { return features_; }

  void check(const double* configs, size_t n, int32_t* out_valid) {
    for (size_t i = 0; i < n; ++i) {
      const double* v = configs + i * kNumParams;
      out_valid[i] = in_domain(v, nullptr) && plan_config(w_, Config::decode(v), hw_, plan_, nullptr) ? 1 : 0;
    }
  }

  std::string explain(const double* v) {
    std::string why;
    if (!in_domain(v, &why)) return why;
    plan_config(w_, Config::decode(v), hw_, plan_, &why);
    return why;
  }

  size_t sample(uint64_t seed, size_t n, double* out) {
    std::mt19937_64 rng(seed);
    size_t found = 0;
    const size_t max_attempts = 2000 * std::max<size_t>(n, 1);
    double v[kNumParams];
    for (size_t attempt = 0; attempt < max_attempts && found < n; ++attempt) {
      for (size_t p = 0; p < kNumParams; ++p) {
        const std::vector<double>& d = domains_[p];
        v[p] = d[static_cast<size_t>(rng() % d.size())];
      }
      if (!plan_config(w_, Config::decode(v), hw_, plan_, nullptr)) continue;
      std::copy(v, v + kNumParams, out + found * kNumParams);
      ++found;
    }
    return found;
  }

  void featurize(const double* configs, size_t n, double* out) {
    const size_t width = kNumParams + kNumDerived;
    for (size_t i = 0; i < n; ++i) {
      const double* v = configs + i * kNumParams;
      double* f = out + i * width;
      std::copy(v, v + kNumParams, f);
      std::fill(f + kNumParams, f + width, 0.0);
      // Invalid configurations have no placement: their derived features stay 0.
      if (!in_domain(v, nullptr)) continue;
      const Config c = Config::decode(v);
      if (!plan_config(w_, c, hw_, plan_, nullptr)) continue;
      lower_config(w_, c, hw_, plan_, scratch_ops_, scratch_trace_);
      derived_features(w_, c, plan_, scratch_trace_, f + kNumParams);
    }
  }

  const cotune_trace* lower(const double* v) {
    const Config c = planned(v, "lower");
    lower_config(w_, c, hw_, plan_, ops_, trace_);
    return &trace_;
  }

  std::string render(const double* v, int32_t format) {
    if (format == COTUNE_RENDER_JSON) {
      std::string why;
      if (!in_domain(v, &why)) bad("render: " + why);
      return render_json(v);
    }
    if (format == COTUNE_RENDER_TORCHREC) return render_torchrec(w_, planned(v, "render"), plan_, hw_.gpus_per_node);
    throw cotune::Error(COTUNE_ERR_UNSUPPORTED,
                        "the recsys space renders JSON and TorchRec sharding plans, not format " + std::to_string(format));
  }

  // The table schema of runs of this space (table.hpp; columns in docs/workloads-recsys.md).
  static std::string table_schema() { return cotune_recsys::table_schema(); }
  static std::string table_read(std::string_view row) { return cotune_recsys::table_read(row); }
  static std::string table_write(std::string_view workload, std::string_view config) {
    return cotune_recsys::table_write(workload, config);
  }

  // The one launch target: TorchRec at the commit ../shared/data/frameworks/torchrec_plan.md reads.
  // Every plan the space makes is one TorchRec accepts, so the target adds no constraint.
  // What a trial is measured in: tokens_per_s counts samples (docs/workloads-recsys.md).
  std::vector<std::string> metrics() const {
    return {"step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "peak_mem_gib", "gpus", "cost_per_mtokens"};
  }

  void set_target(std::string_view text) {
    const size_t at = text.find('@');
    std::string word(text.substr(0, at)), version(at == std::string_view::npos ? "" : text.substr(at + 1));
    for (std::string* s : {&word, &version})
      std::transform(s->begin(), s->end(), s->begin(), [](unsigned char ch) { return std::tolower(ch); });
    const std::string commit = kTorchrecCommit;
    const bool known_version = version.empty() || version == "main" || version == "head" ||
                               (version.size() >= 7 && commit.compare(0, version.size(), version) == 0);
    if (word != "torchrec" || !known_version)
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT,
                          "the recsys space launches with torchrec@main (TorchRec " + commit.substr(0, 8) +
                              "), not '" + std::string(text) + "'");
  }

  void parse(std::string_view text, double* out) {
    json j;
    try {
      j = json::parse(text);
    } catch (const std::exception& e) {
      bad(std::string("configuration: not valid JSON: ") + e.what());
    }
    if (!j.is_object()) bad("configuration: expected a JSON object");
    for (size_t p = 0; p < kNumParams; ++p) out[p] = params_[p].default_value;
    for (auto it = j.begin(); it != j.end(); ++it) {
      const size_t p = params_.find(it.key());
      if (p >= kNumParams) bad("configuration/" + it.key() + ": unknown parameter (expected " + param_list() + ")");
      const std::string at = "configuration/" + it.key();
      const double x = value_of(p, it.value(), at);
      if (!contains(domains_[p], x)) bad(at + ": " + it.value().dump() + " is outside the domain " + domain_text(p, domains_[p]));
      out[p] = x;
    }
  }

 private:
  // Plans a configuration that must be valid (lower, render).
  Config planned(const double* v, const char* what) {
    std::string why;
    if (!in_domain(v, &why)) bad(std::string(what) + ": " + why);
    const Config c = Config::decode(v);
    if (!plan_config(w_, c, hw_, plan_, &why)) bad(std::string(what) + ": the configuration is invalid: " + why);
    return c;
  }

  bool in_domain(const double* v, std::string* why) const {
    for (size_t p = 0; p < kNumParams; ++p) {
      if (contains(domains_[p], v[p])) continue;
      if (why != nullptr)
        *why = std::string(kParamNames[p]) + " = " + num(v[p]) + " is outside its domain " + domain_text(p, domains_[p]);
      return false;
    }
    return true;
  }

  static std::string param_list() {
    std::string s;
    for (size_t p = 0; p < kNumParams; ++p) s += (p ? ", " : "") + std::string(kParamNames[p]);
    return s;
  }

  // One value of parameter p from JSON: a choice name, true/false, or a number.
  static double value_of(size_t p, const json& v, const std::string& at) {
    const std::vector<std::string> names = choices_of(p);
    if (!names.empty()) {
      if (!v.is_string()) bad(at + ": expected one of " + join(names) + ", got " + v.dump());
      const auto it = std::find(names.begin(), names.end(), v.get<std::string>());
      if (it == names.end()) bad(at + ": expected one of " + join(names) + ", got '" + v.get<std::string>() + "'");
      return static_cast<double>(it - names.begin());
    }
    if (p == kOffload) {
      if (!v.is_boolean()) bad(at + ": expected true or false, got " + v.dump());
      return v.get<bool>() ? 1 : 0;
    }
    if (!v.is_number()) bad(at + ": expected a number, got " + v.dump());
    return v.get<double>();
  }

  static std::string join(const std::vector<std::string>& names) {
    std::string s;
    for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
    return s;
  }

  void build_params(const json& oj) {
    for (auto it = oj.begin(); it != oj.end(); ++it)
      if (params_index(it.key()) >= kNumParams)
        bad("space options/" + it.key() + ": unknown option (expected a parameter name: " + param_list() + ")");
    const double total_gpus = double(hw_.nodes) * hw_.gpus_per_node;
    std::vector<double> batches;
    for (int e = 4; e <= 14 && std::ldexp(1.0, e) <= w_.training.global_batch; ++e)  // 16 to 16384
      batches.push_back(std::ldexp(1.0, e));
    if (batches.empty()) batches.push_back(w_.training.global_batch);

    domains_.resize(kNumParams);
    domains_[kSharding] = {0, 1, 2, 3};
    domains_[kLargeRows] = {1e5, 1e6, 1e7, 1e8};
    domains_[kColumnSplit] = {32, 64, 128};
    domains_[kReplicateMib] = {0, 1, 16, 256};
    domains_[kBalance] = {0, 1, 2};
    domains_[kEmbPrecision] = {0, 1, 2};
    domains_[kA2aPrecision] = {0, 1};
    domains_[kOffload] = {0, 1};
    domains_[kCachePercent] = {5, 10, 20, 50};
    domains_[kBatchPerGpu] = batches;
    domains_[kPipeline] = {0, 1};
    domains_[kDenseParallel] = {0, 1};
    domains_[kGpus] = {total_gpus};
    for (size_t p = 0; p < kNumParams; ++p) {
      if (!oj.contains(kParamNames[p])) continue;
      const std::string at = std::string("space options/") + kParamNames[p];
      const json& list = oj[kParamNames[p]];
      if (!list.is_array() || list.empty()) bad(at + ": expected a non-empty list of values");
      std::vector<double> d;
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string where = at + "/" + std::to_string(i);
        const double x = value_of(p, list[i], where);
        if (p == kGpus) {
          if (x < 1 || x != std::floor(x) || x > total_gpus)
            bad(where + ": " + list[i].dump() + " is not a GPU count in 1.." + num(total_gpus) + " (the cluster)");
        } else if (p == kBatchPerGpu || p == kLargeRows || p == kColumnSplit) {
          if (x < 1 || x != std::floor(x)) bad(where + ": " + list[i].dump() + " is not a positive integer");
        } else if (p == kReplicateMib) {
          if (x < 0) bad(where + ": " + list[i].dump() + " is negative");
        } else if (p == kCachePercent) {
          if (!(x > 0 && x <= 100)) bad(where + ": " + list[i].dump() + " is not a percentage in (0, 100]");
        }
        if (!contains(d, x)) d.push_back(x);
      }
      std::sort(d.begin(), d.end());
      domains_[p] = d;
    }
    auto pick = [&](size_t p, double want) { return contains(domains_[p], want) ? want : domains_[p].front(); };
    params_.add_categorical("large_table_sharding", choices_of(kSharding), size_t(pick(kSharding, 1)),
                            "How tables with more than large_table_rows rows are sharded.");
    params_.add_int("large_table_rows", domains_[kLargeRows], pick(kLargeRows, 1e7), "rows",
                    "The row count above which a table is sharded the large-table way (else table-wise).");
    params_.add_int("column_split", domains_[kColumnSplit], pick(kColumnSplit, 64), "columns",
                    "Width of the column shards of column-wise tables.");
    params_.add_int("replicate_below_mib", domains_[kReplicateMib], pick(kReplicateMib, 1), "MiB",
                    "Tables smaller than this are replicated on every GPU (data parallel).");
    params_.add_categorical("balance", choices_of(kBalance), size_t(pick(kBalance, 0)),
                            "What the placement balances across GPUs: lookup work, memory, or both.");
    params_.add_categorical("emb_precision", choices_of(kEmbPrecision), size_t(pick(kEmbPrecision, 0)),
                            "Storage precision of the embedding tables.");
    params_.add_categorical("a2a_precision", choices_of(kA2aPrecision), size_t(pick(kA2aPrecision, 0)),
                            "Precision of the pooled-embedding all-to-alls (TorchRec qcomms).");
    params_.add_bool("offload", pick(kOffload, 0) != 0,
                     "Keep embeddings in host memory with an HBM cache (TorchRec UVM caching).");
    params_.add_int("cache_percent", domains_[kCachePercent], pick(kCachePercent, 20), "%",
                    "HBM cache of offloaded tables, in percent of their rows.");
    params_.add_int("batch_per_gpu", domains_[kBatchPerGpu], pick(kBatchPerGpu, 512), "samples",
                    "Samples per GPU per micro-batch; global_batch / (batch_per_gpu * gpus) micro-batches per step.");
    params_.add_categorical("pipeline", choices_of(kPipeline), size_t(pick(kPipeline, 0)),
                            "plain, or prefetch_sparse: the next batch's sparse input all-to-all runs behind compute.");
    params_.add_categorical("dense_parallel", choices_of(kDenseParallel), size_t(pick(kDenseParallel, 0)),
                            "Data parallelism of the dense part: DDP (replicated) or FSDP (sharded).");
    params_.add_int("gpus", domains_[kGpus], domains_[kGpus].back(), "GPUs", "GPUs the job uses.");
  }

  static size_t params_index(const std::string& name) {
    for (size_t p = 0; p < kNumParams; ++p)
      if (name == kParamNames[p]) return p;
    return kNumParams;
  }

  Workload w_;
  cotune_hardware hw_{};
  cotune::ParamList params_;
  std::vector<std::vector<double>> domains_;
  std::vector<std::string> features_;
  Plan plan_;
  std::vector<cotune_op> ops_, scratch_ops_;
  cotune_trace trace_{}, scratch_trace_{};
};

}  // namespace cotune_recsys

COTUNE_PLUGIN(cotune::space<cotune_recsys::RecsysSpace>(
    {"org.cotune.space.recsys", "recsys",
     "Recommendation-model (DLRM-style) training: embedding sharding and placement, precisions, offload, batch, "
     "pipelining and dense parallelism, lowered to step traces.", "1.0.0",
     COTUNE_CAP_RENDER_ARGS}))
