#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/studyfile/json_document.hpp>
#include <cotune/core/studyfile/study_file.hpp>
#include <cotune/support/likely_meant.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iterator>
#include <set>

#include "studyfile/json_checks.hpp"

namespace cotune::core {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::vector<std::pair<std::string_view, Direction>> kDirections = {{"maximize", Direction::kMaximize},
                                                                          {"minimize", Direction::kMinimize}};
const std::vector<std::pair<std::string_view, Prior>> kPriors = {
    {"analytic", Prior::kAnalytic}, {"roofline", Prior::kRoofline}, {"none", Prior::kNone}};
const std::vector<std::pair<std::string_view, RenderFormat>> kFormats = {
    {"megatron", RenderFormat::kMegatron}, {"torchtitan", RenderFormat::kTorchtitan}, {"nemo", RenderFormat::kNemo},
    {"deepspeed", RenderFormat::kDeepspeed}, {"torchrec", RenderFormat::kTorchrec},   {"json", RenderFormat::kJson}};
const std::vector<std::pair<std::string_view, OnStop>> kOnStop = {{"cancel", OnStop::kCancel}, {"wait", OnStop::kWait}};
const std::vector<std::pair<std::string_view, Isolation>> kIsolation = {{"none", Isolation::kNone},
                                                                        {"process", Isolation::kProcess}};

template <class E>
std::string_view word_of(const std::vector<std::pair<std::string_view, E>>& table, E value) {
  for (const auto& [word, v] : table)
    if (v == value) return word;
  return "?";
}

std::string resolve(const std::string& base_dir, const std::string& path) {
  fs::path p(path);
  if (p.is_absolute() || base_dir.empty()) return p.lexically_normal().string();
  return (fs::path(base_dir) / p).lexically_normal().string();
}

// A component: an object {name, options, isolation[, extra...]} or just its name as a string.
void read_component(const JsonChecker& c, const json& doc, std::string_view key, ComponentSpec& out,
                    std::vector<std::string> known = {}) {
  known.insert(known.begin(), {"name", "options", "isolation"});
  const json* v = JsonChecker::member(doc, key);
  if (!v) return;
  std::string pointer = child_pointer("", key);
  if (v->is_string()) {
    out.name = c.string(*v, pointer);
    return;
  }
  c.object(*v, pointer, "an object {\"name\": ..., \"options\": {...}} or a component name");
  c.only_known(*v, pointer, known);
  if (const json* name = JsonChecker::member(*v, "name")) out.name = c.string(*name, child_pointer(pointer, "name"));
  if (const json* options = JsonChecker::member(*v, "options")) {
    c.object(*options, child_pointer(pointer, "options"));
    out.options = *options;
  }
  if (const json* isolation = JsonChecker::member(*v, "isolation"))
    out.isolation = c.one_of(*isolation, child_pointer(pointer, "isolation"), kIsolation);
}

Constraint read_constraint(const JsonChecker& c, const json& v, const std::string& pointer) {
  c.object(v, pointer, "an object {\"metric\": ..., \"max\": ...} or {\"metric\": ..., \"min\": ...}");
  c.only_known(v, pointer, {"metric", "max", "min"});
  Constraint k;
  k.metric = c.string(c.required(v, pointer, "metric", "the name of a metric"), child_pointer(pointer, "metric"));
  if (const json* max = JsonChecker::member(v, "max")) k.max = c.number(*max, child_pointer(pointer, "max"));
  if (const json* min = JsonChecker::member(v, "min")) k.min = c.number(*min, child_pointer(pointer, "min"));
  if (!k.max && !k.min) c.fail(pointer, "expected a bound: \"max\", \"min\" or both");
  if (k.max && k.min && *k.min > *k.max)
    c.fail(child_pointer(pointer, "min"), "expected min <= max, got min " + describe_json(v["min"]) + " > max " +
                                              describe_json(v["max"]));
  return k;
}

ObjectiveSpec read_objective(const JsonChecker& c, const json& v, const std::string& pointer) {
  c.object(v, pointer, "an object {\"metric\": ..., \"direction\": \"maximize\"|\"minimize\", \"constraints\": [...]}");
  c.only_known(v, pointer, {"metric", "direction", "constraints"});
  ObjectiveSpec o;
  o.metric = c.string(c.required(v, pointer, "metric", "the name of the metric to optimise, e.g. \"tokens_per_s\""),
                      child_pointer(pointer, "metric"));
  o.direction = c.one_of(c.required(v, pointer, "direction", "\"maximize\" or \"minimize\""),
                         child_pointer(pointer, "direction"), kDirections);
  if (const json* list = JsonChecker::member(v, "constraints")) {
    std::string lp = child_pointer(pointer, "constraints");
    if (!list->is_array()) c.expected(lp, "an array of constraints", *list);
    for (size_t i = 0; i < list->size(); ++i) o.constraints.push_back(read_constraint(c, (*list)[i], child_pointer(lp, i)));
  }
  return o;
}

std::vector<ObjectiveSpec> read_objectives(const JsonChecker& c, const json& doc) {
  const json* single = JsonChecker::member(doc, "objective");
  const json* several = JsonChecker::member(doc, "objectives");
  if (single && several) c.fail("/objectives", "give either \"objective\" or \"objectives\", not both");
  if (single) return {read_objective(c, *single, "/objective")};
  if (!several)
    c.fail("/objective", "required field missing: expected an object {\"metric\", \"direction\", \"constraints\"} "
                         "(or \"objectives\" with two of them for a Pareto study)");
  if (!several->is_array() || several->size() != 2)
    c.expected("/objectives", "an array of two objectives (a Pareto study)", *several);
  std::vector<ObjectiveSpec> out;
  for (size_t i = 0; i < several->size(); ++i) out.push_back(read_objective(c, (*several)[i], child_pointer("/objectives", i)));
  if (out[0].metric == out[1].metric)
    c.fail("/objectives/1/metric", "expected a metric other than the first objective's, got \"" + out[1].metric + "\"");
  return out;
}

Budget read_budget(const JsonChecker& c, const json& doc) {
  const json& v = c.required(doc, "", "budget", "an object with at least one of trials, wall_time_s, gpu_hours");
  c.object(v, "/budget", "an object with at least one of trials, wall_time_s, gpu_hours");
  c.only_known(v, "/budget", {"trials", "wall_time_s", "gpu_hours", "target", "patience", "max_unavailable"});
  Budget b;
  if (const json* x = JsonChecker::member(v, "trials")) b.trials = c.positive_integer(*x, "/budget/trials");
  if (const json* x = JsonChecker::member(v, "wall_time_s")) b.wall_time_s = c.positive_number(*x, "/budget/wall_time_s");
  if (const json* x = JsonChecker::member(v, "gpu_hours")) b.gpu_hours = c.positive_number(*x, "/budget/gpu_hours");
  if (const json* x = JsonChecker::member(v, "target")) b.target = c.number(*x, "/budget/target");
  if (const json* x = JsonChecker::member(v, "patience")) b.patience = c.positive_integer(*x, "/budget/patience");
  if (const json* x = JsonChecker::member(v, "max_unavailable"))
    b.max_unavailable = c.positive_integer(*x, "/budget/max_unavailable");
  if (!b.trials && !b.wall_time_s && !b.gpu_hours)
    c.fail("/budget", "expected at least one of trials, wall_time_s, gpu_hours (a study must have a limit), got " +
                          describe_json(v));
  return b;
}

// Seconds one plugin call of each kind may take (call_watch.hpp).
CallDeadlines read_deadlines(const JsonChecker& c, const json& v) {
  c.object(v, "/deadlines", "an object of seconds per plugin kind: space, searcher, predictor, executor");
  c.only_known(v, "/deadlines", {"space", "searcher", "predictor", "executor"});
  CallDeadlines d;
  if (const json* x = JsonChecker::member(v, "space")) d.space_s = c.positive_number(*x, "/deadlines/space");
  if (const json* x = JsonChecker::member(v, "searcher")) d.searcher_s = c.positive_number(*x, "/deadlines/searcher");
  if (const json* x = JsonChecker::member(v, "predictor")) d.predictor_s = c.positive_number(*x, "/deadlines/predictor");
  if (const json* x = JsonChecker::member(v, "executor")) d.executor_s = c.positive_number(*x, "/deadlines/executor");
  return d;
}

// The workload: inline, or a path (relative to the study file) to a JSON file holding it.
void read_workload(const JsonChecker& c, const json& doc, const std::string& label, const std::string& base_dir,
                   StudySpec& s) {
  const char* what = "an object (the workload) or a string path to a workload JSON file";
  const json& v = c.required(doc, "", "workload", what);
  if (v.is_object()) {
    s.workload = v;
    return;
  }
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) c.expected("/workload", what, v);
  s.workload_file = resolve(base_dir, v.get<std::string>());
  json loaded;
  try {
    loaded = parse_json_document(read_text_file(s.workload_file, "workload file"), s.workload_file);
  } catch (const UserError& e) {
    throw UserError(label + ": /workload: " + e.what());
  }
  if (!loaded.is_object())
    c.fail("/workload", "the workload file " + s.workload_file + " holds " + describe_json(loaded) +
                            "; expected a JSON object");
  s.workload = std::move(loaded);
}

}  // namespace

std::string_view to_string(Prior p) { return word_of(kPriors, p); }
std::string_view to_string(RenderFormat f) { return word_of(kFormats, f); }

void parse_launch_format(const std::string& text, const std::string& where, RenderFormat* format,
                         std::string* version) {
  const size_t at = text.find('@');
  std::string name = text.substr(0, at);
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));  // "Megatron" too
  for (const auto& [word, f] : kFormats)
    if (word == name) {
      *format = f;
      *version = at == std::string::npos ? "" : text.substr(at + 1);
      if (at != std::string::npos && version->empty())
        throw UserError(where + ": '" + text + "' names no version after '@'");
      if (f == RenderFormat::kJson && !version->empty())
        throw UserError(where + ": json has no versions (got '" + text + "')");
      return;
    }
  std::string list;
  for (size_t i = 0; i < kFormats.size(); ++i) list += (i ? ", " : "") + std::string(kFormats[i].first);
  throw UserError(where + ": unknown format '" + text + "'" + support::did_you_mean_listed(name, list) + " (expected " +
                  list + ", optionally @version: docs/exports.md)");
}

namespace {
std::string target_text(RenderFormat format, const std::string& version) {
  if (format == RenderFormat::kJson) return "";
  return std::string(to_string(format)) + (version.empty() ? "" : "@" + version);
}
}  // namespace

std::string launch_target_of(const std::string& text, const std::string& where) {
  RenderFormat format = RenderFormat::kJson;
  std::string version;
  parse_launch_format(text, where, &format, &version);
  return target_text(format, version);
}

std::string StudySpec::launch_target() const { return target_text(format, format_version); }
std::string_view to_string(OnStop s) { return word_of(kOnStop, s); }

const std::vector<std::string>& study_file_fields() {
  static const std::vector<std::string> fields = {
      "name",       "description", "workload", "space",  "predictor", "searcher",     "executor", "objective",
      "objectives", "budget",      "parallel", "seed",   "plugin_paths", "format",    "on_stop", "calibration", "deadlines"};
  return fields;
}

std::string StudySpec::workload_key() const { return core::workload_key(workload, space.name); }

nlohmann::json StudySpec::objectives_json() const {
  json out = json::array();
  for (const ObjectiveSpec& o : objectives) {
    json constraints = json::array();
    for (const Constraint& k : o.constraints) {
      json j = {{"metric", k.metric}};
      if (k.max) j["max"] = *k.max;
      if (k.min) j["min"] = *k.min;
      constraints.push_back(std::move(j));
    }
    out.push_back({{"metric", o.metric}, {"direction", to_string(o.direction)}, {"constraints", constraints}});
  }
  return out;
}

namespace {

// One name rule for studies: the name is a file name (trial folders, reports) and a word pasted into
// shells, so letters, digits, '.', '_' and '-', starting with a letter or digit, at most 100.
constexpr size_t kMaxStudyName = 100;

void check_study_name(const std::string& name, const JsonChecker& c) {
  auto safe = [](unsigned char ch) { return std::isalnum(ch) || ch == '.' || ch == '_' || ch == '-'; };
  const bool ok = !name.empty() && name.size() <= kMaxStudyName && std::isalnum(static_cast<unsigned char>(name[0])) &&
                  std::all_of(name.begin(), name.end(), [&](char ch) { return safe(static_cast<unsigned char>(ch)); });
  if (ok) return;
  // The name as it can be printed: control and other bytes as \xNN, at most 60 characters.
  std::string shown;
  for (unsigned char ch : name.substr(0, 60)) {
    if (ch >= 0x20 && ch < 0x7f) {
      shown += static_cast<char>(ch);
    } else {
      static const char* const hex = "0123456789abcdef";
      shown += std::string("\\x") + hex[ch >> 4] + hex[ch & 15];
    }
  }
  if (name.size() > 60) shown += "...";
  c.fail("/name", "expected 1-" + std::to_string(kMaxStudyName) +
                      " letters, digits, '.', '_' or '-', starting with a letter or digit (the name is a file name "
                      "and a shell word), got \"" + shown + "\"");
}

}  // namespace

StudySpec parse_study_file(std::string_view text, const std::string& label, const std::string& base_dir) {
  json doc = parse_json_document(text, label);
  JsonChecker c(label);
  if (!doc.is_object()) c.expected("", "a JSON object (the study) at the top level", doc);
  c.only_known(doc, "", study_file_fields());

  StudySpec s;
  s.file = label;
  s.text = std::string(text);
  s.name = c.string(c.required(doc, "", "name", "a non-empty string (the study's name in the store)"), "/name");
  check_study_name(s.name, c);
  if (const json* d = JsonChecker::member(doc, "description")) {
    if (!d->is_string()) c.expected("/description", "a string", *d);
    s.description = d->get<std::string>();
  }
  read_workload(c, doc, label, base_dir, s);
  read_component(c, doc, "space", s.space);
  read_component(c, doc, "predictor", s.predictor, {"prior", "calibrate"});
  if (const json* p = JsonChecker::member(doc, "predictor"); p && p->is_object()) {
    if (const json* prior = JsonChecker::member(*p, "prior")) s.predictor.prior = c.one_of(*prior, "/predictor/prior", kPriors);
    if (const json* cal = JsonChecker::member(*p, "calibrate")) {
      if (!cal->is_boolean()) c.expected("/predictor/calibrate", "true or false", *cal);
      s.predictor.calibrate = cal->get<bool>();
    }
  }
  if (const json* x = JsonChecker::member(doc, "calibration")) {
    // A calibration file (cotune calibrate), relative to the study file: its constants apply to the
    // workload's cluster, for the performance model and every executor that asks it.
    s.calibration_file = resolve(base_dir, c.string(*x, "/calibration"));
    try {
      perf::apply_calibration(s.workload, perf::read_calibration_file(s.calibration_file), label + ": /workload");
    } catch (const UserError& e) {
      throw UserError(label + ": /calibration: " + e.what());
    }
  }
  read_component(c, doc, "searcher", s.searcher);
  read_component(c, doc, "executor", s.executor);
  s.objectives = read_objectives(c, doc);
  s.budget = read_budget(c, doc);
  if (const json* x = JsonChecker::member(doc, "parallel")) s.parallel = c.integer_at_least(*x, "/parallel", 1);
  if (const json* x = JsonChecker::member(doc, "seed")) s.seed = c.unsigned_integer(*x, "/seed");
  if (const json* x = JsonChecker::member(doc, "plugin_paths")) {
    if (!x->is_array()) c.expected("/plugin_paths", "an array of directory or library paths", *x);
    for (size_t i = 0; i < x->size(); ++i)
      s.plugin_paths.push_back(resolve(base_dir, c.string((*x)[i], child_pointer("/plugin_paths", i))));
  }
  if (const json* x = JsonChecker::member(doc, "format")) {
    if (!x->is_string()) c.expected("/format", "a framework name, optionally with @version", *x);
    try {
      parse_launch_format(x->get<std::string>(), "/format", &s.format, &s.format_version);
    } catch (const UserError& e) {
      c.fail("", e.what());  // the message names /format
    }
  }
  if (const json* x = JsonChecker::member(doc, "on_stop")) s.on_stop = c.one_of(*x, "/on_stop", kOnStop);
  if (const json* x = JsonChecker::member(doc, "deadlines")) s.deadlines = read_deadlines(c, *x);

  // The hash covers what the study means: a workload given by path counts by its contents. Where a
  // plugin runs (its isolation) changes nothing a trial measures, so it is left out.
  json hashed = doc;
  hashed["workload"] = s.workload;
  for (const char* component : {"space", "predictor", "searcher", "executor"})
    if (hashed.contains(component) && hashed[component].is_object()) hashed[component].erase("isolation");
  s.legacy_hash = sha256_hex(canonical_json(hashed));
  for (const char* field : kMutableStudyFields) hashed.erase(field);
  s.hash = sha256_hex(canonical_json(hashed));
  return s;
}

StudySpec load_study_file(const std::string& path) {
  std::string text = read_text_file(path, "study file");
  return parse_study_file(text, path, fs::path(path).parent_path().string());
}

std::optional<std::string> changed_study_fields(const std::string& stored_json, const std::string& other_json) {
  const json before = json::parse(stored_json, nullptr, false);
  const json now = json::parse(other_json, nullptr, false);
  if (!before.is_object() || !now.is_object()) return std::nullopt;
  std::set<std::string> keys;
  for (auto it = before.begin(); it != before.end(); ++it) keys.insert(it.key());
  for (auto it = now.begin(); it != now.end(); ++it) keys.insert(it.key());
  std::string changed;
  for (const std::string& k : keys) {
    if (std::find(std::begin(kMutableStudyFields), std::end(kMutableStudyFields), k) != std::end(kMutableStudyFields))
      continue;
    json a = before.value(k, json()), b = now.value(k, json());
    if (a.is_object()) a.erase("isolation");
    if (b.is_object()) b.erase("isolation");
    if (a != b) changed += (changed.empty() ? "" : ", ") + ("/" + k);
  }
  return changed;
}

}  // namespace cotune::core
