// Checks an exported launch configuration (docs/exports.md) against the plain-data description of
// what each training framework accepts at a version (../shared/data/frameworks/): flag and key
// names, arity, types and choices from the CSVs, then the cross-field rules of the *_rules.md files
// that an exporter can break, then (given the configuration) that the export carries it.
//
//   const FrameworkData& data = FrameworkData::load(COTUNE_SHARED_DIR "/data/frameworks");
//   CheckResult r = check_export(data, "megatron", "core_v0.19.0", text, config_json);
//   if (!r.ok) ... r.rule ("M27", "flag", "type", "tt-pp-stages", ...) and r.message
//
// Frameworks and versions: megatron (main, core_v0.19.0), torchtitan (main, v0.2.2, v0.1.0), nemo
// (main), deepspeed (master, v0.19.5), torchrec (main); "HEAD" names the newest of each.
//
// The configuration is the JSON of COTUNE_RENDER_JSON (tp, pp, dp, cp, ep, micro_batch, vpp, zero,
// recompute, sp, gpus, ... for the llm space; the recsys keys for torchrec). It may also carry facts
// of the workload the export must agree with: "global_batch", "seq_len", "num_layers" and
// "num_experts" (0 for a dense model). Keys left out are not checked; an empty (null) configuration
// checks the export on its own.
#ifndef COTUNE_TESTS_SUPPORT_FRAMEWORK_CHECK_HPP_
#define COTUNE_TESTS_SUPPORT_FRAMEWORK_CHECK_HPP_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cotune::testing {

// The verdict: ok, or the first rule broken. `rule` is a rule id of the *_rules.md files ("M27")
// or a checker label ("format", "flag", "arity", "type", "choices", "header", "consistency",
// "tt-pp-stages", "ds-batch", "tr-overlap", ...); `message` says what and where.
struct CheckResult {
  bool ok = true;
  std::string rule;
  std::string message;

  static CheckResult pass() { return {}; }
  static CheckResult fail(std::string rule, std::string message) { return {false, std::move(rule), std::move(message)}; }
};

// The reference lists, read once from the frameworks directory.
class FrameworkData {
 public:
  // One row of megatron_lm_arguments.csv.
  struct MegatronFlag {
    std::string flag, dest, type, default_value, nargs, action;
    std::vector<std::string> choices;
    bool takes_value() const { return action == "store"; }
  };
  // One row of torchtitan_config_<version>.csv (HEAD variant rows keep "{variant X}" in section).
  struct TitanField {
    std::string section, key, type, default_value, kind;
    bool cli_override = true;
  };
  // One row of deepspeed_config_keys.csv.
  struct DeepSpeedKey {
    std::string key, type, allowed;
    bool head_only = false;  // source_ref is main: only "master" accepts it
  };

  // Loads (and caches per directory) the data; throws std::runtime_error when a file is missing.
  static const FrameworkData& load(const std::string& frameworks_dir);
  explicit FrameworkData(const std::string& frameworks_dir);

  // Megatron-LM: version "main" or "core_v0.19.0". nullptr when the flag does not exist there.
  const MegatronFlag* megatron_flag(const std::string& version, const std::string& flag) const;
  // The commit of a version (source_commit), e.g. "d98e8a64dd..."; empty when unknown.
  std::string commit(const std::string& framework, const std::string& version) const;

  // TorchTitan: version "HEAD", "v0.2.2" or "v0.1.0" (the CSV names).
  const TitanField* titan_field(const std::string& version, const std::string& section, const std::string& key) const;
  bool titan_table(const std::string& version, const std::string& section) const;  // a subsection
  // HEAD: the activation_checkpoint variants (selective, full, memory-budget, none).
  const std::set<std::string>& titan_variants() const { return titan_variants_; }

  // DeepSpeed: every dotted key of the CSV.
  const DeepSpeedKey* deepspeed_key(const std::string& key) const;
  bool deepspeed_section(const std::string& prefix) const;  // a key with "prefix." rows below it

  // Megatron-Bridge: the recipe field paths of nemo_recipe_fields.md section 2 (shorthand rows
  // expanded), with the class default as written; and the mixed-precision preset names.
  const std::map<std::string, std::string>& nemo_fields() const { return nemo_fields_; }
  const std::set<std::string>& nemo_presets() const { return nemo_presets_; }

 private:
  void load_megatron(const std::string& dir);
  void load_titan(const std::string& dir, const std::string& version);
  void load_deepspeed(const std::string& dir);
  void load_nemo(const std::string& dir);

  std::map<std::string, std::map<std::string, MegatronFlag>> megatron_;  // version -> flag -> row
  // TransformerConfig and ModelParallelConfig dest -> default (main): what a Bridge model inherits
  std::map<std::string, std::string> model_config_fields_;
  std::map<std::string, std::map<std::string, TitanField>> titan_;       // version -> "section|key" -> row
  std::map<std::string, std::set<std::string>> titan_tables_;            // version -> dotted tables
  std::set<std::string> titan_variants_;
  std::map<std::string, DeepSpeedKey> deepspeed_;
  std::map<std::string, std::string> nemo_fields_;  // "cfg.model.x" -> class default
  std::set<std::string> nemo_presets_;
  std::map<std::string, std::string> commits_;  // "framework@version" -> commit
};

// Checks `text`, an export for `framework` at `version`, and its agreement with `config` (see the
// file comment). Returns the first problem found.
CheckResult check_export(const FrameworkData& data, const std::string& framework, const std::string& version,
                         const std::string& text, const nlohmann::json& config = nlohmann::json());

// A Megatron-LM export parsed (docs/exports.md): the environment, the arguments in order and the
// world size of the header comment ("for N GPUs"; 0 when absent).
struct MegatronScript {
  std::vector<std::string> comments;
  std::map<std::string, std::string> env;
  std::vector<std::pair<std::string, std::vector<std::string>>> args;  // flag, values (unquoted)
  int64_t world = 0;

  bool has(const std::string& flag) const;
  std::optional<std::string> value(const std::string& flag) const;  // the first value
};
// Parses the format only (no flag lookups). Returns false with `error` set when it is malformed.
bool parse_megatron_script(const std::string& text, MegatronScript* out, std::string* error);

// Megatron-LM's --moe-layer-freq list expressions ("([0]*3+[1]*58)", "([1]*3+[0])*8", "[1]*4"):
// the evaluated list. Throws std::invalid_argument for anything else.
std::vector<int64_t> eval_layer_pattern(const std::string& expr);

// Megatron-LM's --pipeline-model-parallel-layout ("Et*2|(t*2|)*38,tL"): the stages, each the layer
// letters in order (E, t, m, L). Throws std::invalid_argument on a syntax error.
std::vector<std::string> expand_pipeline_layout(const std::string& layout);

}  // namespace cotune::testing

#endif  // COTUNE_TESTS_SUPPORT_FRAMEWORK_CHECK_HPP_
