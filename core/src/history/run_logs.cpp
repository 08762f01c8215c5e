// Runs from Megatron-LM logs, W&B exports and sacct output (see run_logs.hpp).
#include <cotune/core/errors.hpp>
#include <cotune/core/history/table_runs.hpp>
#include <cotune/core/history/run_logs.hpp>
#include <cotune/support/column_spellings.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace cotune::core {
namespace {

using Cells = std::map<std::string, std::string>;

constexpr size_t kMaxLine = size_t{64} * 1024;  // longer lines are cut: no log line needs more

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

bool is_none(const std::string& v) {
  const std::string l = lower(v);
  return l.empty() || l == "none" || l == "null" || l == "nan";
}

bool truthy(const std::string& v) {
  const std::string l = lower(v);
  return l == "true" || l == "1" || l == "yes";
}

bool number_of(const std::string& text, double* out) {
  const std::string t = trim(text);
  if (t.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

std::string number_text(double v) {
  std::ostringstream o;
  o.precision(15);
  o << v;
  return o.str();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Megatron-LM argument names (as its argument dump, W&B configs and job comments write them) and
// the schema column each gives, as is: the table cotune::support shares with the replay executor.
const std::vector<support::ColumnSpelling>& kDirect = support::megatron_argument_spellings();


// Megatron-LM's metric names in W&B (iteration-time in seconds, throughput in TFLOP/s per GPU) and
// in its log lines, as the import's recognised metric columns.
const std::pair<const char*, const char*> kMetricNames[] = {
    {"iteration-time", "step_time_s"},
    {"iteration_time", "step_time_s"},
    {"throughput", "tflops_per_gpu"},
    {"elapsed time per iteration (ms)", "step_time_ms"},
    {"throughput per gpu (tflop/s/gpu)", "tflops_per_gpu"},
    {"lm loss", "loss"},
    {"runtime", "wall_time_s"},
    {"_runtime", "wall_time_s"},
};

// Megatron-LM arguments cells_from_settings reads besides kDirect.
const char* const kCombined[] = {"padded_vocab_size", "vocab_size", "group_query_attention", "num_query_groups",
                                 "kv_channels", "untie_embeddings_and_output_weights", "use_distributed_optimizer",
                                 "recompute_granularity", "num_layers_per_virtual_pipeline_stage",
                                 "moe_shared_expert_intermediate_size", "fp8", "bf16", "fp16", "hidden_dropout",
                                 "attention_dropout", "moe_token_dispatcher_type", "moe_enable_deepep",
                                 "position_embedding_type", "use_rotary_position_embeddings", "rotary_base"};

}  // namespace

std::string megatron_argument_column(const std::string& name) {
  for (const auto& [from, to] : kDirect)
    if (name == from) return std::string(to);
  return "";
}

namespace {

bool known_setting(const std::string& name, const ColumnCheck& is_column) {
  for (const auto& d : kDirect)
    if (name == d.first) return true;
  for (const char* k : kCombined)
    if (name == k) return true;
  return is_column && is_column(name);
}

// The metric column a name gives ("" when none).
std::string metric_column(const std::string& name) {
  if (recognise_metric(name)) return name;
  const std::string l = lower(name);
  for (const auto& [from, to] : kMetricNames)
    if (l == from) return to;
  return "";
}

// Reads a file's lines (each cut at kMaxLine).
std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot open it");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > kMaxLine) line.resize(kMaxLine);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

// "[default0]:" or "[rank3]: " prefixes torchrun and launchers put before each line, and srun
// --label's "12: ".
std::string without_prefix(const std::string& line) {
  std::string s = line;
  for (;;) {
    const size_t lead = s.find_first_not_of(' ');
    if (lead != std::string::npos && lead > 0 && (s[lead] == '[' || std::isdigit(static_cast<unsigned char>(s[lead])))) {
      // a prefix may follow another after a space ("3: [default0]:")
      const std::string rest = s.substr(lead);
      if (rest[0] == '[' ? rest.find("]:") < 40 : rest.find(':') < 7) s = rest;
    }
    if (!s.empty() && s[0] == '[') {
      const size_t close = s.find("]:");
      if (close == std::string::npos || close > 40) break;
      s.erase(0, close + 2);
      continue;
    }
    size_t i = 0;
    while (i < s.size() && s[i] == ' ') ++i;
    const size_t digits = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i > digits && i < s.size() && s[i] == ':' && i - digits <= 6) {
      s.erase(0, i + 1);
      continue;
    }
    break;
  }
  return s;
}

CsvTable table_of(const std::string& source, const std::vector<std::pair<size_t, Cells>>& rows) {
  CsvTable t;
  t.source = source;
  std::set<std::string> columns;
  for (const auto& [line, cells] : rows)
    for (const auto& [k, v] : cells) columns.insert(k);
  t.header.assign(columns.begin(), columns.end());
  for (const auto& [line, cells] : rows) {
    CsvRecord r;
    r.line = line;
    for (const std::string& c : t.header) {
      auto it = cells.find(c);
      r.fields.push_back(it == cells.end() ? "" : it->second);
    }
    t.rows.push_back(std::move(r));
  }
  return t;
}

// Each run's metrics under their canonical name, in canonical units (iteration_time_ms=300 is
// step_time_s 0.3), so that runs naming one metric differently share one column; per-GPU figures
// keep their name (their conversion needs the row's GPUs, which import applies).
void canonical_metrics(Cells& cells) {
  Cells renamed;
  for (auto it = cells.begin(); it != cells.end();) {
    const std::optional<MetricConversion> m = recognise_metric(it->first);
    double v = 0;
    if (m && m->gpus == MetricConversion::PerGpu::kNone && it->first != m->canonical && number_of(it->second, &v)) {
      renamed[m->canonical] = number_text(v * m->factor);
      it = cells.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [k, v] : renamed) cells.emplace(k, v);
}

void apply_settings(Cells& cells, const std::map<std::string, std::string>& settings) {
  canonical_metrics(cells);
  for (const auto& [k, v] : settings)
    if (!cells.count(k)) cells[k] = v;
}

// A note when no run said which GPU ran it: they are filed under the schema's default.
void note_default_gpu(ConvertedRuns& out, const std::vector<std::pair<size_t, Cells>>& rows) {
  size_t without = 0;
  for (const auto& [line, cells] : rows) without += cells.count("gpu") ? 0 : 1;
  if (without > 0)
    out.notes.push_back(std::to_string(without) + " run(s) do not say which GPU ran them: filed under h100-sxm, the "
                        "default (the GPU is part of the workload); --set gpu=... says which");
}

// ---- Megatron-LM logs

// "  tensor_model_parallel_size ...................... 8" -> name, value.
bool argument_line(const std::string& line, std::string* name, std::string* value) {
  const std::string s = trim(line);
  size_t i = 0;
  while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
  if (i == 0 || i >= s.size() || s[i] != ' ') return false;
  size_t j = i + 1;
  size_t dots = 0;
  while (j < s.size() && s[j] == '.') ++j, ++dots;
  if (dots < 3) return false;
  *name = s.substr(0, i);
  *value = trim(s.substr(j));
  return true;
}

// The number after `label` on the line, if any.
bool number_after(const std::string& line, const std::string& label, double* out) {
  const size_t at = line.find(label);
  if (at == std::string::npos) return false;
  const char* start = line.c_str() + at + label.size();
  char* end = nullptr;
  const double v = std::strtod(start, &end);
  if (end == start || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

ConvertedRuns megatron_log(const std::string& path, const std::map<std::string, std::string>& settings,
                           const ColumnCheck& is_column) {
  const std::vector<std::string> lines = read_lines(path);
  struct Run {
    size_t line = 0;
    std::map<std::string, std::string> args;
    bool in_args = false;
    std::vector<double> step_ms, tflops;
    bool oom = false, error = false;
  };
  std::vector<Run> runs;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string s = without_prefix(lines[i]);
    if (s.find("-- arguments --") != std::string::npos || trim(s).rfind("------------------------ arguments", 0) == 0) {
      runs.push_back({});
      runs.back().line = i + 1;
      runs.back().in_args = true;
      continue;
    }
    if (runs.empty()) continue;
    Run& r = runs.back();
    if (r.in_args) {
      if (s.find("end of arguments") != std::string::npos) {
        r.in_args = false;
        continue;
      }
      std::string name, value;
      if (argument_line(s, &name, &value)) r.args[name] = value;
      continue;
    }
    double v = 0;
    if (number_after(s, "elapsed time per iteration (ms):", &v)) r.step_ms.push_back(v);
    if (number_after(s, "throughput per GPU (TFLOP/s/GPU):", &v)) r.tflops.push_back(v);
    if (s.find("CUDA out of memory") != std::string::npos || s.find("OutOfMemoryError") != std::string::npos)
      r.oom = true;
    if (s.find("Traceback (most recent call last)") != std::string::npos) r.error = true;
  }
  ConvertedRuns out;
  if (runs.empty())
    throw UserError(path + ": no Megatron-LM argument dump ('---- arguments ----' ... 'end of arguments'): not a "
                           "Megatron-LM log (--format csv, wandb or sacct for the others)");
  std::vector<std::pair<size_t, Cells>> rows;
  for (const Run& r : runs) {
    Cells cells = cells_from_settings(r.args, is_column);
    apply_settings(cells, settings);
    if (r.oom) {
      cells["status"] = "oom";
    } else if (!r.step_ms.empty()) {
      // The first logged interval holds the warm-up (allocation, compilation): left out when there
      // are others.
      if (r.step_ms.size() == 1)
        out.notes.push_back("the run at line " + std::to_string(r.line) + " logged one interval: its step time "
                            "includes the warm-up (log more often, --log-interval, for a steady one)");
      std::vector<double> steady(r.step_ms.begin() + (r.step_ms.size() > 1 ? 1 : 0), r.step_ms.end());
      cells["step_time_ms"] = number_text(median(steady));
      if (!r.tflops.empty()) {
        std::vector<double> t(r.tflops.begin() + (r.tflops.size() > 1 ? 1 : 0), r.tflops.end());
        cells["tflops_per_gpu"] = number_text(median(t));
      }
    } else if (r.error) {
      cells["status"] = "failed";
    } else {
      out.skipped.push_back({r.line, "no iteration was logged after the arguments (the job was still starting, or "
                                     "its log was cut)"});
      continue;
    }
    rows.emplace_back(r.line, std::move(cells));
  }
  note_default_gpu(out, rows);
  out.table = table_of(path, rows);
  return out;
}

// ---- W&B runs tables

// A W&B column name as the setting it stands for: "config.model.num_layers" -> "num_layers".
std::string setting_name(const std::string& column) {
  std::string n = column;
  const size_t dot = n.find_last_of('.');
  if (dot != std::string::npos && metric_column(n).empty()) n = n.substr(dot + 1);
  return n;
}

ConvertedRuns wandb_table(const std::string& path, const std::map<std::string, std::string>& settings,
                          const ColumnCheck& is_column) {
  const CsvTable t = read_csv_file(path);
  long state = -1;
  for (size_t c = 0; c < t.header.size(); ++c)
    if (lower(t.header[c]) == "state") state = static_cast<long>(c);
  if (state < 0) throw UserError(path + ": no State column: not a W&B runs export");
  ConvertedRuns out;
  std::set<std::string> unused;
  std::vector<std::pair<size_t, Cells>> rows;
  for (const CsvRecord& rec : t.rows) {
    const std::string st = lower(trim(rec.fields[static_cast<size_t>(state)]));
    std::map<std::string, std::string> named;
    Cells metrics;
    for (size_t c = 0; c < t.header.size() && c < rec.fields.size(); ++c) {
      if (static_cast<long>(c) == state || trim(rec.fields[c]).empty()) continue;
      const std::string name = setting_name(t.header[c]);
      const std::string metric = metric_column(name);
      if (!metric.empty()) metrics[metric] = trim(rec.fields[c]);
      else named[name] = trim(rec.fields[c]);
    }
    Cells cells = cells_from_settings(named, is_column);
    for (const auto& [k, v] : named)
      if (!known_setting(k, is_column)) unused.insert(k);
    if (st == "running" || st == "pending") {
      out.skipped.push_back({rec.line, "State " + st + ": not finished"});
      continue;
    }
    if (st == "killed") {
      out.skipped.push_back({rec.line, "State killed: stopped by hand, not a measurement"});
      continue;
    }
    if (st == "crashed" || st == "failed") cells["status"] = "failed";
    else if (st != "finished")
      out.skipped.push_back({rec.line, "State '" + st + "': expected finished, crashed, failed, killed or running"});
    if (st != "finished" && st != "crashed" && st != "failed") continue;
    if (st == "finished") cells.insert(metrics.begin(), metrics.end());
    else if (metrics.count("wall_time_s")) cells["wall_time_s"] = metrics["wall_time_s"];  // what the crash cost
    apply_settings(cells, settings);
    rows.emplace_back(rec.line, std::move(cells));
  }
  if (!unused.empty()) {
    std::string list;
    for (const std::string& u : unused) list += (list.empty() ? "" : ", ") + u;
    out.notes.push_back(std::to_string(unused.size()) + " columns name no setting of the space's table schema or Megatron-LM and no metric: " +
                        list);
  }
  note_default_gpu(out, rows);
  out.table = table_of(path, rows);
  return out;
}

// ---- sacct -P

std::vector<std::string> split_bars(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, '|')) out.push_back(cell);
  if (!line.empty() && line.back() == '|') out.push_back("");
  return out;
}

// "2-03:04:05", "03:04:05", "04:05.123" -> seconds.
bool elapsed_seconds(const std::string& text, double* out) {
  double days = 0;
  std::string rest = trim(text);
  const size_t dash = rest.find('-');
  if (dash != std::string::npos) {
    if (!number_of(rest.substr(0, dash), &days)) return false;
    rest = rest.substr(dash + 1);
  }
  std::vector<double> parts;
  std::istringstream in(rest);
  for (std::string p; std::getline(in, p, ':');) {
    double v = 0;
    if (!number_of(p, &v)) return false;
    parts.push_back(v);
  }
  if (parts.empty() || parts.size() > 3) return false;
  double s = 0;
  for (double p : parts) s = s * 60 + p;
  *out = days * 86400 + s;
  return true;
}

// key=value words (separated by spaces, commas or semicolons), or a JSON object.
std::map<std::string, std::string> settings_in(const std::string& text) {
  std::map<std::string, std::string> out;
  const std::string t = trim(text);
  if (!t.empty() && t[0] == '{') {
    const nlohmann::json j = nlohmann::json::parse(t, nullptr, false);
    if (j.is_object())
      for (auto it = j.begin(); it != j.end(); ++it)
        out[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
    return out;
  }
  std::string word;
  std::istringstream in(t);
  for (char ch; in.get(ch);) {
    if (ch == ' ' || ch == ',' || ch == ';' || ch == '\t') {
      if (const size_t eq = word.find('='); eq != std::string::npos && eq > 0) out[word.substr(0, eq)] = word.substr(eq + 1);
      word.clear();
    } else {
      word += ch;
    }
  }
  if (const size_t eq = word.find('='); eq != std::string::npos && eq > 0) out[word.substr(0, eq)] = word.substr(eq + 1);
  return out;
}

ConvertedRuns sacct_output(const std::string& path, const std::map<std::string, std::string>& settings,
                           const ColumnCheck& is_column) {
  const std::vector<std::string> lines = read_lines(path);
  size_t h = 0;
  while (h < lines.size() && trim(lines[h]).empty()) ++h;
  if (h == lines.size()) throw UserError(path + ": empty");
  if (lines[h].find('|') == std::string::npos)
    throw UserError(path + ": line " + std::to_string(h + 1) + ": sacct output in columns; import reads its -P form, "
                    "one '|' between fields (sacct -P --format=JobID,JobName,State,Elapsed,AllocTRES,Comment)");
  const std::vector<std::string> header = split_bars(lines[h]);
  auto col = [&](const char* name) -> long {
    for (size_t c = 0; c < header.size(); ++c)
      if (lower(trim(header[c])) == lower(name)) return static_cast<long>(c);
    return -1;
  };
  const long id = col("JobID"), state = col("State"), elapsed = col("Elapsed"), tres = col("AllocTRES"),
             comment = col("Comment"), name = col("JobName");
  if (id < 0 || state < 0)
    throw UserError(path + ": line " + std::to_string(h + 1) + ": expected sacct -P output with JobID and State columns "
                    "(sacct -P --format=JobID,JobName,State,Elapsed,AllocTRES,Comment)");
  ConvertedRuns out;
  std::vector<std::pair<size_t, Cells>> rows;
  for (size_t i = h + 1; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    const std::vector<std::string> f = split_bars(lines[i]);
    auto cell = [&](long c) { return c >= 0 && static_cast<size_t>(c) < f.size() ? trim(f[static_cast<size_t>(c)]) : ""; };
    if (cell(id).find('.') != std::string::npos) continue;  // a job step: its job has the row
    std::string st = cell(state);
    if (const size_t space = st.find(' '); space != std::string::npos) st.resize(space);  // "CANCELLED by 1000"
    Cells cells;
    std::map<std::string, std::string> named = settings_in(cell(comment));
    for (const auto& [k, v] : settings_in(cell(name))) named.emplace(k, v);
    for (const auto& [k, v] : named)
      if (const std::string m = metric_column(k); !m.empty()) cells[m] = v;
    const Cells config = cells_from_settings(named, is_column);
    if (config.empty()) {
      out.skipped.push_back({i + 1, "job " + cell(id) + ": no configuration: neither Comment nor JobName holds "
                                    "key=value settings (tp=8 pp=4 ...) or a JSON object"});
      continue;
    }
    cells.insert(config.begin(), config.end());
    // COMPLETED, FAILED/NODE_FAIL/BOOT_FAIL, OUT_OF_MEMORY, TIMEOUT/DEADLINE: a measurement;
    // CANCELLED, PREEMPTED, RUNNING, ...: none.
    const std::optional<TrialStatus> status = measured_status(st);
    if (!status || !counts_against_budget(*status)) {
      out.skipped.push_back({i + 1, "job " + cell(id) + ": State " + st + ": not a finished measurement"});
      continue;
    }
    if (*status != TrialStatus::kOk) cells["status"] = std::string(to_string(*status));
    double seconds = 0;
    if (elapsed_seconds(cell(elapsed), &seconds)) cells["wall_time_s"] = number_text(seconds);
    // AllocTRES "billing=64,cpu=64,gres/gpu:h100=16,mem=...,node=2": the GPUs, and their type.
    const std::string t = cell(tres);
    if (const size_t g = t.find("gres/gpu"); g != std::string::npos) {
      const size_t eq = t.find('=', g), end = t.find(',', g);
      const std::string kind = t.substr(g + 8, eq == std::string::npos ? 0 : eq - g - 8);
      double n = 0;
      if (eq != std::string::npos && number_of(t.substr(eq + 1, end == std::string::npos ? std::string::npos : end - eq - 1), &n) &&
          !cells.count("gpus") && !cells.count("dp"))
        cells["gpus"] = number_text(n);
      if (kind.size() > 1 && kind[0] == ':' && !cells.count("gpu")) cells["gpu"] = kind.substr(1);
    }
    apply_settings(cells, settings);
    rows.emplace_back(i + 1, std::move(cells));
  }
  note_default_gpu(out, rows);
  out.table = table_of(path, rows);
  return out;
}

}  // namespace

std::optional<RunsFormat> runs_format_named(const std::string& name) {
  if (name == "csv") return RunsFormat::kCsv;
  if (name == "megatron-log") return RunsFormat::kMegatronLog;
  if (name == "wandb") return RunsFormat::kWandb;
  if (name == "sacct") return RunsFormat::kSacct;
  return std::nullopt;
}

const char* runs_format_name(RunsFormat f) {
  switch (f) {
    case RunsFormat::kMegatronLog: return "megatron-log";
    case RunsFormat::kWandb: return "wandb";
    case RunsFormat::kSacct: return "sacct";
    case RunsFormat::kCsv: break;
  }
  return "csv";
}

std::map<std::string, std::string> cells_from_settings(const std::map<std::string, std::string>& s,
                                                       const ColumnCheck& is_column) {
  Cells c;
  auto get = [&](std::string_view k) -> const std::string* {
    auto it = s.find(std::string(k));
    return it == s.end() || is_none(it->second) ? nullptr : &it->second;
  };
  // The schema's own names first, then Megatron-LM's for what they did not say.
  for (const auto& [k, v] : s)
    if (is_column && is_column(k) && !is_none(v)) c[k] = v;
  for (const auto& [from, to] : kDirect)
    if (const std::string* v = get(from); v && !c.count(std::string(to))) c[std::string(to)] = *v;
  for (const char* b : {"sp", "gated_mlp", "overlap_grad_reduce", "overlap_moe_comm", "tp_comm_overlap",
                        "cross_entropy_fusion"})
    if (c.count(b)) c[b] = truthy(c[b]) ? "true" : "false";
  // The dispatchers the model tells apart (allgather is not modelled: left unset).
  if (const std::string* v = get("moe_token_dispatcher_type"); v && !c.count("moe_dispatcher") &&
                                                               (*v == "alltoall" || *v == "flex"))
    c["moe_dispatcher"] = *v;
  if (const std::string* v = get("moe_enable_deepep"); v && truthy(*v)) c["moe_dispatcher"] = "flex";
  // FP8 scaling (--fp8-recipe): delayed scaling is per tensor too; a custom recipe is left unset.
  if (const std::string* v = get("fp8_recipe"); v && !c.count("fp8_recipe")) {
    if (*v == "delayed" || *v == "tensorwise") c["fp8_recipe"] = "tensorwise";
    else if (*v == "mxfp8" || *v == "blockwise") c["fp8_recipe"] = *v;
  }
  // The gradient buffer's dtype: Megatron-LM's --grad-reduce-in-bf16, Megatron-Core's and
  // Megatron-Bridge's grad_reduce_in_fp32 (DDP and mixed-precision configs).
  if (!c.count("grad_reduce")) {
    if (const std::string* v = get("grad_reduce_in_bf16"); v && truthy(*v)) c["grad_reduce"] = "bf16";
    if (const std::string* v = get("grad_reduce_in_fp32"); v) c["grad_reduce"] = truthy(*v) ? "fp32" : "bf16";
  }
  if (const std::string* v = get("padded_vocab_size"); v && !c.count("vocab")) c["vocab"] = *v;
  if (const std::string* v = get("vocab_size"); v && !c.count("vocab")) c["vocab"] = *v;
  if (const std::string* g = get("group_query_attention"); g && truthy(*g) && get("num_query_groups") && !c.count("kv_heads"))
    c["kv_heads"] = *get("num_query_groups");
  // kv_channels is always printed; only a head width other than hidden / heads says anything.
  double h = 0, a = 0, kvc = 0;
  if (const std::string* v = get("kv_channels"); v && !c.count("head_dim") && c.count("hidden") && c.count("heads") &&
                                                   number_of(c["hidden"], &h) && number_of(c["heads"], &a) &&
                                                   number_of(*v, &kvc) && a > 0 && kvc != h / a)
    c["head_dim"] = *v;
  // Rotary embeddings: rotary_base is printed for every model, and counts only where the position
  // embedding is rotary (a model with learned positions has no rope_base).
  const std::string* position = get("position_embedding_type");
  const std::string* legacy_rotary = get("use_rotary_position_embeddings");
  if (!c.count("rope_base") &&
      ((position && support::rotary_position_embedding(*position)) || (legacy_rotary && truthy(*legacy_rotary)))) {
    const std::string* base = get("rotary_base");
    c["rope_base"] = base ? *base : "10000";
  }
  if (const std::string* v = get("untie_embeddings_and_output_weights"); v && !c.count("tie_embeddings"))
    c["tie_embeddings"] = truthy(*v) ? "false" : "true";
  if (const std::string* v = get("use_distributed_optimizer"); v && !c.count("zero")) c["zero"] = truthy(*v) ? "1" : "0";
  if (const std::string* v = get("recompute_granularity"); v && !c.count("recompute")) c["recompute"] = lower(*v);
  if (!c.count("recompute") && s.count("recompute_granularity")) c["recompute"] = "none";
  if (const std::string* v = get("num_layers_per_virtual_pipeline_stage"); v && !c.count("vpp")) {
    double layers = 0, pp = 1, per = 0;
    if (c.count("layers") && number_of(c["layers"], &layers) && number_of(*v, &per) && per > 0 &&
        (!c.count("pp") || number_of(c["pp"], &pp)) && pp > 0)
      c["vpp"] = number_text(layers / (pp * per));
  }
  if (const std::string* v = get("moe_shared_expert_intermediate_size"); v && !c.count("shared_experts")) {
    c["shared_experts"] = "1";
    c["shared_expert_ffn_hidden"] = *v;
  }
  if (!c.count("dtype")) {
    const std::string* fp8 = get("fp8");
    if (fp8 && lower(*fp8) != "false") c["dtype"] = "fp8";
    else if (const std::string* v = get("bf16"); v && truthy(*v)) c["dtype"] = "bf16";
    else if (const std::string* v2 = get("fp16"); v2 && truthy(*v2)) c["dtype"] = "fp16";
  }
  double hd = 0, ad = 0;
  const std::string* hidden_dropout = get("hidden_dropout");
  const std::string* attention_dropout = get("attention_dropout");
  if (!c.count("dropout") && (hidden_dropout || attention_dropout))
    c["dropout"] = (hidden_dropout && number_of(*hidden_dropout, &hd) && hd > 0) ||
                           (attention_dropout && number_of(*attention_dropout, &ad) && ad > 0)
                       ? "true"
                       : "false";
  return c;
}

RunsFormat detect_runs_format(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot open it");
  std::string head(size_t{1} << 20, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (head.find("-- arguments --") != std::string::npos && head.find("end of arguments") != std::string::npos)
    return RunsFormat::kMegatronLog;
  const std::string first = head.substr(0, head.find('\n'));
  // sacct's header, '|'-separated (-P) or in columns (read as sacct to say it needs -P).
  if (lower(trim(first)).rfind("jobid", 0) == 0) return RunsFormat::kSacct;
  const std::string l = lower(first);
  if (l.find("state") != std::string::npos)
    for (const auto& [from, to] : kDirect)
      if (l.find(from) != std::string::npos) return RunsFormat::kWandb;
  return RunsFormat::kCsv;
}

ConvertedRuns read_runs_file(const std::string& path, RunsFormat format,
                             const std::map<std::string, std::string>& settings, const ColumnCheck& is_column) {
  switch (format) {
    case RunsFormat::kMegatronLog: return megatron_log(path, settings, is_column);
    case RunsFormat::kWandb: return wandb_table(path, settings, is_column);
    case RunsFormat::kSacct: return sacct_output(path, settings, is_column);
    case RunsFormat::kCsv: break;
  }
  ConvertedRuns out;
  out.table = read_csv_file(path);
  if (!settings.empty()) {
    for (const auto& [k, v] : settings)
      if (out.table.column(k) < 0) {
        out.table.header.push_back(k);
        for (CsvRecord& r : out.table.rows) r.fields.push_back(v);
      } else {
        const size_t c = static_cast<size_t>(out.table.column(k));
        for (CsvRecord& r : out.table.rows)
          if (c < r.fields.size() && trim(r.fields[c]).empty()) r.fields[c] = v;
      }
  }
  return out;
}

}  // namespace cotune::core
