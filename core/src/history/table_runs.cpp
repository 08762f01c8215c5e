#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/history/run_logs.hpp>
#include <cotune/core/history/table_runs.hpp>
#include <cotune/core/run/study_setup.hpp>
#include <cotune/core/studyfile/study_file.hpp>
#include <cotune/support/column_spellings.hpp>
#include <cotune/support/likely_meant.hpp>

#include "studyfile/json_checks.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <stdexcept>

namespace cotune::core {
namespace {

using nlohmann::json;
using PerGpu = MetricConversion::PerGpu;

struct MetricName {
  const char* column;
  MetricConversion conversion;
};

const std::vector<MetricName>& metric_table() {
  static const std::vector<MetricName> t = {
      {"step_time_s", {"step_time_s", 1, PerGpu::kNone}},
      {"step_time_ms", {"step_time_s", 1e-3, PerGpu::kNone}},
      {"iteration_time_s", {"step_time_s", 1, PerGpu::kNone}},
      {"iteration_time_ms", {"step_time_s", 1e-3, PerGpu::kNone}},
      {"tokens_per_s", {"tokens_per_s", 1, PerGpu::kNone}},
      {"tokens_per_s_per_gpu", {"tokens_per_s", 1, PerGpu::kMultiply}},
      {"samples_per_s", {"samples_per_s", 1, PerGpu::kNone}},
      {"samples_per_s_per_gpu", {"samples_per_s", 1, PerGpu::kMultiply}},
      // The same as trainers' logs often spell them (Hugging Face's train_samples_per_second aside).
      {"tokens_per_sec", {"tokens_per_s", 1, PerGpu::kNone}},
      {"tokens_per_sec_per_gpu", {"tokens_per_s", 1, PerGpu::kMultiply}},
      {"samples_per_sec", {"samples_per_s", 1, PerGpu::kNone}},
      {"samples_per_sec_per_gpu", {"samples_per_s", 1, PerGpu::kMultiply}},
      {"tflops_per_gpu", {"tflops_per_gpu", 1, PerGpu::kNone}},
      {"tflops", {"tflops_per_gpu", 1, PerGpu::kDivide}},
      {"mfu", {"mfu", 1, PerGpu::kNone}},
      {"mfu_percent", {"mfu", 1e-2, PerGpu::kNone}},
      {"mfu_pct", {"mfu", 1e-2, PerGpu::kNone}},  // as published tables write it
      {"peak_mem_gib", {"peak_mem_gib", 1, PerGpu::kNone}},
      {"peak_mem_mib", {"peak_mem_gib", 1.0 / 1024, PerGpu::kNone}},
      {"peak_mem_gb", {"peak_mem_gib", 1e9 / 1073741824.0, PerGpu::kNone}},
      {"peak_memory_bytes", {"peak_mem_gib", 1.0 / 1073741824.0, PerGpu::kNone}},
      {"cost_per_mtokens", {"cost_per_mtokens", 1, PerGpu::kNone}},
      // How long the job ran (what a study's GPU-hours count; cotune's executors report it).
      {"wall_time_s", {"wall_time_s", 1, PerGpu::kNone}},
  };
  return t;
}

bool parse_number(const std::string& t, double* out) {
  try {
    size_t used = 0;
    const double v = std::stod(t, &used);
    if (used != t.size() || !std::isfinite(v)) return false;
    *out = v;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Cells become JSON strings (workloads, metric names, stored rows), which must be UTF-8; the
// JSON library's strict check says whether they are.
bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// The header after the mapping, checked.
std::vector<std::string> mapped_header(const CsvTable& table,
                                       const std::vector<std::pair<std::string, std::string>>& mapping,
                                       const TableSchema& schema) {
  std::vector<std::string> header = table.header;
  std::vector<bool> mapped(header.size(), false);
  for (const auto& [from, to] : mapping) {
    const long i = table.column(from);
    if (i < 0) throw UserError("--map '" + from + "=" + to + "': " + table.source + " has no column '" + from + "'");
    header[size_t(i)] = canonical_column(to, schema, table.header);  // a spelling the tables take, as a header's
    mapped[size_t(i)] = true;
  }
  for (size_t i = 0; i < header.size(); ++i)
    if (!mapped[i]) header[i] = canonical_column(header[i], schema, header);
  for (size_t i = 0; i < header.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (header[i] == header[j])
        throw UserError(table.source + ": columns '" + table.header[j] + "' and '" + table.header[i] +
                        "' both stand for '" + header[i] + "' (after --map)");
  return header;
}

// The row's value of `column` after conversion; throws std::invalid_argument naming the column.
double metric_value(const std::string& column, const std::string& text, const MetricConversion& m, double gpus) {
  double v = 0;
  if (!parse_number(text, &v)) throw std::invalid_argument("column " + column + ": expected a number, got '" + text + "'");
  if (v < 0) throw std::invalid_argument("column " + column + ": expected a value >= 0, got '" + text + "'");
  v *= m.factor;
  if (m.gpus == PerGpu::kMultiply) v *= gpus;
  if (m.gpus == PerGpu::kDivide) v /= gpus;
  return v;
}

struct ParsedRow {
  size_t line = 0;
  TableRow row;
  std::string workload_key;
  std::string target;  // the launch target of the format column
  TrialStatus status = TrialStatus::kOk;
  json metrics = json::object();
  std::map<std::string, std::string> cells;
  // One space per workload and launch target.
  std::string group() const { return workload_key + '\n' + target; }
};

// Adds each value of `from`'s lists to `into`'s (the union of the rows' domains).
void merge_options(json& into, const json& from) {
  for (auto it = from.begin(); it != from.end(); ++it) {
    json& list = into[it.key()];
    if (!list.is_array()) list = json::array();
    for (const json& v : it.value())
      if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
  }
}

}  // namespace

std::pair<std::string, std::string> parse_column_mapping(const std::string& text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UserError("--map '" + text + "': expected \"source column=canonical name\", e.g. \"tensor parallelism=tp\"");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

std::vector<RejectionGroup> rejection_groups(const std::vector<RejectedRow>& rows) {
  constexpr size_t kLinesShown = 5;
  std::vector<std::pair<std::string, std::vector<size_t>>> groups;  // reason -> lines
  for (const RejectedRow& r : rows) {
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == r.reason; });
    if (g == groups.end()) g = groups.insert(groups.end(), {r.reason, {}});
    g->second.push_back(r.line);
  }
  std::vector<RejectionGroup> out;
  for (const auto& [reason, lines] : groups) {
    std::string where = lines.size() == 1 ? "line " : "lines ";
    for (size_t i = 0; i < lines.size() && i < kLinesShown; ++i) where += (i ? ", " : "") + std::to_string(lines[i]);
    if (lines.size() > kLinesShown) where += " and " + std::to_string(lines.size() - kLinesShown) + " more";
    out.push_back({where, reason, lines.size()});
  }
  return out;
}

std::optional<TrialStatus> measured_status(const std::string& cell) {
  std::string w;
  for (char c : cell) w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::pair<const char*, TrialStatus> kWords[] = {
      {"ok", TrialStatus::kOk},          {"completed", TrialStatus::kOk},      {"complete", TrialStatus::kOk},
      {"success", TrialStatus::kOk},     {"succeeded", TrialStatus::kOk},      {"done", TrialStatus::kOk},
      {"finished", TrialStatus::kOk},    {"failed", TrialStatus::kFailed},     {"fail", TrialStatus::kFailed},
      {"error", TrialStatus::kFailed},   {"node_fail", TrialStatus::kFailed},  {"boot_fail", TrialStatus::kFailed},
      {"oom", TrialStatus::kOom},        {"out_of_memory", TrialStatus::kOom}, {"timeout", TrialStatus::kTimeout},
      {"timed_out", TrialStatus::kTimeout}, {"deadline", TrialStatus::kTimeout}, {"cancelled", TrialStatus::kCancelled},
      {"canceled", TrialStatus::kCancelled}, {"unavailable", TrialStatus::kUnavailable}};
  for (const auto& [word, status] : kWords)
    if (w == word) return status;
  return std::nullopt;
}

std::string canonical_column(const std::string& name, const TableSchema& schema, const std::vector<std::string>& header) {
  if (schema.reads(name) || recognise_metric(name)) return name;
  const std::string to(support::column_spelled_by(name));
  if (to.empty() || !(schema.reads(to) || recognise_metric(to))) return name;
  if (std::find(header.begin(), header.end(), to) != header.end()) return name;  // the table says it itself
  return to;
}

std::optional<MetricConversion> recognise_metric(const std::string& column) {
  for (const MetricName& m : metric_table())
    if (column == m.column) return m.conversion;
  return std::nullopt;
}

std::vector<std::string> recognised_metric_names() {
  std::vector<std::string> names;
  for (const MetricName& m : metric_table()) names.push_back(m.column);
  return names;
}

const std::vector<std::string>& simulate_output_columns() {
  static const std::vector<std::string> columns = {"status",       "step_time_s",     "tokens_per_s", "tflops_per_gpu",
                                                   "mfu",          "peak_mem_gib",    "fp8_recipe_used", "tp_comm",
                                                   "reason"};
  return columns;
}

bool written_by_simulate(const std::vector<std::string>& header) {
  const auto has = [&](const char* c) { return std::find(header.begin(), header.end(), c) != header.end(); };
  return has("fp8_recipe_used") && has("tp_comm");
}

void refuse_simulated_runs(const CsvTable& table) {
  if (written_by_simulate(table.header))
    throw UserError(table.source + ": this is the output of cotune simulate --batch (columns fp8_recipe_used, tp_comm): "
                    "its step times are the model's, not measurements; give the measured runs");
}

bool reads_column(const std::string& name, const TableSchema& schema) {
  return schema.reads(name) || recognise_metric(name) || name == "status" || name == "reason" ||
         name == kHistorySourceColumn || name == kHistoryRowColumn || name == kFormatColumn;
}

std::string column_hint(const std::string& column, const TableSchema& schema) {
  std::vector<std::string> names = schema.columns();
  const std::vector<std::string> metrics = recognised_metric_names();
  names.insert(names.end(), metrics.begin(), metrics.end());
  const std::string meant = likely_meant(column, names);
  return meant.empty() || meant == column ? "" : " (did you mean \"" + meant + "\"?)";
}

TableRuns read_table_runs(const CsvTable& table, const std::vector<std::pair<std::string, std::string>>& mapping,
                          const Registry& registry, const TableSchema& schema, const json* calibration) {
  // A name --map gives that the tables do not read (under any spelling they take) but one they do
  // resembles is a typo: the column would be kept as a metric of that name and the column it meant
  // would go missing. A known name with a word added ("tokens_per_s_eval") is a metric of its own.
  for (const auto& [from, to] : mapping) {
    if (reads_column(to, schema) || reads_column(canonical_column(to, schema, table.header), schema)) continue;
    std::vector<std::string> names = schema.columns();
    const std::vector<std::string> metrics = recognised_metric_names();
    names.insert(names.end(), metrics.begin(), metrics.end());
    const std::string meant = likely_meant(to, names);
    if (meant.empty() || to.rfind(meant + "_", 0) == 0) continue;
    throw UserError("--map '" + from + "=" + to + "': '" + to + "' is neither a column of the " + schema.space() +
                    " space's table schema nor a recognised metric (did you mean \"" + meant + "\"?)");
  }
  const std::vector<std::string> header = mapped_header(table, mapping, schema);
  for (size_t c = 0; c < header.size(); ++c)
    if (!valid_utf8(header[c]) || !valid_utf8(table.header[c]))
      throw UserError(table.source + ": line 1: the name of column " + std::to_string(c + 1) + " is not valid UTF-8");
  TableRuns out;

  // Columns that are neither schema, metric, status nor reason: kept as metrics when numeric.
  std::vector<size_t> extra;
  for (size_t c = 0; c < header.size(); ++c) {
    const std::string& name = header[c];
    if (reads_column(name, schema)) continue;
    bool numeric = true;
    double v;
    for (const CsvRecord& r : table.rows)
      if (!r.fields[c].empty() && !parse_number(r.fields[c], &v)) numeric = false;
    if (numeric) {
      extra.push_back(c);
      out.unread_numeric_columns.push_back(table.header[c] + column_hint(name, schema));
      // A misspelling is a few edits of a whole name: not a name's first word ("nodes" of
      // nodes_per_island), and not a name under four letters ("id" is one edit from dp, tp, pp...).
      std::string meant;
      size_t closest = name.size() < 5 ? 1 : 2;
      for (const std::string& column : schema.columns()) {
        if (name.size() < 4 || column.rfind(name, 0) == 0 || name.rfind(column, 0) == 0) continue;
        const size_t d = support::edit_distance(name, column);
        if (d <= closest && (meant.empty() || d < closest)) meant = column, closest = d;
      }
      if (!meant.empty() && std::find(header.begin(), header.end(), meant) == header.end())
        out.misspelt_schema_columns.push_back("'" + table.header[c] + "' (did you mean \"" + meant + "\"?)");
    } else {
      out.warnings.push_back(table.source + ": column '" + table.header[c] + "'" + column_hint(name, schema) +
                             " is neither a column of the " + schema.space() +
                             " space's table schema nor a recognised metric (docs/history.md) and holds text; ignored");
    }
  }

  if (!extra.empty()) {
    // Said, so that a misspelt parameter column ("tensor_parallel" for "tp") does not pass unseen.
    std::string names;
    for (const std::string& n : out.unread_numeric_columns) names += (names.empty() ? "" : ", ") + n;
    out.notes.push_back(table.source + ": kept as metrics under their own names (not columns of the " +
                        schema.space() + " space's table schema, nor recognised metrics): " + names);
  }

  std::vector<ParsedRow> parsed;
  size_t empty_rows = 0;
  for (const CsvRecord& rec : table.rows) {
    // A row of empty cells (",,,,") says nothing, as a blank line does: skipped, not rejected.
    if (std::all_of(rec.fields.begin(), rec.fields.end(), [](const std::string& f) { return f.empty(); })) {
      ++empty_rows;
      continue;
    }
    ParsedRow p;
    p.line = rec.line;
    for (size_t c = 0; c < header.size(); ++c) p.cells[header[c]] = rec.fields[c];
    try {
      for (size_t c = 0; c < header.size(); ++c)
        if (!valid_utf8(rec.fields[c])) throw std::invalid_argument("column " + header[c] + ": not valid UTF-8");
      std::map<std::string, std::string> read;
      for (const auto& [column, text] : p.cells)
        if (schema.reads(column)) read.emplace(column, text);
      try {
        p.row = schema.read(read);
      } catch (const PluginError& e) {  // not a verdict on the row: the plugin failed at reading it
        throw std::invalid_argument(std::string("the space could not read the row: ") + e.what());
      }
      if (auto f = p.cells.find(kFormatColumn); f != p.cells.end() && !f->second.empty()) {
        try {
          p.target = launch_target_of(f->second, "column " + std::string(kFormatColumn));
        } catch (const UserError& e) {
          throw std::invalid_argument(e.what());
        }
      }
      const double gpus = p.row.devices;
      if (auto s = p.cells.find("status"); s != p.cells.end() && !s->second.empty()) {
        if (s->second == "invalid") {
          auto why = p.cells.find("reason");
          throw std::invalid_argument("status is 'invalid'" +
                                      (why != p.cells.end() && !why->second.empty() ? " (" + why->second + ")" : ""));
        }
        auto st = measured_status(s->second);
        if (!st)
          throw std::invalid_argument("column status: expected ok, failed, oom, timeout, cancelled or unavailable "
                                      "(or completed, success, error, out_of_memory, timed_out, ... in any case), got '" +
                                      s->second + "'");
        p.status = *st;
      }
      // Several columns may give one metric (published tables carry tokens_per_s beside
      // tokens_per_s_per_gpu, and fill one): the column of the metric's own name wins, else the first
      // filled; filled cells that disagree by more than 1 % reject the row.
      std::map<std::string, std::pair<std::string, double>> given;  // metric -> (column, value)
      for (size_t c = 0; c < header.size(); ++c) {
        const std::string& text = rec.fields[c];
        if (text.empty()) continue;
        const auto m = recognise_metric(header[c]);
        if (!m) continue;
        const double v = metric_value(header[c], text, *m, gpus);
        auto [it, fresh] = given.emplace(m->canonical, std::make_pair(header[c], v));
        if (fresh) continue;
        const double other = it->second.second;
        if (std::fabs(v - other) > 0.01 * std::max(std::fabs(v), std::fabs(other)))
          throw std::invalid_argument("columns " + it->second.first + " and " + header[c] + " give different " +
                                      m->canonical + " (" + text + " against " + p.cells[it->second.first] + ")");
        if (header[c] == m->canonical) it->second = {header[c], v};
      }
      for (const auto& [metric, from] : given) p.metrics[metric] = from.second;
      for (size_t c : extra) {
        double v;
        if (!rec.fields[c].empty() && parse_number(rec.fields[c], &v)) p.metrics[header[c]] = v;
      }
      // A run that ran to its end with nothing measured (no metric, nor a number in a column kept as
      // one) teaches nothing, and as history it would keep its configuration out of every search.
      if (p.status == TrialStatus::kOk && p.metrics.empty())
        throw std::invalid_argument("no measured value: the status is ok, but no cell of the row holds a measurement");
      if (calibration != nullptr) p.row.workload["cluster"]["calibration"] = *calibration;
      p.workload_key = workload_key(p.row.workload, schema.info().name);
      parsed.push_back(std::move(p));
    } catch (const std::invalid_argument& e) {
      out.rejected.push_back({rec.line, e.what()});
    }
  }

  if (empty_rows > 0)
    out.notes.push_back(table.source + ": " + std::to_string(empty_rows) + " rows with every cell empty skipped");

  // One space per workload, its domains the union of its rows' values. When the space refuses the
  // union, each row's own values are tried alone: the rows it refuses are rejected with its reason,
  // and the others keep their workload (one bad cell does not take its neighbours down).
  std::map<std::string, std::vector<ParsedRow*>> by_workload;
  for (ParsedRow& p : parsed) by_workload[p.group()].push_back(&p);
  std::map<std::string, std::shared_ptr<const Space>> spaces;
  std::map<std::string, std::string> space_errors;  // by group
  std::set<const ParsedRow*> refused;
  const std::string& space_name = schema.space();
  auto make = [&](const ParsedRow& p, const json& options) {
    std::unique_ptr<Space> space = registry.make_space(space_name, p.row.workload.dump(), options.dump());
    set_launch_target(*space, p.target, "column " + std::string(kFormatColumn));
    return std::shared_ptr<const Space>(std::move(space));
  };
  for (auto& [key, rows] : by_workload) {
    json options = json::object();  // a space without options gets {}, not null
    for (const ParsedRow* p : rows) merge_options(options, p->row.options);
    try {
      spaces[key] = make(*rows.front(), options);
      continue;
    } catch (const std::exception&) {  // the plugin's error, or the host's reading of its answer
    }
    json good = json::object();
    bool any_good = false;
    for (const ParsedRow* p : rows) {
      try {
        make(*p, p->row.options);
        merge_options(good, p->row.options);
        any_good = true;
      } catch (const std::exception& e) {
        out.rejected.push_back({p->line, "the " + space_name + " space refuses this row: " + e.what()});
        refused.insert(p);
      }
    }
    if (!any_good) continue;  // every row refused on its own
    try {
      spaces[key] = make(*rows.front(), good);
    } catch (const std::exception& e) {
      space_errors[key] = e.what();
    }
  }

  for (ParsedRow& p : parsed) {
    if (refused.count(&p)) continue;
    if (auto err = space_errors.find(p.group()); err != space_errors.end()) {
      out.rejected.push_back({p.line, "the workload of this row is not valid: " + err->second});
      continue;
    }
    TableRun run;
    run.line = p.line;
    run.space = spaces.at(p.group());
    try {
      run.config = run.space->parse(p.row.config.dump());
      const std::string why = run.space->explain(run.config.data());
      if (why.rfind("out of memory", 0) == 0) {
        run.memory_note = why;
      } else if (!why.empty()) {
        out.rejected.push_back({p.line, "the " + schema.space() + " space rejects the configuration: " + why});
        continue;
      }
      run.config_json = run.space->render(run.config.data(), COTUNE_RENDER_JSON);
    } catch (const std::exception& e) {
      out.rejected.push_back({p.line, "the " + schema.space() + " space cannot read the configuration: " + e.what()});
      continue;
    }
    run.workload = std::move(p.row.workload);
    run.workload_key = std::move(p.workload_key);
    run.target = std::move(p.target);
    run.status = p.status;
    run.metrics = std::move(p.metrics);
    run.cells = std::move(p.cells);
    out.runs.push_back(std::move(run));
  }
  std::sort(out.rejected.begin(), out.rejected.end(),
            [](const RejectedRow& a, const RejectedRow& b) { return a.line < b.line; });
  return out;
}

}  // namespace cotune::core
