// The batch path of `cotune simulate`: each CSV row is a workload plus a configuration of the llm
// space; absent columns take the defaults documented in docs/simulate.md, other columns are copied
// through, and a bad row gets status=invalid with its reason while the others still come out.
#include "cli/simulate_batch.hpp"

#include <cotune/core/csv.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <map>
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

class Row {
 public:
  Row(const std::map<std::string, size_t>& index, const std::vector<std::string>& fields)
      : index_(index), fields_(fields) {}

  bool has(const std::string& col) const {
    auto it = index_.find(col);
    return it != index_.end() && it->second < fields_.size() && !fields_[it->second].empty();
  }
  const std::string& text(const std::string& col) const { return fields_[index_.at(col)]; }
  double number(const std::string& col) const {
    const std::string& t = text(col);
    try {
      size_t used = 0;
      double v = std::stod(t, &used);
      if (used == t.size() && std::isfinite(v)) return v;
    } catch (const std::exception&) {
    }
    throw std::invalid_argument("column " + col + ": expected a number, got '" + t + "'");
  }
  double integer(const std::string& col, double fallback) const {
    if (!has(col)) return fallback;
    const double v = number(col);
    if (v != std::floor(v) || v < 0) throw std::invalid_argument("column " + col + ": expected a whole number, got '" + text(col) + "'");
    return v;
  }
  bool boolean(const std::string& col, bool fallback) const {
    if (!has(col)) return fallback;
    const std::string& t = text(col);
    if (t == "true" || t == "1" || t == "yes") return true;
    if (t == "false" || t == "0" || t == "no") return false;
    throw std::invalid_argument("column " + col + ": expected true or false, got '" + t + "'");
  }
  std::string string(const std::string& col, const std::string& fallback) const { return has(col) ? text(col) : fallback; }

 private:
  const std::map<std::string, size_t>& index_;
  const std::vector<std::string>& fields_;
};

struct Outcome {
  std::string status, reason;
  double step = 0, tokens = 0, tflops = 0, mfu = 0, mem_gib = 0;
  bool timed = false;
};

Outcome simulate_row(const core::Registry& registry, const Row& r) {
  json model = {{"hidden", r.integer("hidden", 0)}, {"layers", r.integer("layers", 0)}, {"heads", r.integer("heads", 0)},
                {"vocab", r.integer("vocab", 51200)}, {"seq_len", r.integer("seq_len", 2048)}};
  for (const char* col : {"hidden", "layers", "heads"})
    if (!r.has(col)) throw std::invalid_argument(std::string("column ") + col + ": missing (required)");
  if (r.has("kv_heads")) model["kv_heads"] = r.integer("kv_heads", 0);
  if (r.has("ffn_hidden")) model["ffn_hidden"] = r.integer("ffn_hidden", 0);
  const double experts = r.integer("experts", 1);
  if (experts > 1) {
    model["experts"] = experts;
    model["top_k"] = r.integer("top_k", 2);
  }
  if (r.has("gated_mlp")) model["gated_mlp"] = r.boolean("gated_mlp", false);

  const double tp = r.integer("tp", 1), pp = r.integer("pp", 1), cp = r.integer("cp", 1);
  double gpus = 0, dp = 0;
  if (r.has("gpus")) gpus = r.integer("gpus", 0);
  if (r.has("dp")) dp = r.integer("dp", 0);
  if (gpus == 0 && dp == 0) throw std::invalid_argument("columns gpus and dp: give at least one of them");
  if (gpus == 0) gpus = tp * pp * dp * cp;
  if (dp == 0) dp = gpus / (tp * pp * cp);
  if (dp != std::floor(dp) || dp < 1)
    throw std::invalid_argument("gpus (" + fmt(gpus) + ") is not divisible by tp*pp*cp (" + fmt(tp * pp * cp) + ")");
  if (!r.has("global_batch")) throw std::invalid_argument("column global_batch: missing (required)");

  const std::string gpu = r.string("gpu", "h100-sxm");
  json cluster = {{"gpu", gpu}};
  if (r.has("gpus_per_node")) cluster["gpus_per_node"] = r.integer("gpus_per_node", 8);
  cotune_hardware hw{};
  hw.struct_size = COTUNE_STRUCT_SIZE(cotune_hardware, host_bytes_per_node);
  json probe = cluster;
  probe["nodes"] = 1;
  try {
    core::perf::resolve_hardware(probe, &hw, "cluster");
  } catch (const core::UserError& e) {
    throw std::invalid_argument(std::string("column gpu or gpus_per_node: ") + e.what());
  }
  cluster["nodes"] = std::ceil(gpus / hw.gpus_per_node);

  json training = {{"global_batch", r.integer("global_batch", 0)}, {"dtype", r.string("dtype", "bf16")},
                   {"attention", r.string("attention", "flash")}, {"dropout", r.boolean("dropout", false)}};
  if (r.has("overlap_grad_reduce")) training["overlap_grad_reduce"] = r.boolean("overlap_grad_reduce", true);
  const json workload = {{"model", model}, {"training", training}, {"cluster", cluster}};

  const std::string recompute = r.string("recompute", "none");
  const bool sp = r.boolean("sp", false);
  json config = {{"tp", tp}, {"pp", pp}, {"dp", dp}, {"cp", cp}, {"ep", r.integer("ep", 1)},
                 {"micro_batch", r.integer("micro_batch", 1)}, {"vpp", r.integer("vpp", 1)},
                 {"zero", r.integer("zero", 0)}, {"recompute", recompute}, {"sp", sp}, {"gpus", gpus}, {"gpu", gpu}};
  // The row's values are the whole domain, so that any value (micro_batch 3, pp 35) is accepted by
  // the space and only the constraints judge it.
  json options = json::object();
  for (const char* p : {"tp", "pp", "dp", "cp", "ep", "micro_batch", "vpp", "zero", "gpus"}) options[p] = {config[p]};
  options["recompute"] = {recompute};
  options["sp"] = {sp};

  auto space = registry.make_space("llm", workload.dump(), options.dump());
  const std::vector<double> values = space->parse(config.dump());
  Outcome o;
  o.reason = space->explain(values.data());
  const bool oom = o.reason.rfind("out of memory", 0) == 0;
  if (!o.reason.empty() && !oom) {
    o.status = "invalid";
    return o;
  }
  cotune_sim_result res{};
  res.struct_size = COTUNE_STRUCT_SIZE(cotune_sim_result, cost_per_mtokens);
  core::perf::simulate(space->lower(values.data()), &res);
  o.status = oom ? "oom" : "ok";
  o.timed = true;
  o.step = res.step_time_s, o.tokens = res.tokens_per_s, o.tflops = res.tflops_per_gpu, o.mfu = res.mfu;
  o.mem_gib = res.peak_memory_bytes / 1073741824.0;
  return o;
}

}  // namespace

size_t simulate_batch(const core::Registry& registry, std::istream& in, const std::string& source, std::ostream& out) {
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
  static const char* const added[] = {"status", "step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "peak_mem_gib",
                                      "reason"};
  for (const char* a : added)
    if (index.count(a)) throw core::UserError(source + ": input column '" + std::string(a) + "' clashes with an output column");
  for (size_t i = 0; i < header.size(); ++i) out << (i ? "," : "") << csv_field(header[i]);
  for (const char* a : added) out << "," << a;
  out << "\n";

  size_t bad = 0;
  while (reader.next(record)) {
    if (fields.size() == 1 && fields[0].empty()) continue;  // blank line
    Outcome o;
    try {
      if (fields.size() != header.size())
        throw std::invalid_argument("has " + std::to_string(fields.size()) + " fields, the header " +
                                    std::to_string(header.size()));
      o = simulate_row(registry, Row(index, fields));
    } catch (const std::exception& e) {
      o = Outcome{};
      o.status = "invalid";
      o.reason = e.what();
    }
    if (o.status != "ok") ++bad;
    fields.resize(header.size());
    for (size_t i = 0; i < header.size(); ++i) out << (i ? "," : "") << csv_field(fields[i]);
    out << "," << o.status;
    if (o.timed)
      out << "," << fmt(o.step) << "," << fmt(o.tokens) << "," << fmt(o.tflops, "%.4g") << "," << fmt(o.mfu, "%.4f") << ","
          << fmt(o.mem_gib, "%.2f");
    else
      out << ",,,,,";
    out << "," << csv_field(o.reason) << "\n";
  }
  return bad;
}

}  // namespace cotune::cli
