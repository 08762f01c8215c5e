#include "replay_options.hpp"

#include <cotune/cotune.hpp>

#include <algorithm>
#include <cotune/support/likely_meant.hpp>

namespace cotune_replay {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& field, const std::string& what) {
  throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "replay executor options/" + field + ": " + what);
}

std::string column_name(const json& v, const std::string& field) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) bad(field, "expected a column name, got " + v.dump());
  return v.get<std::string>();
}

bool scalar(const json& v) { return v.is_string() || v.is_number() || v.is_boolean(); }

// An object of column -> scalar (string, number or boolean), or, with `lists`, a non-empty array of
// scalars (any of them).
std::vector<std::pair<std::string, json>> scalar_map(const json& v, const std::string& field, bool lists = false) {
  if (!v.is_object()) bad(field, "expected an object of column: value, got " + v.dump());
  std::vector<std::pair<std::string, json>> out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const json& x = it.value();
    const bool ok = scalar(x) || (lists && x.is_array() && !x.empty() && std::all_of(x.begin(), x.end(), scalar));
    if (!ok)
      bad(field + "/" + it.key(), std::string("expected a string, number or boolean") +
                                      (lists ? ", or an array of them (any of the values)" : "") + ", got " + x.dump());
    out.emplace_back(it.key(), x);
  }
  return out;
}

}  // namespace

const std::vector<std::string>& default_metric_columns() {
  // What the sim executor and `cotune simulate --batch` report, plus what measured runs add.
  static const std::vector<std::string> names = {"step_time_s",    "tokens_per_s", "tokens_per_s_per_gpu",
                                                 "samples_per_s",  "tflops_per_gpu", "mfu",
                                                 "peak_mem_gib",   "cost_per_mtokens", "wall_time_s"};
  return names;
}

ReplayOptions parse_replay_options(std::string_view text) {
  json o;
  try {
    o = text.empty() ? json::object() : json::parse(text);
  } catch (const std::exception& e) {
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, std::string("replay executor options: not valid JSON: ") + e.what());
  }
  if (!o.is_object()) throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "replay executor options: expected a JSON object");
  ReplayOptions r;
  bool has_file = false;
  for (auto it = o.begin(); it != o.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "file") {
      if (!v.is_string() || v.get_ref<const std::string&>().empty()) bad(key, "expected a path to a CSV file, got " + v.dump());
      r.file = v.get<std::string>();
      has_file = true;
    } else if (key == "metrics") {
      if (!v.is_object() || v.empty()) bad(key, "expected an object of metric: column, got " + v.dump());
      for (auto m = v.begin(); m != v.end(); ++m) r.metrics.emplace_back(m.key(), column_name(m.value(), key + "/" + m.key()));
    } else if (key == "status_column") {
      r.status_column = column_name(v, key);
    } else if (key == "reason_column") {
      r.reason_column = column_name(v, key);
    } else if (key == "where") {
      r.where = scalar_map(v, key, /*lists=*/true);
    } else if (key == "defaults") {
      r.defaults = scalar_map(v, key);
    } else if (key == "columns") {
      if (!v.is_object() || v.empty()) bad(key, "expected an object of parameter: column, got " + v.dump());
      for (auto m = v.begin(); m != v.end(); ++m) r.columns.emplace_back(m.key(), column_name(m.value(), key + "/" + m.key()));
    } else if (key == "unstated") {
      if (!v.is_array() || v.empty()) bad(key, "expected a list of parameter names, got " + v.dump());
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string() || v[i].get_ref<const std::string&>().empty())
          bad(key + "/" + std::to_string(i), "expected a parameter name, got " + v[i].dump());
        r.unstated.push_back(v[i].get<std::string>());
      }
    } else if (key == "capacity") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1000000)
        bad(key, "expected an integer from 1 to 1000000, got " + v.dump());
      r.capacity = v.get<int32_t>();
    } else if (key == "restrict_search") {
      if (!v.is_boolean()) bad(key, "expected true or false, got " + v.dump());
      r.restrict_search = v.get<bool>();
    } else {
      constexpr const char* kKnown =
          "file, metrics, status_column, reason_column, where, defaults, columns, unstated, capacity, restrict_search";
      bad(key, "unknown option" + cotune::support::did_you_mean_listed(key, kKnown) + " (expected " + kKnown + ")");
    }
  }
  if (!has_file) bad("file", "required: the CSV of measured runs to answer trials from");
  // Rows match on the parameters they state: only the table's own configurations, completed by the
  // space, may be proposed, or a layout no row measured would take another's value.
  if (!r.unstated.empty() && !r.restrict_search)
    bad("unstated", "needs \"restrict_search\": true (the study then proposes only the table's configurations, "
                    "completed by the space)");
  return r;
}

}  // namespace cotune_replay
