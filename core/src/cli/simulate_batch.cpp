// The batch path of `cotune simulate`: each CSV row is a workload plus a configuration of a space,
// read by the space's table schema (the llm space's columns and defaults: docs/simulate.md); other
// columns are copied through, and a bad row gets status=invalid with its reason while the others still come out.
#include "cli/simulate_batch.hpp"

#include "cli/execution_summary.hpp"

#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/history/csv.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/history/table_runs.hpp>
#include <cotune/core/run/study_setup.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

namespace cotune::cli {
namespace {

using nlohmann::json;

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string fmt(double v, const char* f = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

struct Outcome {
  std::string status, reason;
  std::string gpu;  // the GPU it was timed on (catalogue or gpu_spec name)
  double step = 0, tokens = 0, tflops = 0, mfu = 0, mem_gib = 0;
  bool timed = false;
  ExecutionSummary execution;  // the FP8 recipe and tp overlap as they ran
};

// A space names a bad field by its place in the workload or the options it was given
// ("workload/training/dtype", "space options/zero"); in a batch both were built from the row's
// cells, so the cell is named first, as the header spells its column (`spelled`: the schema's
// name -> the header's).
std::string name_the_cell(const std::string& what, const std::map<std::string, std::string>& cells,
                          const std::map<std::string, std::string>& spelled) {
  for (const auto& [column, value] : cells)
    for (const char* section : {"workload/model/", "workload/training/", "workload/cluster/", "space options/"})
      if (what.find(section + column + ":") != std::string::npos) {
        const auto header = spelled.find(column);
        return "column " + (header == spelled.end() ? column : header->second) + " ('" + value + "'): " + what;
      }
  // A field the row lacks ("workload/model/group_top_k: missing"): the column to add.
  const size_t at = what.find("workload/model/");
  const size_t colon = at == std::string::npos ? at : what.find(':', at);
  if (colon != std::string::npos && what.compare(colon, 9, ": missing") == 0) {
    const size_t start = at + std::strlen("workload/model/");
    return "column " + what.substr(start, colon - start) + " (absent): " + what;
  }
  return what;
}

// The row's workload and configuration come from the space's table schema, the same as `cotune
// import` uses, so both read a row alike.
// `format` is the row's format cell (a launch target: the framework's rules and kernels apply).
Outcome simulate_row(const core::Registry& registry, const core::TableSchema& schema,
                     const std::map<std::string, std::string>& cells, const std::map<std::string, std::string>& spelled,
                     const std::string& format, const json* calibration) {
  core::TableRow row = schema.read(cells);
  if (calibration != nullptr) core::perf::apply_calibration(row.workload, *calibration, "row");
  std::unique_ptr<core::Space> space;
  try {
    space = registry.make_space(schema.space(), row.workload.dump(), row.options.dump());
  } catch (const std::exception& e) {
    throw std::invalid_argument(name_the_cell(e.what(), cells, spelled));
  }
  core::set_launch_format(*space, format, std::string("column ") + core::kFormatColumn);
  const std::vector<double> values = space->parse(row.config.dump());
  Outcome o;
  o.reason = space->explain(values.data());
  const bool oom = o.reason.rfind("out of memory", 0) == 0;
  if (!o.reason.empty() && !oom) {
    o.status = "invalid";
    return o;
  }
  cotune_sim_result res{};
  res.struct_size = sizeof res;
  const cotune_trace& trace = space->lower(values.data());
  core::perf::simulate(trace, &res);
  o.gpu.assign(trace.hardware.gpu_name.data, trace.hardware.gpu_name.len);
  o.status = oom ? "oom" : "ok";
  o.timed = true;
  o.step = res.step_time_s, o.tokens = res.tokens_per_s, o.tflops = res.tflops_per_gpu, o.mfu = res.mfu;
  o.mem_gib = res.peak_memory_bytes / 1073741824.0;
  o.execution = summarize_execution(trace, row.workload);
  if (!o.execution.tp_comm_note.empty()) o.reason += (o.reason.empty() ? "note: " : "; note: ") + o.execution.tp_comm_note;
  return o;
}

// Columns the schema does not read are copied through (names, ids, notes). One that looks like a
// schema column is most likely misspelt, which leaves that parameter at its default: said once.
void warn_misspelt_columns(const std::vector<std::string>& header, const std::vector<std::string>& reads,
                           const core::TableSchema& schema, const std::string& source) {
  std::string names;
  for (size_t i = 0; i < header.size(); ++i) {
    if (core::reads_column(reads[i], schema)) continue;
    const std::string hint = core::column_hint(header[i], schema);
    if (!hint.empty()) names += (names.empty() ? "" : ", ") + header[i] + hint;
  }
  if (!names.empty())
    std::fprintf(stderr, "cotune simulate: warning: %s: columns not read, copied through: %s (a parameter whose column "
                 "is misspelt takes its default)\n", source.c_str(), names.c_str());
}

// Columns copied through without a hint (a run's name, notes, ...) pass unremarked, unless their
// cells look like settings: numbers or true/false (a per-device batch size, a bf16 switch), or a
// framework's name (a format column under another name). Such a column, unread, leaves what it
// meant at the schema's default, so it is named once the rows are read.
class UnreadSettingColumns {
 public:
  UnreadSettingColumns(const std::vector<std::string>& header, const std::vector<std::string>& reads,
                       const core::TableSchema& schema) {
    for (size_t i = 0; i < header.size(); ++i)
      if (!core::reads_column(reads[i], schema) && core::column_hint(header[i], schema).empty() && !an_id(header[i]))
        columns_.push_back({i, header[i]});
  }
  void look_at(const std::vector<std::string>& fields) {
    for (Column& c : columns_) {
      if (c.index >= fields.size() || fields[c.index].empty()) continue;
      const std::string cell = lower(fields[c.index]);
      if (setting_like(cell)) c.setting = true;
      if (framework_like(cell)) c.framework = true;
    }
  }
  void report(const std::string& source) const {
    std::string names;
    for (const Column& c : columns_)
      if (c.setting || c.framework)
        names += (names.empty() ? "" : ", ") + c.name + (c.framework ? " (a framework: the format column?)" : "");
    if (!names.empty())
      std::fprintf(stderr, "cotune simulate: note: %s: columns not read, copied through, whose cells look like "
                   "settings: %s; a setting the schema does not read under that name took its default (the "
                   "columns: docs/simulate.md; other names read: docs/history.md)\n",
                   source.c_str(), names.c_str());
  }

 private:
  struct Column {
    size_t index;
    std::string name;
    bool setting = false, framework = false;
  };
  static std::string lower(std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  }
  // Numbered rows and runs: "id", "run_id", "index", "row".
  static bool an_id(const std::string& column) {
    const std::string c = lower(column);
    return c == "id" || c == "index" || c == "row" || (c.size() > 3 && c.compare(c.size() - 3, 3, "_id") == 0);
  }
  static bool setting_like(const std::string& cell) {
    if (cell == "true" || cell == "false" || cell == "yes" || cell == "no") return true;
    char* end = nullptr;
    std::strtod(cell.c_str(), &end);
    return end == cell.c_str() + cell.size();
  }
  // A cell the format column would take as a framework (json is no framework).
  static bool framework_like(const std::string& cell) {
    try {
      return !core::launch_target_of(cell, "").empty();
    } catch (const core::UserError&) {
      return false;
    }
  }
  std::vector<Column> columns_;
};

}  // namespace

size_t simulate_batch(const core::Registry& registry, const core::TableSchema& schema, std::istream& in,
                      const std::string& source, std::ostream& out, const json* calibration) {
  // The shared reader: RFC 4180 quoting, an unclosed quote and an oversized record are errors.
  core::CsvReader reader(in, source);
  core::CsvRecord record;
  if (!reader.next(record) || (record.fields.size() == 1 && record.fields[0].empty()))
    throw core::UserError(source + ": empty CSV (expected a header row)");
  const std::vector<std::string> header = record.fields;
  std::vector<std::string>& fields = record.fields;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < header.size(); ++i) {
    if (index.count(header[i])) throw core::UserError(source + ": column '" + header[i] + "' appears twice in the header");
    index[header[i]] = i;
  }
  const std::vector<std::string>& added = core::simulate_output_columns();
  // A file of measured runs (export-history's, a RUNS.csv for calibrate) has columns named like the
  // output's. Written back beside the model's they would read as measurements of a file that holds
  // the model's figures under the measured names, so they are refused, saying what to do.
  // So are a published table's other measured figures (per GPU, MFU in per cent), which would sit
  // beside the model's tokens/s and MFU looking like its answer.
  std::string clashing;
  for (const std::string& a : added)
    if (index.count(a)) clashing += (clashing.empty() ? "" : ", ") + a;
  for (const char* measured : {"tokens_per_s_per_gpu", "mfu_pct", "mfu_percent"})
    if (index.count(measured)) clashing += (clashing.empty() ? "" : ", ") + std::string(measured);
  if (!clashing.empty())
    throw core::UserError(source + ": input columns named like the output's or measured (" + clashing +
                          "): drop or rename them (to see the model beside a file of measured runs: cotune calibrate --runs FILE "
                          "--rows OUT.csv writes each run's measured and model step time)");
  // What each column stands for (Megatron-LM argument names read as the schema's): the output keeps
  // the input's own names.
  std::vector<std::string> reads(header.size());
  for (size_t i = 0; i < header.size(); ++i) reads[i] = core::canonical_column(header[i], schema, header);
  warn_misspelt_columns(header, reads, schema, source);
  UnreadSettingColumns unread(header, reads, schema);
  for (size_t i = 0; i < header.size(); ++i) out << (i ? "," : "") << csv_field(header[i]);
  for (const std::string& a : added) out << "," << a;
  out << "\n";

  size_t bad = 0;
  std::set<std::string> uncalibrated;  // GPUs the calibration has no constants for, said once each
  while (reader.next(record)) {
    if (fields.size() == 1 && fields[0].empty()) continue;  // blank line
    unread.look_at(fields);
    Outcome o;
    try {
      if (fields.size() != header.size())
        throw std::invalid_argument("has " + std::to_string(fields.size()) + " fields, the header " +
                                    std::to_string(header.size()));
      std::map<std::string, std::string> cells, spelled;
      for (size_t i = 0; i < header.size(); ++i)
        if (schema.reads(reads[i]) && !fields[i].empty()) cells.emplace(reads[i], fields[i]), spelled.emplace(reads[i], header[i]);
      const auto format = index.find(core::kFormatColumn);
      o = simulate_row(registry, schema, cells, spelled, format == index.end() ? "" : fields[format->second],
                       calibration);
    } catch (const std::exception& e) {
      o = Outcome{};
      o.status = "invalid";
      o.reason = e.what();
    }
    if (o.status != "ok") ++bad;
    if (calibration != nullptr && o.timed && !core::perf::calibration_covers(*calibration, o.gpu) &&
        uncalibrated.insert(o.gpu).second)
      std::fprintf(stderr, "cotune simulate: warning: the calibration has no constants for %s (first on line %zu); "
                           "the catalogue's are used for it\n",
                   o.gpu.c_str(), record.line);
    fields.resize(header.size());
    for (size_t i = 0; i < header.size(); ++i) out << (i ? "," : "") << csv_field(fields[i]);
    out << "," << o.status;
    if (o.timed)
      out << "," << fmt(o.step) << "," << fmt(o.tokens) << "," << fmt(o.tflops, "%.4g") << "," << fmt(o.mfu, "%.4f") << ","
          << fmt(o.mem_gib, "%.2f") << "," << o.execution.fp8_recipe << "," << o.execution.tp_comm;
    else
      out << ",,,,,,,";
    out << "," << csv_field(o.reason) << "\n";
  }
  unread.report(source);
  return bad;
}

}  // namespace cotune::cli
