// History: runs of earlier jobs imported from logs, and the trials that other studies of the same
// workload measured.
#include <cotune/core/errors.hpp>
#include <cotune/core/store/store.hpp>

#include <string>

#include "store/store_impl.hpp"

namespace cotune::core {

using store_detail::now_seconds;

namespace {

std::string in_list(size_t count, int first_parameter) {
  std::string s = "(";
  for (size_t i = 0; i < count; ++i) s += (i ? ", ?" : "?") + std::to_string(first_parameter + static_cast<int>(i));
  return s + ")";
}

std::string row_label(const HistoryRow& row) {
  return (row.source.empty() ? std::string("<no source>") : row.source) + " row " + std::to_string(row.row_number);
}

}  // namespace

std::vector<HistoryRow> Store::history_for(const std::string& workload_key, const std::string& space) {
  return read([&] {
    // A row that export-history wrote from a study's trial ("study:NAME", the trial's number) is that
    // trial where the store holds the study: it is read once, as the trial (the study may have been
    // copied in after the row was imported).
    auto q = impl_->db.prepare(
        "SELECT h.id, h.workload_key, h.space, h.config_key, h.config_json, h.status, h.metrics_json, h.source, "
        "h.row_number, h.imported_at FROM history h WHERE h.workload_key = ?1 AND h.space = ?2 AND NOT EXISTS ("
        "SELECT 1 FROM trials t JOIN studies s ON s.id = t.study_id WHERE 'study:' || s.name = h.source AND "
        "t.seq = h.row_number AND t.config_key = h.config_key) ORDER BY h.id");
    q->bind(1, workload_key);
    q->bind(2, space);
    std::vector<HistoryRow> out;
    while (q->step()) {
      HistoryRow r;
      r.id = q->int64(0);
      r.workload_key = q->text(1);
      r.space = q->text(2);
      r.config_key = q->text(3);
      r.config_json = q->text(4);
      r.status = store_detail::trial_status_column(*q, 5, path_);
      r.metrics_json = q->text(6);
      r.source = q->text(7);
      r.row_number = q->int64(8);
      r.imported_at = q->real(9);
      out.push_back(std::move(r));
    }
    return out;
  });
}

std::vector<TrialRecord> Store::trials_of_workload(const std::string& workload_key, const std::string& space,
                                                   std::optional<std::int64_t> exclude_study_id,
                                                   const std::vector<TrialStatus>& statuses) {
  if (statuses.empty()) return {};
  std::string sql = "SELECT " COTUNE_TRIAL_COLUMNS
                    " FROM trials WHERE study_id IN (SELECT id FROM studies WHERE workload_key = ?1 AND "
                    "space = ?2 AND id != ?3) AND status IN " +
                    in_list(statuses.size(), 4) + " ORDER BY study_id, seq";
  return read([&] {
    auto q = impl_->db.prepare(sql.c_str());
    q->bind(1, workload_key);
    q->bind(2, space);
    q->bind(3, exclude_study_id.value_or(0));  // row ids start at 1: 0 excludes nothing
    for (size_t i = 0; i < statuses.size(); ++i) q->bind(static_cast<int>(i + 4), to_string(statuses[i]));
    std::vector<TrialRecord> out;
    while (q->step()) out.push_back(store_detail::read_trial(*q, path_));
    return out;
  });
}

ImportCounts Store::import_history(const std::vector<HistoryRow>& rows, ImportTime time) {
  for (const HistoryRow& row : rows) {
    if (!is_finished(row.status))
      throw UserError("history " + row_label(row) + ": status must be a finished one (ok, failed, oom, timeout, "
                      "cancelled, unavailable), got '" + std::string(to_string(row.status)) + "'");
    if (row.workload_key.empty() || row.space.empty() || row.config_key.empty())
      throw UserError("history " + row_label(row) + ": workload key, space and config key must not be empty");
  }
  return write([&] {
    sql::Connection& db = impl_->db;
    auto insert = db.prepare(
        "INSERT INTO history (workload_key, space, config_key, config_json, status, metrics_json, source, "
        "row_number, imported_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
        "ON CONFLICT (workload_key, space, source, row_number) DO NOTHING");
    // A row export-history wrote from a study's trial, in a store that holds that trial: there already.
    auto measured = db.prepare(
        "SELECT 1 FROM trials t JOIN studies s ON s.id = t.study_id WHERE s.name = ?1 AND t.seq = ?2 AND "
        "t.config_key = ?3");
    const std::string study_prefix = "study:";
    ImportCounts counts;
    double now = now_seconds();
    for (const HistoryRow& row : rows) {
      if (row.source.rfind(study_prefix, 0) == 0) {
        measured->bind(1, std::string_view(row.source).substr(study_prefix.size()));
        measured->bind(2, row.row_number);
        measured->bind(3, row.config_key);
        const bool there = measured->step();
        measured->reset();
        if (there) {
          ++counts.duplicates;
          continue;
        }
      }
      insert->bind(1, row.workload_key);
      insert->bind(2, row.space);
      insert->bind(3, row.config_key);
      insert->bind(4, row.config_json);
      insert->bind(5, to_string(row.status));
      insert->bind(6, row.metrics_json);
      insert->bind(7, row.source);
      insert->bind(8, row.row_number);
      insert->bind(9, time == ImportTime::kKeep ? row.imported_at : now);
      try {
        insert->step();
      } catch (const sql::Error& e) {
        if (!e.constraint()) throw;
        // Only the JSON checks can fail here; say which row, and import nothing.
        throw UserError("history " + row_label(row) + ": configuration or metrics are not valid JSON; " +
                        "nothing was imported");
      }
      insert->reset();
      if (db.changes() > 0) ++counts.inserted;
      else ++counts.duplicates;
    }
    return counts;
  });
}

std::vector<HistoryRow> Store::export_history(const std::string& workload_key, const std::string& space) {
  std::vector<HistoryRow> out = history_for(workload_key, space);
  std::vector<HistoryRow> measured = read([&] {
    auto q = impl_->db.prepare(
        "SELECT s.name, t.seq, t.config_key, t.config_json, t.status, t.metrics_json, t.finished_at "
        "FROM trials t JOIN studies s ON s.id = t.study_id "
        "WHERE s.workload_key = ?1 AND s.space = ?2 AND t.status NOT IN ('pending', 'running') "
        "ORDER BY s.id, t.seq");
    q->bind(1, workload_key);
    q->bind(2, space);
    std::vector<HistoryRow> rows;
    while (q->step()) {
      HistoryRow r;
      r.workload_key = workload_key;
      r.space = space;
      r.source = "study:" + q->text(0);
      r.row_number = q->int64(1);
      r.config_key = q->text(2);
      r.config_json = q->text(3);
      r.status = store_detail::trial_status_column(*q, 4, path_);
      r.metrics_json = q->opt_text(5).value_or("{}");
      r.imported_at = q->opt_real(6).value_or(0.0);
      rows.push_back(std::move(r));
    }
    return rows;
  });
  out.insert(out.end(), std::make_move_iterator(measured.begin()), std::make_move_iterator(measured.end()));
  return out;
}

std::vector<std::pair<std::string, std::string>> Store::workloads() {
  return read([&] {
    auto q = impl_->db.prepare(
        "SELECT workload_key, space FROM history UNION SELECT workload_key, space FROM studies ORDER BY 1, 2");
    std::vector<std::pair<std::string, std::string>> out;
    while (q->step()) out.emplace_back(q->text(0), q->text(1));
    return out;
  });
}

}  // namespace cotune::core
