// The LLM training search space (component "llm"): parameters, validity, sampling, features,
// lowering to step traces, launch targets and rendering for them (docs/exports.md).
#include <cotune/cotune.h>
#include <cotune/cotune.hpp>
#include <cotune/support/likely_meant.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.hpp"
#include "estimate.hpp"
#include "lowering.hpp"
#include "render.hpp"
#include "table.hpp"
#include "target.hpp"
#include "validity.hpp"
#include "workload.hpp"

namespace cotune_llm {
namespace {

using nlohmann::json;

const char* const kParamNames[kNumParams] = {"tp",  "pp",   "dp",        "cp", "ep",   "micro_batch",
                                              "vpp", "zero", "recompute", "sp", "gpus", "gpu",
                                              "etp", "first_stage_layers", "last_stage_layers", "recompute_modules"};
constexpr const char* kParamList =
    "tp, pp, dp, cp, ep, micro_batch, vpp, zero, recompute, sp, gpus, gpu, etp, first_stage_layers, last_stage_layers, "
    "recompute_modules";

const char* const kDerivedFeatures[] = {
    "micro_batches",       "tokens_per_micro_batch", "model_flops_per_gpu", "hardware_flops_per_gpu",
    "bubble_fraction",     "comm_bytes_node",        "comm_bytes_cluster",  "comm_bytes_island",
    "memory_gib",          "arithmetic_intensity",   "peak_tflops",         "hbm_gib"};
constexpr size_t kNumDerived = sizeof(kDerivedFeatures) / sizeof(kDerivedFeatures[0]);

[[noreturn]] void bad(const std::string& msg) { throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, msg); }

std::vector<double> powers_of_two(double limit) {
  std::vector<double> v;
  for (int e = 0; std::ldexp(1.0, e) <= limit; ++e) v.push_back(std::ldexp(1.0, e));
  return v;
}

std::vector<double> divisors(double n, double limit) {
  std::vector<double> v;
  for (long long x = 1; double(x) <= std::min(n, limit); ++x)
    if (std::fmod(n, double(x)) == 0) v.push_back(double(x));
  return v;
}

// The values of either list, once each, in order.
std::vector<double> sorted_union(std::vector<double> a, const std::vector<double>& b) {
  for (double x : b)
    if (std::find(a.begin(), a.end(), x) == a.end()) a.push_back(x);
  std::sort(a.begin(), a.end());
  return a;
}

// Pipeline degrees: the divisors of the layers, which split them evenly, and the powers of two that
// split them as evenly as whole layers allow with (at vpp 1) the heaviest stage at most a third
// heavier than the lightest (DeepSeek-V3's 61 layers on pp 8 or 16, Qwen3-235B's 94 and Llama-3
// 405B's 126 on pp 8, as NVIDIA's recipes run them); past that the lightest stages idle a quarter
// of the step or more.
std::vector<double> pipeline_degrees(double layers, double limit) {
  std::vector<double> nearly_even;
  for (double p : powers_of_two(std::min(layers, limit)))
    if (3 * std::ceil(layers / p) <= 4 * std::floor(layers / p)) nearly_even.push_back(p);
  return sorted_union(divisors(layers, limit), nearly_even);
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

std::string list_text(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + num(v[i]);
  return s + "]";
}

}  // namespace

class LlmSpace {
 public:
  LlmSpace(std::string_view workload_json, std::string_view options_json) {
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
    resolve_gpus(oj);
    build_params(oj);
    for (size_t i = 0; i < kNumParams; ++i) features_.push_back(kParamNames[i]);
    for (const char* f : kDerivedFeatures) features_.push_back(f);
    ops_.reserve(kMaxOps);
    scratch_ops_.reserve(kMaxOps);
  }

  const cotune::ParamList& params() const { return params_; }
  const std::vector<std::string>& feature_names() const { return features_; }

  void check(const double* configs, size_t n, int32_t* out_valid) {
    for (size_t i = 0; i < n; ++i) out_valid[i] = valid(configs + i * kNumParams, nullptr) ? 1 : 0;
  }

  std::string explain(const double* v) {
    std::string why;
    valid(v, &why);
    return why;
  }

  // The table schema of runs of this space (table.hpp; columns in docs/simulate.md).
  static std::string table_schema() { return cotune_llm::table_schema(); }
  static std::string table_read(std::string_view row) { return cotune_llm::table_read(row); }
  static std::string table_write(std::string_view workload, std::string_view config) {
    return cotune_llm::table_write(workload, config);
  }

  // From now on the framework's rules apply and render() writes its version (target.hpp).
  // What a trial of a training configuration is measured in (the sim executor reports all of them;
  // a job run by the process or Slurm executor writes them to its result file).
  std::vector<std::string> metrics() const {
    return {"step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "peak_mem_gib", "gpus", "cost_per_mtokens"};
  }

  void set_target(std::string_view text) {
    const Target t = parse_target(text);
    const std::string refusal = workload_refusal(w_, t);
    if (!refusal.empty()) bad(refusal);
    target_ = t;
    has_target_ = true;
    w_ = workload_for(w_, t);
  }

  size_t sample(uint64_t seed, size_t n, double* out) {
    std::mt19937_64 rng(seed);
    size_t found = 0;
    const size_t max_attempts = 2000 * std::max<size_t>(n, 1);
    double v[kNumParams];
    for (size_t attempt = 0; attempt < max_attempts && found < n; ++attempt) {
      for (size_t p = 0; p < kNumParams; ++p) {
        const std::vector<double>& d = domains_[p];
        v[p] = d[std::uniform_int_distribution<size_t>(0, d.size() - 1)(rng)];
      }
      // Most draws of dp break the product rule; derive it from the others when it can be.
      const double dp = v[kGpus] / (v[kTp] * v[kPp] * v[kCp]);
      if (contains(domains_[kDp], dp)) v[kDp] = dp;
      if (!valid(v, nullptr)) continue;
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
      if (!in_domain(v, nullptr)) continue;  // degrees of zero would divide by zero below
      const Config c = config_of(v);
      const cotune_hardware& hw = hardware_[gpu_of(v)];
      lower_config(w_, c, hw, scratch_ops_, scratch_trace_);
      derived_features(c, hw, scratch_trace_, f + kNumParams);
    }
  }

  const cotune_trace* lower(const double* v) {
    std::string why;
    if (!in_domain(v, &why)) bad("lower: " + why);
    lower_config(w_, config_of(v), hardware_[gpu_of(v)], ops_, trace_);
    return &trace_;
  }

  std::string render(const double* v, int32_t format) {
    std::string why;
    if (!in_domain(v, &why)) bad("render: " + why);
    const Config c = config_of(v);
    const cotune_hardware& hw = hardware_[gpu_of(v)];
    switch (format) {
      case COTUNE_RENDER_JSON:
        return render_json(c, v[kEtp], v[kRecomputeModules] == 0 ? "" : recompute_modules_text(c.recompute_modules),
                           gpu_names_[c.gpu]);
      case COTUNE_RENDER_MEGATRON: return render_megatron(w_, c, target_of(Framework::kMegatron), hw);
      case COTUNE_RENDER_TORCHTITAN: return render_torchtitan(w_, c, target_of(Framework::kTorchtitan), hw);
      case COTUNE_RENDER_NEMO: return render_nemo(w_, c, target_of(Framework::kNemo), hw);
      case COTUNE_RENDER_DEEPSPEED: return render_deepspeed(w_, c, target_of(Framework::kDeepspeed), hw);
      default:
        throw cotune::Error(COTUNE_ERR_UNSUPPORTED, "the llm space renders JSON, Megatron-LM, TorchTitan, "
                                                    "Megatron-Bridge and DeepSpeed, not format " +
                                                        std::to_string(format));
    }
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
      const std::string& key = it.key();
      size_t p = params_.find(key);
      if (p >= kNumParams)
        bad("configuration/" + key + ": unknown parameter" + cotune::support::did_you_mean_listed(key, kParamList) +
            " (expected " + kParamList + ")");
      out[p] = value_of(p, it.value(), "configuration/" + key);
    }
    if (!j.contains("dp")) {  // the data-parallel degree that uses every GPU
      const double dp = out[kGpus] / (out[kTp] * out[kPp] * out[kCp]);
      if (!contains(domains_[kDp], dp))
        bad("configuration/dp: missing, and gpus/(tp*pp*cp) = " + num(dp) + " is not a valid degree");
      out[kDp] = dp;
    }
  }

 private:
  static bool contains(const std::vector<double>& d, double x) {
    for (double y : d)
      if (y == x) return true;
    return false;
  }
  size_t gpu_of(const double* v) const { return static_cast<size_t>(v[kGpu]); }
  Config config_of(const double* v) const { return Config::decode(v, module_masks_); }

  // The space's rules, then the launch target's. Allocation-free when valid and `why` is NULL. The
  // memory estimate is the space's last rule, and a target's refusal outranks it: a layout out of
  // memory by the estimate is still timed (a run that ran did fit), one the framework refuses is not.
  bool valid(const double* v, std::string* why) {
    if (!in_domain(v, why)) return false;
    const Config c = config_of(v);
    if (!check_config(w_, c, hardware_[gpu_of(v)], why)) {
      std::string rule;
      if (why != nullptr && has_target_ && why->rfind("out of memory", 0) == 0 && !target_allows(w_, c, target_, &rule))
        *why = rule;
      return false;
    }
    return !has_target_ || target_allows(w_, c, target_, why);
  }

  // The target's version when it is of this framework, else the framework's newest.
  Target target_of(Framework f) const { return has_target_ && target_.framework == f ? target_ : newest(f); }

  bool in_domain(const double* v, std::string* why) const {
    for (size_t p = 0; p < kNumParams; ++p) {
      if (contains(domains_[p], v[p])) continue;
      if (why != nullptr)
        *why = std::string(kParamNames[p]) + " = " + num(v[p]) + " is outside its domain " +
               list_text(domains_[p]);
      return false;
    }
    return true;
  }

  double value_of(size_t p, const json& v, const std::string& at) const {
    double x = 0;
    if (p == kRecompute) {
      if (!v.is_string()) bad(at + ": expected none, selective or full");
      const std::string s = v.get<std::string>();
      x = -1;
      for (int i = 0; i < 3; ++i)
        if (s == kRecomputeNames[i]) x = i;
      if (x < 0) bad(at + ": expected none, selective or full, got '" + s + "'");
    } else if (p == kSp) {
      if (!v.is_boolean()) bad(at + ": expected true or false");
      x = v.get<bool>() ? 1 : 0;
    } else if (p == kRecomputeModules) {
      if (!v.is_string()) bad(at + ": expected module names such as \"core_attn\" or \"mla_up_proj,mlp\"");
      uint32_t mask = 0;
      try {
        mask = parse_recompute_modules(v.get<std::string>());
      } catch (const std::invalid_argument& e) {
        bad(at + ": " + e.what());
      }
      const auto it = std::find(module_masks_.begin(), module_masks_.end(), mask);
      if (it == module_masks_.end()) {
        std::string list;
        for (uint32_t m : module_masks_) list += (list.empty() ? "" : "; ") + recompute_modules_text(m);
        bad(at + ": '" + v.get<std::string>() + "' is not in this space (" + list + ")");
      }
      x = static_cast<double>(it - module_masks_.begin());
    } else if (p == kGpu) {
      if (!v.is_string()) bad(at + ": expected a GPU name");
      const auto it = std::find(gpu_names_.begin(), gpu_names_.end(), v.get<std::string>());
      if (it == gpu_names_.end()) {
        std::string list;
        for (const auto& g : gpu_names_) list += (list.empty() ? "" : ", ") + g;
        bad(at + ": GPU '" + v.get<std::string>() + "' is not in this space (" + list + ")");
      }
      x = static_cast<double>(it - gpu_names_.begin());
    } else {
      if (!v.is_number()) bad(at + ": expected a number, got " + v.dump());
      x = v.get<double>();
    }
    if (!contains(domains_[p], x))
      bad(at + ": " + v.dump() + " is not one of the space's values " + list_text(domains_[p]) +
          " (space option \"" + kParamNames[p] + "\" sets them: docs/workloads.md)");
    return x;
  }

  void resolve_gpus(const json& oj) {
    const json& cluster = w_.cluster;
    hardware_.push_back(resolve(cluster, "workload/cluster"));
    gpu_names_.push_back(std::string(cotune::view(hardware_[0].gpu_name)));
    if (!oj.contains("gpu")) return;
    const json& list = oj["gpu"];
    if (!list.is_array() || list.empty()) bad("space options/gpu: expected a non-empty list of GPU names");
    std::vector<std::string> names;
    std::vector<cotune_hardware> hws;
    for (const json& g : list) {
      if (!g.is_string()) bad("space options/gpu: expected GPU names (strings), got " + g.dump());
      const std::string name = g.get<std::string>();
      if (std::find(names.begin(), names.end(), name) != names.end()) bad("space options/gpu: '" + name + "' is listed twice");
      if (name == gpu_names_[0]) {
        hws.push_back(hardware_[0]);
      } else {
        json c = cluster;  // the same cluster with another catalogue GPU
        c["gpu"] = name;
        c.erase("gpu_spec");
        hws.push_back(resolve(c, "space options/gpu/" + name));
      }
      names.push_back(name);
    }
    gpu_names_ = names;
    hardware_ = hws;
  }

  static cotune_hardware resolve(const json& cluster, const std::string& where) {
    try {
      return cotune::resolve_hardware(cluster.dump());
    } catch (const cotune::Error& e) {
      // The host's message names the field already ("/cluster/gpu: ..."): the workload's only
      // gets the document's name in front, as its other fields' errors have it.
      const std::string what = e.what();
      if (what.rfind("/cluster", 0) == 0 && where == "workload/cluster") throw cotune::Error(e.code(), "workload" + what);
      throw cotune::Error(e.code(), where + ": " + what);
    }
  }

  void build_params(const json& oj) {
    for (auto it = oj.begin(); it != oj.end(); ++it)
      if (std::find_if(std::begin(kParamNames), std::end(kParamNames), [&](const char* k) { return it.key() == k; }) ==
          std::end(kParamNames))
        bad("space options/" + it.key() + ": unknown option" + cotune::support::did_you_mean_listed(it.key(), kParamList) +
            " (expected a parameter name: " + kParamList + ")");
    const Model& m = w_.model;
    const cotune_hardware& hw0 = hardware_[0];
    std::vector<double> gpus = restrict_numbers(oj, "gpus", {double(hw0.nodes) * hw0.gpus_per_node});
    const double G = *std::max_element(gpus.begin(), gpus.end());
    std::vector<double> dp_default;
    for (double g : gpus)
      for (double x : divisors(g, g))
        if (!contains(dp_default, x)) dp_default.push_back(x);
    std::sort(dp_default.begin(), dp_default.end());
    std::vector<double> ep_default = {1};
    if (m.moe()) ep_default = divisors(m.experts, m.experts), ep_default.erase(
        std::remove_if(ep_default.begin(), ep_default.end(), [](double x) { return std::fmod(std::log2(x), 1) != 0; }),
        ep_default.end());

    domains_.resize(kNumParams);
    domains_[kTp] = restrict_numbers(oj, "tp", powers_of_two(std::min(G, 64.0)));
    domains_[kPp] = restrict_numbers(oj, "pp", pipeline_degrees(m.layers, G));
    domains_[kDp] = restrict_numbers(oj, "dp", dp_default);
    domains_[kCp] = restrict_numbers(oj, "cp", powers_of_two(std::min(G, 16.0)));
    domains_[kEp] = restrict_numbers(oj, "ep", ep_default);
    domains_[kMicroBatch] = restrict_numbers(oj, "micro_batch", powers_of_two(std::min(16.0, w_.training.global_batch)));
    // Interleaving: the even chunk counts up to 8, and the powers of two (the layouts above).
    domains_[kVpp] = restrict_numbers(oj, "vpp", sorted_union(divisors(m.layers, 8), powers_of_two(8)));
    domains_[kZero] = restrict_numbers(oj, "zero", {0, 1, 2, 3});
    domains_[kGpus] = gpus;
    domains_[kEtp] = restrict_numbers(oj, "etp", {0});
    domains_[kFirstStage] = restrict_numbers(oj, "first_stage_layers", {0});
    domains_[kLastStage] = restrict_numbers(oj, "last_stage_layers", {0});

    std::vector<std::string> recompute = {"none", "selective", "full"};
    domains_[kRecompute] = {0, 1, 2};
    domains_[kSp] = {0, 1};
    // Parsed against the full domains above, then narrowed.
    for (size_t p : {size_t(kRecompute), size_t(kSp)}) {
      const char* name = kParamNames[p];
      if (!oj.contains(name)) continue;
      const json& r = oj[name];
      if (!r.is_array() || r.empty())
        bad(std::string("space options/") + name + (p == kSp ? ": expected a non-empty list of true/false"
                                                             : ": expected a non-empty list of none, selective, full"));
      std::vector<double> allowed;
      for (const json& x : r) {
        const double v = value_of(p, x, std::string("space options/") + name);
        if (!contains(allowed, v)) allowed.push_back(v);
      }
      std::sort(allowed.begin(), allowed.end());
      domains_[p] = allowed;
    }
    domains_[kGpu].clear();
    for (size_t i = 0; i < gpu_names_.size(); ++i) domains_[kGpu].push_back(double(i));
    module_masks_ = {kCoreAttn};
    if (oj.contains("recompute_modules")) {
      const json& r = oj["recompute_modules"];
      const std::string at = "space options/recompute_modules";
      if (!r.is_array() || r.empty())
        bad(at + ": expected a non-empty list of module sets such as [\"core_attn\", \"mla_up_proj,mlp\"] (modules: " +
            recompute_module_list() + ")");
      module_masks_.clear();
      for (const json& x : r) {
        if (!x.is_string()) bad(at + ": expected strings, got " + x.dump());
        uint32_t mask = 0;
        try {
          mask = parse_recompute_modules(x.get<std::string>());
        } catch (const std::invalid_argument& e) {
          bad(at + ": " + e.what());
        }
        if (std::find(module_masks_.begin(), module_masks_.end(), mask) == module_masks_.end())
          module_masks_.push_back(mask);
      }
    }
    domains_[kRecomputeModules].clear();
    for (size_t i = 0; i < module_masks_.size(); ++i) domains_[kRecomputeModules].push_back(double(i));

    auto first_or = [](const std::vector<double>& d, double want) { return contains(d, want) ? want : d.front(); };
    const double tp0 = first_or(domains_[kTp], 1), pp0 = first_or(domains_[kPp], 1), cp0 = first_or(domains_[kCp], 1);
    params_.add_int("tp", domains_[kTp], tp0, "ranks", "Tensor-parallel degree (Megatron column/row-parallel layers).");
    params_.add_int("pp", domains_[kPp], pp0, "stages", "Pipeline-parallel degree.");
    params_.add_int("dp", domains_[kDp], first_or(domains_[kDp], gpus.front() / (tp0 * pp0 * cp0)), "ranks",
                    "Data-parallel degree; tp*pp*dp*cp equals the GPUs used.");
    params_.add_int("cp", domains_[kCp], cp0, "ranks", "Context-parallel degree (the sequence split across ranks).");
    params_.add_int("ep", domains_[kEp], first_or(domains_[kEp], 1), "ranks",
                    "Expert-parallel degree (mixture of experts), carved out of dp*cp.");
    params_.add_int("micro_batch", domains_[kMicroBatch], first_or(domains_[kMicroBatch], 1), "sequences",
                    "Sequences per micro-batch.");
    params_.add_int("vpp", domains_[kVpp], first_or(domains_[kVpp], 1), "chunks",
                    "Interleaved pipeline chunks per device (1: plain 1F1B).");
    params_.add_int("zero", domains_[kZero], first_or(domains_[kZero], 0), "",
                    "Sharding over data-parallel ranks: 0 none, 1 optimizer state, 2 and gradients, 3 and weights (FSDP).");
    params_.add_categorical("recompute", {recompute.begin(), recompute.end()}, size_t(domains_[kRecompute].front()),
                            "Activation recomputation: none, selective (attention core) or full (whole layers).");
    params_.add_bool("sp", domains_[kSp].front() != 0, "Sequence parallelism (needs tp > 1).");
    params_.add_int("gpus", gpus, gpus.front(), "GPUs", "GPUs the job uses.");
    params_.add_categorical("gpu", gpu_names_, 0, "GPU type.");
    params_.add_int("etp", domains_[kEtp], domains_[kEtp].front(), "ranks",
                    "Expert tensor-parallel degree (mixture of experts); 0: the tensor-parallel degree, as in "
                    "Megatron-LM.");
    params_.add_int("first_stage_layers", domains_[kFirstStage], domains_[kFirstStage].front(), "layers",
                    "Decoder layers of the first pipeline rank; 0: an even split (counting the embedding and loss as "
                    "layers where that makes it even).");
    params_.add_int("last_stage_layers", domains_[kLastStage], domains_[kLastStage].front(), "layers",
                    "Decoder layers of the last pipeline rank; 0: as first_stage_layers.");
    std::vector<std::string> module_sets;
    for (uint32_t m : module_masks_) module_sets.push_back(recompute_modules_text(m));
    params_.add_categorical("recompute_modules", {module_sets.begin(), module_sets.end()}, 0,
                            "What selective recomputation rebuilds (Megatron-LM's --recompute-modules).");
    // Added after configurations of this space were stored: left out at their defaults.
    for (size_t p : {size_t(kEtp), size_t(kFirstStage), size_t(kLastStage), size_t(kRecomputeModules)})
      params_.add_flags(p, COTUNE_PARAM_OPTIONAL);
  }

  static std::vector<double> restrict_numbers(const json& oj, const char* name, std::vector<double> fallback) {
    if (!oj.contains(name)) {
      if (fallback.empty()) bad(std::string("space: parameter ") + name + " has an empty domain for this workload");
      return fallback;
    }
    const json& l = oj[name];
    const std::string at = std::string("space options/") + name;
    if (!l.is_array() || l.empty()) bad(at + ": expected a non-empty list of positive integers");
    std::vector<double> v;
    for (const json& x : l) {
      const std::string n(name);
      const bool stage = n == "zero";
      const bool zero_ok = stage || n == "etp" || n == "first_stage_layers" || n == "last_stage_layers";
      if (!x.is_number() || x.get<double>() != std::floor(x.get<double>()) || x.get<double>() < (zero_ok ? 0 : 1) ||
          (stage && x.get<double>() > 3))
        bad(at + ": " + x.dump() +
            (stage ? " is not a ZeRO stage (0-3)" : zero_ok ? " is not a whole number (0: the default rule)"
                                                           : " is not a positive integer"));
      if (!contains(v, x.get<double>())) v.push_back(x.get<double>());
    }
    std::sort(v.begin(), v.end());
    return v;
  }

  void derived_features(const Config& c, const cotune_hardware& hw, const cotune_trace& t, double* f) const {
    const double m = t.micro_batches;
    double hw_flops = 0, bytes_moved = 0, comm[COTUNE_NET_LEVELS] = {0, 0, 0};
    for (size_t i = 0; i < t.num_ops; ++i) {
      const cotune_op& op = t.ops[i];
      const double runs = op.count * (op.phase == COTUNE_PHASE_STEP ? 1 : m);
      if (op.kind == COTUNE_OP_GEMM) {
        hw_flops += runs * 2 * op.m * op.n * op.k;
        bytes_moved += runs * 2 * (op.m * op.k + op.k * op.n + op.m * op.n);
      } else if (op.kind == COTUNE_OP_ATTENTION) {
        double fl = 2 * op.batch * op.heads * op.seq_q * op.seq_kv * op.head_dim;  // causal half of 4bhsqd
        if (op.phase == COTUNE_PHASE_BACKWARD && !(op.flags & COTUNE_OP_RECOMPUTE)) fl *= 2.5;
        hw_flops += runs * fl;
        bytes_moved += runs * 2 * op.batch * op.heads * (2 * op.seq_q + 2 * op.seq_kv) * op.head_dim;
      } else if (op.kind == COTUNE_OP_MEMORY) {
        bytes_moved += runs * op.bytes;
      } else if (op.kind == COTUNE_OP_COLLECTIVE) {
        comm[op.net_level] += runs * op.bytes;
      }
    }
    const cotune_memory& mem = t.memory;
    f[0] = m;
    f[1] = c.micro_batch * w_.model.seq_len / c.cp;
    f[2] = t.model_flops_per_gpu;
    f[3] = hw_flops;
    f[4] = c.pp > 1 && m > 0 ? (c.pp - 1) / (c.vpp * m) : 0;  // m is 0 where dp*micro_batch exceeds the batch
    f[5] = comm[COTUNE_NET_NODE];
    f[6] = comm[COTUNE_NET_CLUSTER];
    f[7] = comm[COTUNE_NET_ISLAND];
    f[8] = (mem.weights + mem.gradients + mem.optimizer + mem.activations + mem.buffers) / 1073741824.0;
    f[9] = bytes_moved > 0 ? hw_flops / bytes_moved : 0;
    f[10] = dtype_peak(hw, w_.training.dtype) / 1e12;
    f[11] = hw.hbm_bytes / 1073741824.0;
  }

  Workload w_;  // as the target runs it (workload_for) once set_target was called
  Target target_;
  bool has_target_ = false;
  std::vector<std::string> gpu_names_;
  std::vector<cotune_hardware> hardware_;
  cotune::ParamList params_;
  std::vector<std::vector<double>> domains_;
  std::vector<std::string> features_;
  std::vector<uint32_t> module_masks_;  // the recompute_modules choices
  std::vector<cotune_op> ops_, scratch_ops_;
  cotune_trace trace_{}, scratch_trace_{};
};

}  // namespace cotune_llm

COTUNE_PLUGIN(cotune::space<cotune_llm::LlmSpace>({"org.cotune.space.llm", "llm",
                                                    "Decoder-only transformer training: parallelism, micro-batch, "
                                                    "sharding and recomputation, lowered to step traces.", "1.0.0",
                                                    COTUNE_CAP_RENDER_ARGS}))
