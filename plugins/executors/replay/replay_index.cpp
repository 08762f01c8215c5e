#include "replay_index.hpp"

#include <cotune/cotune.hpp>
#include <cotune/support/likely_meant.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "cells.hpp"

namespace cotune_replay {
namespace {

using nlohmann::json;

constexpr const char* kComponent = "org.cotune.executor.replay";

[[noreturn]] void bad(const std::string& msg) { throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, msg); }

// Columns of the CSV schemas (docs/simulate.md, the recsys workload) that describe the workload
// rather than the configuration. When the workload JSON leaves one of them open, rows matching one
// configuration must agree on it.
const std::set<std::string>& workload_columns() {
  static const std::set<std::string> names = {
      "preset", "model", "hidden", "layers", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len", "experts", "top_k",
      "expert_ffn_hidden", "gated_mlp", "tie_embeddings", "dense_features", "interaction", "global_batch", "dtype",
      "optimizer", "attention", "dropout", "overlap_grad_reduce", "embedding_optimizer", "dense_optimizer", "gpu",
      "nodes", "gpus_per_node", "nodes_per_island", "price_per_gpu_hour", "host_gib_per_node", "host_link_GBps"};
  return names;
}

// Whether a workload column holds numbers: the workload states it as one, or it is a count or size.
bool numeric_workload_column(const std::string& name, const std::map<std::string, std::optional<json>>& fields) {
  const auto f = fields.find(name);
  if (f != fields.end() && f->second) return f->second->is_number();
  static const std::set<std::string> counts = {
      "hidden", "layers", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len", "experts", "top_k", "expert_ffn_hidden",
      "dense_features", "global_batch", "nodes", "gpus_per_node", "nodes_per_island", "price_per_gpu_hour",
      "host_gib_per_node", "host_link_GBps"};
  return counts.count(name) != 0;
}

std::string canonical_as(ValueKind kind, std::string_view cell, bool* ok) {
  *ok = true;
  switch (kind) {
    case ValueKind::kNumber:
      if (std::optional<double> v = parse_number(cell)) return number_key(*v);
      break;
    case ValueKind::kBoolean:
      if (std::optional<bool> b = parse_bool(cell)) return *b ? "true" : "false";
      break;
    case ValueKind::kText:
      return std::string(trim(cell));
  }
  *ok = false;
  return "";
}

// A GPU as a cell names it ("H100 SXM5 80GB", "A100-SXM4-80GB"): the catalogue's name, as the host
// reads a workload's cluster.gpu (case, spaces, aliases), so that a row and a study that spell one
// GPU two ways still meet; the cell as written when the catalogue does not know it.
std::string catalogue_gpu(std::string_view cell, std::map<std::string, std::string>* known) {
  const std::string text(trim(cell));
  auto it = known->find(text);
  if (it != known->end()) return it->second;
  std::string name = text;
  try {
    const cotune_hardware hw = cotune::resolve_hardware(json{{"gpu", text}, {"nodes", 1}}.dump());
    if (hw.gpu_name.data != nullptr && hw.gpu_name.len > 0) name.assign(hw.gpu_name.data, hw.gpu_name.len);
  } catch (const cotune::Error&) {
    // not a catalogue GPU: compared as written
  }
  return known->emplace(text, name).first->second;
}

const char* kind_name(ValueKind kind) {
  return kind == ValueKind::kNumber ? "a number" : kind == ValueKind::kBoolean ? "true or false" : "text";
}

}  // namespace

// The canonical text of value `x` of parameter `p` (as a table cell would say it).
std::string canonical_value(const cotune_param& p, double x, const std::string& name) {
  if (p.type == COTUNE_PARAM_CATEGORICAL) {
    if (!(x >= 0) || x != std::floor(x) || x >= double(p.num_choices))
      bad("replay executor: parameter " + name + ": " + number_key(x) + " is not a choice index");
    return std::string(cotune::view(p.choices[static_cast<size_t>(x)]));
  }
  if (p.type == COTUNE_PARAM_BOOL) return x != 0 ? "true" : "false";
  if (!std::isfinite(x)) bad("replay executor: parameter " + name + " is not a finite number");
  return number_key(x);
}

std::optional<std::string> optional_default(const cotune_param& p, const std::string& name) {
  if (!(p.flags & COTUNE_PARAM_OPTIONAL)) return std::nullopt;
  return canonical_value(p, p.default_value, name);
}

std::optional<std::string> only_value(const cotune_param& p) {
  if (p.type == COTUNE_PARAM_CATEGORICAL && p.num_choices == 1) return std::string(cotune::view(p.choices[0]));
  if ((p.type == COTUNE_PARAM_INT || p.type == COTUNE_PARAM_FLOAT) && p.values != nullptr && p.num_values == 1)
    return number_key(p.values[0]);
  return std::nullopt;
}

// A parameter as the space describes it, without a value.
TrialParam described(const cotune_param& p) {
  TrialParam t;
  t.name = std::string(cotune::view(p.name));
  t.kind = p.type == COTUNE_PARAM_CATEGORICAL ? ValueKind::kText
           : p.type == COTUNE_PARAM_BOOL      ? ValueKind::kBoolean
                                              : ValueKind::kNumber;
  t.optional_default = optional_default(p, t.name);
  t.only_value = only_value(p);
  return t;
}

std::vector<TrialParam> trial_params(const cotune_trial& trial) {
  std::vector<TrialParam> out;
  if (trial.params != nullptr && trial.config != nullptr && trial.num_params > 0) {
    for (size_t i = 0; i < trial.num_params; ++i) {
      const cotune_param& p = *trial.params[i];
      TrialParam t = described(p);
      t.value = canonical_value(p, trial.config[i], t.name);
      out.push_back(std::move(t));
    }
    return out;
  }
  json config;
  try {
    config = json::parse(cotune::view(trial.config_json));
  } catch (const std::exception& e) {
    bad(std::string("replay executor: the trial's configuration is not JSON: ") + e.what());
  }
  if (!config.is_object() || config.empty())
    bad("replay executor: the trial carries no parameters (neither params nor a configuration JSON object)");
  for (auto it = config.begin(); it != config.end(); ++it) {
    TrialParam t;
    t.name = it.key();
    const json& v = it.value();
    if (v.is_boolean()) {
      t.kind = ValueKind::kBoolean;
      t.value = v.get<bool>() ? "true" : "false";
    } else if (v.is_number()) {
      t.kind = ValueKind::kNumber;
      t.value = number_key(v.get<double>());
    } else if (v.is_string()) {
      t.kind = ValueKind::kText;
      t.value = v.get<std::string>();
    } else {
      bad("replay executor: configuration field " + t.name + ": expected a number, string or boolean, got " + v.dump());
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<TrialParam> study_params(const cotune_trial& study) {
  if (study.params == nullptr || study.num_params == 0)
    bad("replay executor: the host gave no parameters of the space to list the table's configurations by");
  std::vector<TrialParam> out;
  for (size_t i = 0; i < study.num_params; ++i) {
    out.push_back(described(*study.params[i]));
  }
  return out;
}

bool encode_values(const cotune_trial& study, const std::vector<std::string>& values, double* out, std::string* why,
                   const std::vector<bool>* unstated) {
  if (values.size() != study.num_params) return false;
  // A choice in any case, '_' and ' ' read as '-': "Selective", "H100_SXM".
  auto same = [](std::string_view a, std::string_view b) { return name_key(a) == name_key(b); };
  for (size_t i = 0; i < study.num_params; ++i) {
    const cotune_param& p = *study.params[i];
    if (unstated != nullptr && i < unstated->size() && (*unstated)[i]) {
      out[i] = std::nan("");
    } else if (p.type == COTUNE_PARAM_CATEGORICAL) {
      size_t c = 0;
      while (c < p.num_choices && !same(cotune::view(p.choices[c]), values[i])) ++c;
      if (c == p.num_choices) {
        if (why != nullptr) {
          std::string choices;
          for (size_t k = 0; k < p.num_choices; ++k) choices += (k ? ", " : "") + std::string(cotune::view(p.choices[k]));
          *why = "parameter " + std::string(cotune::view(p.name)) + ": '" + values[i] + "' is not one of " + choices;
        }
        return false;
      }
      out[i] = static_cast<double>(c);
    } else if (p.type == COTUNE_PARAM_BOOL) {
      out[i] = values[i] == "true" ? 1.0 : 0.0;
    } else {
      const std::optional<double> v = parse_number(values[i]);
      if (!v) return false;
      out[i] = *v;
    }
  }
  return true;
}

std::vector<std::pair<std::vector<std::string>, const std::vector<size_t>*>> ReplayIndex::configurations() const {
  std::vector<std::pair<std::vector<std::string>, const std::vector<size_t>*>> out;
  out.reserve(rows_.size());
  for (const auto& [k, rows] : rows_) {
    std::vector<std::string> values;
    size_t start = 0;
    for (size_t end = k.find('\x1f'); end != std::string::npos; start = end + 1, end = k.find('\x1f', start))
      values.push_back(k.substr(start, end - start));
    out.emplace_back(std::move(values), &rows);
  }
  // The hash map's order is no order: the table's is, and it is the same on every run.
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second->front() < b.second->front(); });
  return out;
}

std::string ReplayIndex::key(const std::vector<TrialParam>& params) {
  std::string k;
  for (const TrialParam& p : params) {
    if (p.kind == ValueKind::kText)  // a choice as name_key reads it: "Selective", "H100_SXM"
      k += name_key(p.value);
    else
      k += p.value;
    k += '\x1f';  // unit separator: cannot be confused with a character of a value
  }
  return k;
}

std::string ReplayIndex::signature(const std::vector<TrialParam>& params) {
  std::string s;
  for (const TrialParam& p : params) s += p.name + ':' + std::to_string(static_cast<int>(p.kind)) + '\x1f';
  return s;
}

bool ReplayIndex::built_for(std::string_view workload_json, const std::vector<TrialParam>& params) const {
  return workload_json == workload_json_ && signature(params) == signature_;
}

const std::vector<size_t>* ReplayIndex::find(const std::vector<TrialParam>& params) const {
  auto it = rows_.end();
  if (std::find(unstated_.begin(), unstated_.end(), true) == unstated_.end()) {
    it = rows_.find(key(params));
  } else {  // the table says nothing of these: match on the others
    std::vector<TrialParam> stated = params;
    for (size_t i = 0; i < stated.size() && i < unstated_.size(); ++i)
      if (unstated_[i]) stated[i].value.clear();
    it = rows_.find(key(stated));
  }
  return it == rows_.end() ? nullptr : &it->second;
}

ReplayIndex::ReplayIndex(const RunTable& table, const ReplayOptions& options, std::string workload_json,
                         const std::vector<TrialParam>& params)
    : workload_json_(std::move(workload_json)), signature_(signature(params)) {
  const std::string& file = table.file();
  std::string all_columns;
  for (const std::string& c : table.columns()) all_columns += (all_columns.empty() ? "" : ", ") + c;

  // Where each parameter's value comes from: its column, else its default.
  struct Source {
    std::optional<size_t> column;
    std::optional<std::string> fallback;  // canonical
    bool from_defaults = false;           // the fallback is the option "defaults"' value
    // zero without a column of its own: a published table's fsdp column (> 0: ZeRO-3; else the
    // fallback, or 0 as `cotune import` reads it).
    std::optional<size_t> fsdp;
  };
  std::vector<Source> sources(params.size());
  std::map<std::string, std::string> gpu_names;  // as spelt -> the catalogue's
  // A parameter's cell in canonical form; a gpu cell under the catalogue's name.
  auto read_cell = [&](const TrialParam& p, std::string_view cell, bool* ok) {
    std::string v = canonical_as(p.kind, cell, ok);
    return *ok && p.name == "gpu" && p.kind == ValueKind::kText ? catalogue_gpu(v, &gpu_names) : v;
  };
  std::set<std::string> param_names;
  unstated_.assign(params.size(), false);
  for (size_t i = 0; i < params.size(); ++i) {
    const TrialParam& p = params[i];
    param_names.insert(p.name);
    sources[i].column = table.column(p.name);
    if (std::find(options.unstated.begin(), options.unstated.end(), p.name) != options.unstated.end()) {
      if (sources[i].column)
        bad("replay executor options/unstated: " + file + " has a column " + table.columns()[*sources[i].column] +
            " for the parameter " + p.name + ": it is stated (leave it out of \"unstated\")");
      for (const auto& d : options.defaults)
        if (d.first == p.name)
          bad("replay executor options/unstated: " + p.name + " also has a value in \"defaults\": give one or the other");
      unstated_[i] = true;
      continue;
    }
    for (const auto& [name, value] : options.defaults) {
      if (name != p.name) continue;
      bool ok = false;
      std::string v = read_cell(p, cell_text(value), &ok);
      if (!ok) bad("replay executor options/defaults/" + name + ": expected " + kind_name(p.kind) + ", got " + value.dump());
      sources[i].fallback = v;
      sources[i].from_defaults = true;
    }
    // A parameter the space added later: an absent column or an empty cell holds runs at its default.
    if (!sources[i].fallback && p.optional_default) sources[i].fallback = *p.optional_default;
    // A column the table lacks for a parameter the space fixes: its runs are at that value.
    if (!sources[i].fallback && !sources[i].column && p.only_value) sources[i].fallback = *p.only_value;
    if (p.name == "zero" && !sources[i].column) sources[i].fsdp = table.column("fsdp");
  }
  // A column that is no parameter's but most likely misspells one ("micro_bach", "VPP"): the table
  // states that parameter after all. Refused where the parameter's value would otherwise come from
  // the option "defaults" (or from nowhere) and the column's cells read as the parameter's values
  // and differ from that default: the rows would replay at values they did not run. Names under five
  // letters (tp, vpp, etp) match only in another case or spelling of themselves: one edit from them
  // is another word (mtp, np). Workload columns, fsdp, task and the columns "where" filters on are
  // no candidates.
  std::set<std::string> taken(workload_columns().begin(), workload_columns().end());
  taken.insert({"fsdp", "task"});
  for (const auto& w : options.where) taken.insert(w.first);
  auto misspelt_column_of = [&](size_t i) -> std::string {
    const TrialParam& p = params[i];
    for (size_t c = 0; c < table.columns().size(); ++c) {
      const std::string& name = table.columns()[c];
      if (table.is_result_column(c) || param_names.count(name) || taken.count(name)) continue;
      const bool alike = p.name.size() < 5 ? name_key(name) == name_key(p.name)
                                           : name.rfind(p.name + "_", 0) != 0 &&  // another field of it
                                                 !cotune::support::likely_meant(name, {p.name}).empty();
      if (!alike) continue;
      bool reads = true, differs = false;
      for (const RunRow& row : table.rows()) {
        if (trim(row.cells[c]).empty()) continue;
        bool ok = false;
        const std::string v = read_cell(p, row.cells[c], &ok);
        reads = reads && ok;
        differs = differs || !sources[i].fallback || name_key(v) != name_key(*sources[i].fallback);
      }
      if (reads && differs) return name;
    }
    return "";
  };
  std::string missing, example, misspelt, mapping;
  for (size_t i = 0; i < params.size(); ++i) {
    const bool without = !unstated_[i] && !sources[i].column && !sources[i].fallback && !sources[i].fsdp;
    const bool defaulted = !sources[i].column && !sources[i].fsdp && sources[i].from_defaults;
    const std::string like = without || defaulted ? misspelt_column_of(i) : "";
    if (!like.empty()) {
      misspelt += (misspelt.empty() ? "'" : ", '") + like + "' for " + params[i].name;
      mapping += (mapping.empty() ? "" : ", ") + ("\"" + params[i].name + "\": \"" + like + "\"");
    }
    if (without) {
      missing += (missing.empty() ? "'" : ", '") + params[i].name + "'";
      example += (example.empty() ? "" : ", ") + ("\"" + params[i].name + "\": ...");
    }
  }
  if (!misspelt.empty())
    bad("replay executor: " + file + " states a parameter under a misspelt name, most likely: " + misspelt +
        " (its cells hold values of the parameter other than the default, at which the rows would replay); "
        "correct the header, or read it with the option \"columns\": {" + mapping + "}; a column that is "
        "another quantity is left out of the table, or renamed");
  if (!missing.empty())
    bad("replay executor: " + file + " has no column " + missing + " for the space's parameters of that name (its "
        "columns: " + all_columns + "); add them (a column of the table's own name is read under the parameter's "
        "with the option \"columns\": {\"tp\": \"tensor_model_parallel_size\"}), or give a value that holds for "
        "every row with the option \"defaults\": {" + example + "}. A parameter the space derives from the others "
        "(the llm space's dp, from the GPU count) may instead be left to it: \"unstated\": [\"dp\"]");
  for (const auto& d : options.defaults)
    if (!param_names.count(d.first))
      bad("replay executor options/defaults/" + d.first + ": the space has no parameter of that name");
  for (const std::string& u : options.unstated)
    if (!param_names.count(u)) bad("replay executor options/unstated: the space has no parameter " + u);

  // Workload columns: decided by the workload JSON, or left open.
  std::map<std::string, std::optional<json>> fields;
  json workload = json::parse(workload_json_, nullptr, false);
  if (workload.is_object()) {
    collect_fields(workload, fields);
    // A "model" column names the model preset, as logs of runs often do.
    if (workload.contains("model") && workload["model"].is_object() && workload["model"].contains("preset"))
      fields.emplace("model", workload["model"]["preset"]);
  }
  std::vector<std::pair<size_t, json>> decided;
  std::vector<std::string> workload_names(workload_columns().begin(), workload_columns().end());
  for (const auto& field : fields) workload_names.push_back(field.first);
  for (size_t c = 0; c < table.columns().size(); ++c) {
    const std::string& name = table.columns()[c];
    if (table.is_result_column(c) || param_names.count(name)) continue;
    auto f = fields.find(name);
    if (f != fields.end() && f->second) {
      decided.emplace_back(c, *f->second);
      compared_ += (compared_.empty() ? "" : ", ") + name + "=" + cell_text(*f->second);
    } else if (f != fields.end() || workload_columns().count(name)) {
      undecided_.push_back(c);
    } else {
      // Not read. One that most likely misspells a workload column ("global_bach") leaves rows of
      // other workloads answering this study's configurations. Not a longer name of one
      // (model_variant, dtype_detail), nor text where the column holds numbers (notes, nodes).
      const std::string meant = cotune::support::likely_meant(name, workload_names);
      const bool longer = name.rfind(meant + "_", 0) == 0 || meant.rfind(name + "_", 0) == 0;
      bool numbers = true;
      for (const RunRow& row : table.rows())
        numbers = numbers && (trim(row.cells[c]).empty() || parse_number(row.cells[c]).has_value());
      if (!meant.empty() && !longer && (numbers || !numeric_workload_column(meant, fields)))
        cotune::log(COTUNE_LOG_WARN, kComponent,
                    file + ": column " + name + " is not read" + cotune::support::did_you_mean(name, workload_names) +
                        ": rows are not compared on it, so runs of another " + meant + " may answer this study; "
                        "correct the header, or read it with the option \"columns\": {\"" + meant + "\": \"" + name +
                        "\"}");
    }
  }

  // A published table's task column (pretrain, sft, lora) against the workload's training.peft:
  // LoRA freezes the base weights, a different job from the full training of the other tasks.
  std::optional<size_t> task;
  if (std::optional<size_t> c = table.column("task"); c && !param_names.count("task") && !fields.count("task")) {
    task = c;
    const auto peft = fields.find("peft");
    const bool lora = peft != fields.end() && peft->second && peft->second->is_string() && name_key(peft->second->get<std::string>()) == "lora";
    compared_ += std::string(compared_.empty() ? "" : ", ") + "task " + (lora ? "lora" : "not lora");
    task_lora_ = lora;
  }

  // A parameter the space fixes to one value (the cluster's GPU type and count): a row at another
  // value is a run of another workload.
  std::vector<std::pair<size_t, size_t>> fixed;  // (parameter, column)
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].only_value && sources[i].column) fixed.emplace_back(i, *sources[i].column);

  const std::vector<RunRow>& rows = table.rows();
  // Why a row is not of this workload: each cell that says so ("column global_batch: '128' where
  // the workload says 256"); empty when it is.
  auto mismatches = [&](const RunRow& row) {
    std::vector<std::string> out;
    // An empty workload cell does not say the row is of another workload (a default left unstated).
    for (const auto& [c, value] : decided) {
      const std::string& cell = row.cells[c];
      if (trim(cell).empty() || cell_matches(cell, value)) continue;
      if (table.columns()[c] == "gpu" && value.is_string() &&
          name_key(catalogue_gpu(cell, &gpu_names)) == name_key(catalogue_gpu(value.get<std::string>(), &gpu_names)))
        continue;
      out.push_back("column " + table.columns()[c] + ": '" + std::string(trim(cell)) + "' where the workload says " +
                    cell_text(value));
    }
    for (const auto& [i, c] : fixed) {
      const std::string& cell = row.cells[c];
      bool ok = false;
      if (trim(cell).empty()) continue;
      const std::string v = read_cell(params[i], cell, &ok);
      if (ok && name_key(v) != name_key(*params[i].only_value))
        out.push_back("column " + table.columns()[c] + ": '" + std::string(trim(cell)) + "' where the space's " +
                      params[i].name + " can only be " + *params[i].only_value);
    }
    if (task && !trim(row.cells[*task]).empty() && (name_key(row.cells[*task]) == "lora") != task_lora_)
      out.push_back("column task: '" + std::string(trim(row.cells[*task])) + "' where the workload's training.peft is " +
                    (task_lora_ ? "lora" : "none"));
    return out;
  };
  size_t closest = std::numeric_limits<size_t>::max();  // mismatches of the row first_mismatch_ names

  std::vector<TrialParam> values = params;
  size_t unstated_rows = 0;  // rows of the workload left out: a parameter's cell is empty
  std::vector<std::pair<size_t, size_t>> empty_cells(params.size());  // per parameter: rows, first line
  // Per undecided column: canonical value -> (as first spelt, its line).
  std::vector<std::map<std::string, std::pair<std::string, size_t>>> open_values(undecided_.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    const RunRow& row = rows[r];
    if (const std::vector<std::string> why = mismatches(row); !why.empty()) {
      if (why.size() < closest) {  // the row nearest to the workload says best what differs
        closest = why.size();
        first_mismatch_ = file + " line " + std::to_string(row.line) + ", ";
        for (size_t k = 0; k < why.size(); ++k) first_mismatch_ += (k ? "; " : "") + why[k];
      }
      continue;
    }
    ++workload_rows_;
    // A row that leaves a parameter's cell empty, with no default for it, answers no configuration:
    // every such cell is counted, so that the warning names each column "defaults" should fill.
    bool stated = true;
    for (size_t i = 0; i < params.size(); ++i) {
      const Source& s = sources[i];
      if (unstated_[i] || s.fsdp || !s.column || s.fallback || !trim(row.cells[*s.column]).empty()) continue;
      if (empty_cells[i].first++ == 0) empty_cells[i].second = row.line;
      stated = false;
    }
    if (!stated) {
      ++unstated_rows;
      continue;
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (unstated_[i]) {
        values[i].value.clear();
        continue;
      }
      const Source& s = sources[i];
      if (s.fsdp) {
        const std::optional<double> ranks = parse_number(row.cells[*s.fsdp]);
        values[i].value = ranks && *ranks > 0 ? "3" : s.fallback.value_or("0");
        continue;
      }
      const std::string cell = s.column ? row.cells[*s.column] : std::string();
      if (trim(cell).empty()) {  // with a default: the pass above left out the rows without one
        values[i].value = *s.fallback;
        continue;
      }
      bool ok = false;
      values[i].value = read_cell(params[i], cell, &ok);
      if (!ok)
        bad(file + " line " + std::to_string(row.line) + ", column " + params[i].name + ": expected " +
            kind_name(params[i].kind) + " for the parameter " + params[i].name + ", got '" + cell + "'");
    }
    rows_[key(values)].push_back(r);
    for (size_t u = 0; u < undecided_.size(); ++u) {
      const std::string_view cell = trim(row.cells[undecided_[u]]);
      if (!cell.empty()) open_values[u].emplace(canonical(cell), std::pair{std::string(cell), row.line});
    }
  }
  if (unstated_rows > 0) {
    std::string which, example;
    for (size_t i = 0; i < params.size(); ++i) {
      if (empty_cells[i].first == 0) continue;
      which += (which.empty() ? "" : "; ") + table.columns()[*sources[i].column] + " in " +
               std::to_string(empty_cells[i].first) + " (first line " + std::to_string(empty_cells[i].second) + ")";
      example += (example.empty() ? "" : ", ") + ("\"" + params[i].name + "\": ...");
    }
    cotune::log(COTUNE_LOG_WARN, kComponent,
                file + ": " + std::to_string(unstated_rows) + " row(s) of this workload leave a parameter's cell empty: " +
                    which + "; they answer no configuration (give the value such a cell stands for with the option "
                    "\"defaults\": {" + example + "})");
  }
  // Rows that differ in a workload column are runs of different workloads (another sequence length,
  // another model, another dtype): a study must not compare them as layouts of one.
  for (size_t u = 0; u < undecided_.size(); ++u) {
    if (open_values[u].size() < 2) continue;
    const std::string& name = table.columns()[undecided_[u]];
    std::string list;
    for (const auto& v : open_values[u])
      list += (list.empty() ? "'" : ", '") + v.second.first + "' (line " + std::to_string(v.second.second) + ")";
    bad("replay executor: " + file + ": the rows of this workload hold several values of " + name + " (" + list +
        "), which the workload does not choose between: they are runs of different workloads. State " + name +
        " in the workload (a preset's own value is not known to the executor), or choose the rows with the option "
        "\"where\": {\"" + name + "\": ...}");
  }
}

}  // namespace cotune_replay
