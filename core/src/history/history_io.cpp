#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/history/csv.hpp>
#include <cotune/core/history/history_io.hpp>
#include <cotune/core/studyfile/study_file.hpp>
#include <cotune/core/run/study_setup.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>

#include <algorithm>


#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

namespace cotune::core {
namespace {

using nlohmann::json;

// The shortest text that reads back as the same double (121.4, not 121.40000000000001).
std::string number_text(double v) {
  char buf[64];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace

std::vector<std::string> imported_workload_keys(const Registry& registry, const json& workload,
                                                const std::string& space) {
  std::vector<std::string> keys;
  try {
    const std::optional<TableSchema> schema = TableSchema::find(registry, space);
    if (!schema) return keys;
    // The workload through the schema's columns and back: fields without a column (a price, a
    // network) leave nothing to read back, and an import carries such a workload whole, under its own
    // key; a workload that merely reads back with the schema's defaults spelled out is what we want.
    const TableCells cells = schema->write(workload, nullptr);
    if (!cells.read_back) return keys;
    const std::string own = workload_key(workload, space);
    const auto add = [&](const json& w) {
      const std::string key = workload_key(w, space);
      if (key != own && std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    };
    add(*cells.read_back);
    // The GPU's own per-node count, stated or not, is one cluster: a table usually states GPUs and
    // leaves it out, where a study file may spell it out ("gpus_per_node": 8 on an HGX H100), and
    // the other way round (a table with a gpus_per_node column).
    json other = *cells.read_back;
    if (other.contains("cluster") && other["cluster"].is_object()) {
      json& cluster = other["cluster"];
      json probe = cluster;
      probe.erase("gpus_per_node");
      probe["nodes"] = 1;
      cotune_hardware hw{};
      hw.struct_size = sizeof hw;
      perf::resolve_hardware(probe, &hw);
      if (!cluster.contains("gpus_per_node")) {
        cluster["gpus_per_node"] = static_cast<double>(hw.gpus_per_node);
        add(other);
      } else if (cluster["gpus_per_node"].is_number() && cluster["gpus_per_node"].get<double>() == hw.gpus_per_node) {
        cluster.erase("gpus_per_node");
        add(other);
      }
    }
  } catch (const std::exception&) {
    // a workload the schema (or the catalogue) cannot read: only its own key
  }
  return keys;
}

std::vector<HistoryRow> history_rows(const std::vector<TableRun>& runs, const std::string& source,
                                     const std::string& space) {
  std::vector<HistoryRow> rows;
  rows.reserve(runs.size());
  for (const TableRun& r : runs) {
    HistoryRow h;
    h.workload_key = r.workload_key;
    h.space = space;
    h.config_json = r.config_json;
    h.config_key = config_key(json::parse(r.config_json));
    h.status = r.status;
    json metrics = r.metrics;
    metrics[kHistoryWorkloadMember] = r.workload;
    if (!r.target.empty()) metrics[kHistoryTargetMember] = r.target;
    h.metrics_json = metrics.dump();
    h.source = source;
    h.row_number = static_cast<std::int64_t>(r.line);
    // A row export-history wrote keeps where it came from, so importing the file into the store it
    // came from adds nothing.
    auto from = r.cells.find(kHistorySourceColumn), at = r.cells.find(kHistoryRowColumn);
    if (from != r.cells.end() && at != r.cells.end() && !from->second.empty()) {
      char* end = nullptr;
      const long long n = std::strtoll(at->second.c_str(), &end, 10);
      if (end != at->second.c_str() && *end == '\0') h.source = from->second, h.row_number = n;
    }
    rows.push_back(std::move(h));
  }
  return rows;
}

size_t write_history_csv(std::ostream& out, const std::vector<HistoryRow>& rows, Store& store,
                         const TableSchema& schema, std::vector<std::string>* warnings) {
  struct Line {
    std::map<std::string, std::string> cells;
  };
  std::vector<Line> lines;
  std::set<std::string> metric_names;
  struct StudyRuns {
    std::optional<json> workload;  // nullopt: no such study
    std::string target;            // its launch target
  };
  std::map<std::string, StudyRuns> studies;  // by study name
  bool uses_format = false;
  std::set<std::string> warned;
  bool uses_workload_json = false;
  auto warn = [&](const std::string& w) {
    if (warned.insert(w).second && warnings) warnings->push_back(w);
  };
  for (const HistoryRow& h : rows) {
    const std::string label = h.source + " row " + std::to_string(h.row_number);
    if (h.space != schema.space() && h.space != schema.info().name && h.space != schema.info().id) {
      warn("history of the space '" + h.space + "' is not written in the " + schema.space() +
           " space's table schema; its rows are skipped");
      continue;
    }
    json metrics = json::parse(h.metrics_json, nullptr, false);
    if (!metrics.is_object()) metrics = json::object();
    std::optional<json> workload;
    std::string target;
    if (metrics.contains(kHistoryWorkloadMember)) {
      workload = metrics[kHistoryWorkloadMember];
      if (metrics.contains(kHistoryTargetMember) && metrics[kHistoryTargetMember].is_string())
        target = metrics[kHistoryTargetMember].get<std::string>();
    } else if (h.source.rfind("study:", 0) == 0) {
      const std::string name = h.source.substr(6);
      auto it = studies.find(name);
      if (it == studies.end()) {
        StudyRuns s;
        if (auto study = store.find_study(name)) {
          const StudySpec spec = spec_from_store(*study);
          s.workload = spec.workload;
          s.target = spec.launch_target();
        }
        it = studies.emplace(name, s).first;
      }
      workload = it->second.workload;
      target = it->second.target;
    }
    if (!workload) {
      warn(label + ": its workload is not known (not imported by cotune import, no study); skipped");
      continue;
    }
    Line line;
    std::string inexact;
    try {
      const json config = json::parse(h.config_json);
      TableCells written = schema.write(*workload, &config);
      line.cells = std::move(written.cells);
      inexact = std::move(written.inexact);
    } catch (const std::exception& e) {
      warn(label + ": cannot be written in the " + schema.space() + " space's table schema (" + e.what() +
           "); skipped");
      continue;
    }
    if (!inexact.empty()) {
      // The columns cannot say this workload exactly (a preset with changes, a price, a network
      // object): the row carries it whole in workload_json, with its configuration's columns.
      std::map<std::string, std::string> config_cells;
      for (const std::string& c : schema.config_columns())
        if (auto it = line.cells.find(c); it != line.cells.end()) config_cells.insert(*it);
      config_cells["workload_json"] = workload->dump();
      line.cells = std::move(config_cells);
      uses_workload_json = true;
    }
    if (!target.empty()) line.cells[kFormatColumn] = target, uses_format = true;
    line.cells["status"] = std::string(to_string(h.status));
    line.cells[kHistorySourceColumn] = h.source;
    line.cells[kHistoryRowColumn] = std::to_string(h.row_number);
    for (auto it = metrics.begin(); it != metrics.end(); ++it) {
      if (it.key() == kHistoryWorkloadMember || !it.value().is_number()) continue;
      line.cells[it.key()] = number_text(it.value().get<double>());
      metric_names.insert(it.key());
    }
    lines.push_back(std::move(line));
  }

  std::vector<std::string> header = schema.columns();
  if (uses_workload_json) header.push_back("workload_json");
  if (uses_format) header.push_back(kFormatColumn);
  header.push_back("status");
  header.push_back(kHistorySourceColumn);
  header.push_back(kHistoryRowColumn);
  for (const std::string& m : metric_names)
    if (std::find(header.begin(), header.end(), m) == header.end()) header.push_back(m);
  write_csv_record(out, header);
  for (const Line& l : lines) {
    std::vector<std::string> fields;
    for (const std::string& c : header) {
      auto it = l.cells.find(c);
      fields.push_back(it == l.cells.end() ? "" : it->second);
    }
    write_csv_record(out, fields);
  }
  return lines.size();
}

std::vector<std::pair<std::string, std::string>> stored_workloads(const std::string& store_location) {
  Store::Options options;
  options.create = false;
  Store store(store_location, options);
  return store.workloads();
}

}  // namespace cotune::core
