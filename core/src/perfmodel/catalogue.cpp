// The GPU catalogue (core/data/gpus.json) and the resolution of a workload's "cluster" object into a
// cotune_hardware: a catalogue GPU, optionally overridden field by field by "gpu_spec", or a GPU
// defined entirely in "gpu_spec"; the network levels, optionally overridden by "network".
#include <cotune/core/embedded.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/support/likely_meant.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace cotune::core::perf {
namespace {

using nlohmann::json;

// A GPU description with every field optional, so that overrides can be layered.
constexpr int kDtypes = COTUNE_DTYPE_FP4 + 1;  // the peak_flops array and fp4

struct GpuFields {
  std::string name;
  double peak_tflops[kDtypes] = {-1, -1, -1, -1, -1, -1};
  double hbm_gib = -1, hbm_GBps = -1, nvlink_GBps = -1, network_GBps = -1, island_GBps = -1;
  double latency_us[COTUNE_NET_LEVELS] = {-1, -1, -1};
  double gpus_per_node = -1, nvlink_domain = -1, host_gib_per_node = -1, kernel_launch_us = -1, host_launch_us = -1;
  double gemm_efficiency_max = -1, gemm_half_efficiency_gflops = -1, gemm_efficiency_fp8 = -1,
         gemm_efficiency_fp4 = -1, attention_efficiency = -1, memory_efficiency = -1, exp_tera_per_s = -1,
         grouped_gemm_efficiency = -1, block_scaled_gemm_efficiency = -1;
  double network_efficiency[COTUNE_NET_LEVELS] = {-1, -1, -1};
};

const char* const kDtypeNames[kDtypes] = {"fp32", "tf32", "bf16", "fp16", "fp8", "fp4"};
const char* const kLevelNames[COTUNE_NET_LEVELS] = {"node", "cluster", "island"};

double number(const json& j, const std::string& where, double low, double high) {
  if (!j.is_number()) throw UserError(where + ": expected a number, got " + j.dump());
  double v = j.get<double>();
  if (!std::isfinite(v) || v < low || v > high)
    throw UserError(where + ": " + j.dump() + " is out of range [" + json(low).dump() + ", " +
                    json(high).dump() + "]");
  return v;
}

double whole(const json& j, const std::string& where, double low, double high) {
  const double v = number(j, where, low, high);
  if (v != std::floor(v)) throw UserError(where + ": expected an integer, got " + j.dump());
  return v;
}

void require_object(const json& j, const std::string& where) {
  if (!j.is_object()) throw UserError(where + ": expected an object, got " + j.dump());
}

int level_index(const std::string& name, const std::string& where) {
  for (int i = 0; i < COTUNE_NET_LEVELS; ++i)
    if (name == kLevelNames[i]) return i;
  throw UserError(where + ": unknown network level (expected node, cluster or island)");
}

}  // namespace

void check_gpu_fields(const nlohmann::json& fields, const std::string& where);

const std::vector<std::string>& gpu_field_names() {
  static const std::vector<std::string> names = {
      "name", "description", "peak_tflops", "hbm_gib", "hbm_GBps", "nvlink_GBps", "network_GBps", "island_GBps",
      "latency_us", "gpus_per_node", "nvlink_domain", "host_gib_per_node", "kernel_launch_us", "host_launch_us",
      "gemm_efficiency_max", "gemm_half_efficiency_gflops", "gemm_efficiency_fp8", "gemm_efficiency_fp4",
      "grouped_gemm_efficiency", "block_scaled_gemm_efficiency", "attention_efficiency", "exp_tera_per_s", "memory_efficiency", "network_efficiency"};
  return names;
}

namespace {

std::string gpu_field_list() {
  std::string list;
  for (const std::string& n : gpu_field_names())
    if (n != "description") list += (list.empty() ? "" : ", ") + n;
  return list;
}

// Applies the fields present in `j` (a catalogue entry or a gpu_spec) onto `g`.
void apply_gpu_fields(const json& j, GpuFields& g, const std::string& where) {
  require_object(j, where);
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const std::string at = where + "/" + key;
    const json& v = it.value();
    if (key == "description" || key == "about") {
      if (!v.is_string()) throw UserError(at + ": expected a string");
    } else if (key == "name") {
      if (!v.is_string() || v.get<std::string>().empty()) throw UserError(at + ": expected a non-empty string");
      g.name = v.get<std::string>();
    } else if (key == "peak_tflops") {
      require_object(v, at);
      for (auto p = v.begin(); p != v.end(); ++p) {
        int d = -1;
        for (int i = 0; i < kDtypes; ++i)
          if (p.key() == kDtypeNames[i]) d = i;
        if (d < 0) throw UserError(at + "/" + p.key() + ": unknown dtype (expected fp32, tf32, bf16, fp16, fp8 or fp4)");
        g.peak_tflops[d] = number(p.value(), at + "/" + p.key(), 0, 1e6);
      }
    } else if (key == "latency_us") {
      require_object(v, at);
      for (auto p = v.begin(); p != v.end(); ++p)
        g.latency_us[level_index(p.key(), at + "/" + p.key())] = number(p.value(), at + "/" + p.key(), 0, 1e6);
    } else if (key == "hbm_gib") { g.hbm_gib = number(v, at, 1e-3, 1e6);
    } else if (key == "hbm_GBps") { g.hbm_GBps = number(v, at, 1e-3, 1e7);
    } else if (key == "nvlink_GBps") { g.nvlink_GBps = number(v, at, 1e-3, 1e7);
    } else if (key == "network_GBps") { g.network_GBps = number(v, at, 1e-3, 1e7);
    } else if (key == "island_GBps") { g.island_GBps = number(v, at, 1e-3, 1e7);
    } else if (key == "gpus_per_node") { g.gpus_per_node = whole(v, at, 1, 1024);
    } else if (key == "nvlink_domain") { g.nvlink_domain = whole(v, at, 1, 1e6);
    } else if (key == "host_gib_per_node") { g.host_gib_per_node = number(v, at, 0, 1e9);
    } else if (key == "kernel_launch_us") { g.kernel_launch_us = number(v, at, 0, 1e4);
    } else if (key == "host_launch_us") { g.host_launch_us = number(v, at, 0, 1e4);
    } else if (key == "gemm_efficiency_max") { g.gemm_efficiency_max = number(v, at, 1e-3, 1);
    } else if (key == "gemm_half_efficiency_gflops") { g.gemm_half_efficiency_gflops = number(v, at, 0, 1e9);
    } else if (key == "gemm_efficiency_fp8") { g.gemm_efficiency_fp8 = number(v, at, 1e-3, 1);
    } else if (key == "gemm_efficiency_fp4") { g.gemm_efficiency_fp4 = number(v, at, 1e-3, 1);
    } else if (key == "grouped_gemm_efficiency") { g.grouped_gemm_efficiency = number(v, at, 1e-3, 10);
    } else if (key == "block_scaled_gemm_efficiency") { g.block_scaled_gemm_efficiency = number(v, at, 1e-3, 1);
    } else if (key == "attention_efficiency") { g.attention_efficiency = number(v, at, 1e-3, 1);
    } else if (key == "exp_tera_per_s") { g.exp_tera_per_s = number(v, at, 0, 1e6);
    } else if (key == "memory_efficiency") { g.memory_efficiency = number(v, at, 1e-3, 1);
    } else if (key == "network_efficiency") {
      // One fraction for every level, or {"node": .., "cluster": .., "island": ..}.
      if (v.is_object()) {
        for (auto p = v.begin(); p != v.end(); ++p)
          g.network_efficiency[level_index(p.key(), at + "/" + p.key())] = number(p.value(), at + "/" + p.key(), 1e-3, 1);
      } else {
        const double e = number(v, at, 1e-3, 1);
        std::fill(std::begin(g.network_efficiency), std::end(g.network_efficiency), e);
      }
    } else {
      throw UserError(at + ": unknown GPU field" + support::did_you_mean(key, gpu_field_names()) + " (expected " +
                      gpu_field_list() + ")");
    }
  }
}

const json& catalogue() {
  static const json cat = [] {
    std::string_view text = embedded_file("gpus.json");
    if (text.empty()) throw std::runtime_error("the GPU catalogue gpus.json is not embedded in this build");
    json j = json::parse(text.begin(), text.end());
    if (!j.contains("gpus") || !j["gpus"].is_object()) throw std::runtime_error("gpus.json: no \"gpus\" object");
    return j;
  }();
  return cat;
}

// Names live as long as the process: cotune_hardware.gpu_name is borrowed from the host.
cotune_str intern(const std::string& s) {
  static std::mutex mu;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mu);
  const std::string& kept = *names.insert(s).first;
  return cotune_str{kept.data(), kept.size()};
}

void check_complete(const GpuFields& g, const std::string& where) {
  std::vector<std::string> missing;
  if (g.peak_tflops[COTUNE_DTYPE_BF16] < 0 && g.peak_tflops[COTUNE_DTYPE_FP16] < 0) missing.push_back("peak_tflops.bf16");
  if (g.hbm_gib < 0) missing.push_back("hbm_gib");
  if (g.hbm_GBps < 0) missing.push_back("hbm_GBps");
  if (g.nvlink_GBps < 0) missing.push_back("nvlink_GBps");
  if (g.network_GBps < 0) missing.push_back("network_GBps");
  if (g.gemm_efficiency_max < 0) missing.push_back("gemm_efficiency_max");
  if (g.gemm_half_efficiency_gflops < 0) missing.push_back("gemm_half_efficiency_gflops");
  if (g.memory_efficiency < 0) missing.push_back("memory_efficiency");
  if (g.network_efficiency[COTUNE_NET_NODE] < 0 || g.network_efficiency[COTUNE_NET_CLUSTER] < 0)
    missing.push_back("network_efficiency");
  if (g.kernel_launch_us < 0) missing.push_back("kernel_launch_us");
  for (int l = 0; l < 2; ++l)
    if (g.latency_us[l] < 0) missing.push_back(std::string("latency_us.") + kLevelNames[l]);
  if (missing.empty()) return;
  std::string list;
  for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
  throw UserError(where + ": the GPU description is incomplete; missing " + list);
}

}  // namespace

void check_gpu_fields(const json& fields, const std::string& where) {
  GpuFields g;
  apply_gpu_fields(fields, g, where);
}

std::vector<std::string> catalogue_gpu_names() {
  std::vector<std::string> names;
  for (auto it = catalogue()["gpus"].begin(); it != catalogue()["gpus"].end(); ++it) names.push_back(it.key());
  return names;
}

std::string catalogue_gpu_name(const std::string& spelled) {
  std::string n;
  for (char ch : spelled) n += (ch == '_' || ch == ' ') ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (n.rfind("nvidia-", 0) == 0) n.erase(0, 7);
  const json& cat = catalogue();
  if (cat["gpus"].contains(n)) return n;
  if (cat.contains("aliases") && cat["aliases"].contains(n)) return cat["aliases"][n].get<std::string>();
  return "";
}

void resolve_hardware(const json& cluster, cotune_hardware* out, const std::string& where) {
  if (out == nullptr || out->struct_size < COTUNE_STRUCT_SIZE(cotune_hardware, host_bytes_per_node))
    throw UserError("resolve_hardware: the output struct is too small for this host");
  require_object(cluster, where);
  for (auto it = cluster.begin(); it != cluster.end(); ++it) {
    static const char* const known[] = {"gpu", "gpu_spec", "nodes", "gpus_per_node", "nodes_per_island",
                                        "network", "price_per_gpu_hour", "calibration"};
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    if (!ok)
      throw UserError(where + "/" + it.key() + ": unknown cluster field" +
                      support::did_you_mean(it.key(), std::vector<std::string>(std::begin(known), std::end(known))) +
                      " (expected gpu, gpu_spec, nodes, gpus_per_node, nodes_per_island, network, price_per_gpu_hour, "
                      "calibration)");
  }

  GpuFields g;
  if (cluster.contains("gpu")) {
    const json& name = cluster["gpu"];
    if (!name.is_string()) throw UserError(where + "/gpu: expected a GPU name (string)");
    const json& gpus = catalogue()["gpus"];
    const std::string n = catalogue_gpu_name(name.get<std::string>());
    if (n.empty()) {
      std::string list;
      for (const auto& k : catalogue_gpu_names()) list += (list.empty() ? "" : ", ") + k;
      // The aliases are names too ("h100x" is one letter from "h100", which is the h100-sxm).
      std::vector<std::string> names = catalogue_gpu_names();
      if (catalogue().contains("aliases"))
        for (auto it = catalogue()["aliases"].begin(); it != catalogue()["aliases"].end(); ++it) names.push_back(it.key());
      throw UserError(where + "/gpu: unknown GPU '" + name.get<std::string>() + "'" +
                      support::did_you_mean(name.get<std::string>(), names) + " (the catalogue has " + list +
                      "; or describe it in gpu_spec)");
    }
    g.name = n;
    apply_gpu_fields(gpus[n], g, "gpus.json/gpus/" + n);
  } else if (!cluster.contains("gpu_spec")) {
    throw UserError(where + ": expected \"gpu\" (a catalogue name) or \"gpu_spec\" (a GPU description)");
  }
  if (cluster.contains("gpu_spec")) {
    apply_gpu_fields(cluster["gpu_spec"], g, where + "/gpu_spec");
    if (g.name.empty()) throw UserError(where + "/gpu_spec/name: a GPU defined in gpu_spec needs a name");
  }
  if (cluster.contains("calibration")) {
    // Constants fitted on measured runs (cotune calibrate), per GPU type: over the catalogue and
    // gpu_spec, for the GPU being resolved.
    const json& cal = cluster["calibration"];
    if (cal.is_string())
      throw UserError(where + "/calibration: expected an object of constants per GPU type, got " + cal.dump() +
                      " (a calibration file's path goes in the study file's top-level \"calibration\", or "
                      "simulate's --calibration)");
    require_object(cal, where + "/calibration");
    for (auto it = cal.begin(); it != cal.end(); ++it) {
      GpuFields check;
      apply_gpu_fields(it.value(), check, where + "/calibration/" + it.key());
    }
    // Keyed by the GPU's name as the calibration wrote it, or any spelling of its catalogue name.
    for (auto it = cal.begin(); it != cal.end(); ++it)
      if (calibration_key_names(it.key(), g.name)) apply_gpu_fields(it.value(), g, where + "/calibration/" + it.key());
  }
  check_complete(g, where + (cluster.contains("gpu_spec") ? "/gpu_spec" : ""));

  if (!cluster.contains("nodes")) throw UserError(where + "/nodes: missing (expected the number of nodes, >= 1)");
  const double nodes = number(cluster["nodes"], where + "/nodes", 1, 1e6);
  if (nodes != std::floor(nodes)) throw UserError(where + "/nodes: expected an integer");
  double gpn = g.gpus_per_node > 0 ? g.gpus_per_node : 8;
  if (cluster.contains("gpus_per_node")) gpn = number(cluster["gpus_per_node"], where + "/gpus_per_node", 1, 1024);
  if (gpn != std::floor(gpn)) throw UserError(where + "/gpus_per_node: expected an integer");
  double npi = 0;
  if (cluster.contains("nodes_per_island")) npi = number(cluster["nodes_per_island"], where + "/nodes_per_island", 0, 1e6);
  if (npi != std::floor(npi)) throw UserError(where + "/nodes_per_island: expected an integer");
  double price = 0;
  if (cluster.contains("price_per_gpu_hour"))
    price = number(cluster["price_per_gpu_hour"], where + "/price_per_gpu_hour", 0, 1e6);

  double bw[COTUNE_NET_LEVELS] = {g.nvlink_GBps, g.network_GBps, g.island_GBps > 0 ? g.island_GBps : g.network_GBps / 4};
  double lat[COTUNE_NET_LEVELS] = {g.latency_us[0], g.latency_us[1],
                                   g.latency_us[2] >= 0 ? g.latency_us[2] : 4 * g.latency_us[1]};
  if (cluster.contains("network")) {
    const json& net = cluster["network"];
    require_object(net, where + "/network");
    for (auto it = net.begin(); it != net.end(); ++it) {
      int l = -1;
      for (int i = 0; i < COTUNE_NET_LEVELS; ++i)
        if (it.key() == kLevelNames[i]) l = i;
      const std::string at = where + "/network/" + it.key();
      if (l < 0) throw UserError(at + ": unknown network level (expected node, cluster or island)");
      require_object(it.value(), at);
      for (auto f = it.value().begin(); f != it.value().end(); ++f) {
        if (f.key() == "bandwidth_GBps") bw[l] = number(f.value(), at + "/bandwidth_GBps", 1e-3, 1e7);
        else if (f.key() == "latency_us") lat[l] = number(f.value(), at + "/latency_us", 0, 1e6);
        else throw UserError(at + "/" + f.key() + ": unknown field (expected bandwidth_GBps, latency_us)");
      }
    }
  }

  cotune_hardware hw{};
  hw.struct_size = out->struct_size;
  hw.gpu_name = intern(g.name);
  for (int d = 0; d < COTUNE_DTYPE_COUNT; ++d) hw.peak_flops[d] = std::max(0.0, g.peak_tflops[d]) * 1e12;
  if (g.peak_tflops[COTUNE_DTYPE_FP16] < 0) hw.peak_flops[COTUNE_DTYPE_FP16] = hw.peak_flops[COTUNE_DTYPE_BF16];
  if (g.peak_tflops[COTUNE_DTYPE_BF16] < 0) hw.peak_flops[COTUNE_DTYPE_BF16] = hw.peak_flops[COTUNE_DTYPE_FP16];
  hw.hbm_bytes = g.hbm_gib * 1073741824.0;
  hw.hbm_bytes_per_s = g.hbm_GBps * 1e9;
  for (int l = 0; l < COTUNE_NET_LEVELS; ++l) {
    hw.net_bytes_per_s[l] = bw[l] * 1e9;
    hw.net_latency_s[l] = lat[l] * 1e-6;
  }
  hw.gpus_per_node = static_cast<int32_t>(gpn);
  hw.nodes = static_cast<int32_t>(nodes);
  hw.nodes_per_island = static_cast<int32_t>(npi);
  hw.kernel_launch_s = g.kernel_launch_us * 1e-6;
  hw.gemm_efficiency_max = g.gemm_efficiency_max;
  hw.gemm_half_efficiency_flops = g.gemm_half_efficiency_gflops * 1e9;
  hw.memory_efficiency = g.memory_efficiency;
  hw.network_efficiency = g.network_efficiency[COTUNE_NET_CLUSTER];
  hw.price_per_gpu_hour = price;
  hw.host_bytes_per_node = std::max(0.0, g.host_gib_per_node) * 1073741824.0;
  // ABI 1.2 fields; 0 where the description leaves them out (the header's rule applies).
  hw.nvlink_domain = static_cast<int32_t>(std::max(0.0, g.nvlink_domain));
  hw.peak_flops_fp4 = std::max(0.0, g.peak_tflops[COTUNE_DTYPE_FP4]) * 1e12;
  hw.gemm_efficiency_fp8 = std::max(0.0, g.gemm_efficiency_fp8);
  hw.gemm_efficiency_fp4 = std::max(0.0, g.gemm_efficiency_fp4);
  hw.attention_efficiency = std::max(0.0, g.attention_efficiency);
  hw.host_launch_s = std::max(0.0, g.host_launch_us) * 1e-6;
  for (int l = 0; l < COTUNE_NET_LEVELS; ++l) hw.net_efficiency[l] = std::max(0.0, g.network_efficiency[l]);
  hw.exp_per_s = std::max(0.0, g.exp_tera_per_s) * 1e12;  // ABI 1.5
  hw.grouped_gemm_efficiency = std::max(0.0, g.grouped_gemm_efficiency);  // ABI 1.8
  hw.block_scaled_gemm_efficiency = std::max(0.0, g.block_scaled_gemm_efficiency);  // ABI 1.9
  // Only what the caller's struct holds: a plugin built against an older ABI passes a smaller one.
  std::memcpy(out, &hw, std::min(out->struct_size, sizeof hw));
}

}  // namespace cotune::core::perf
