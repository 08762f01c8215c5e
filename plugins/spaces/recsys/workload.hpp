// The recommendation-model workload: embedding tables, the dense part, the training setup and the
// cluster, parsed from the study's workload JSON (schema in docs/workloads-recsys.md).
#ifndef COTUNE_PLUGINS_SPACES_RECSYS_WORKLOAD_HPP_
#define COTUNE_PLUGINS_SPACES_RECSYS_WORKLOAD_HPP_

#include <cotune/cotune.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace cotune_recsys {

struct Table {
  std::string name;
  double rows = 0;
  double dim = 0;
  double pooling = 1;  // average lookups per sample
  double skew = 0;     // access skew in [0, 1): a cache of fraction c of the rows serves c^(1-skew) of lookups
};

enum class Interaction { kDot, kCat };
enum class EmbOptimizer { kRowwiseAdagrad, kSgd };
enum class DenseOptimizer { kAdam, kSgd };

struct Dense {
  double features = 0;             // dense input features per sample
  std::vector<double> bottom_mlp;  // layer output widths
  std::vector<double> top_mlp;     // layer output widths (the last is the prediction)
  Interaction interaction = Interaction::kDot;
};

struct Training {
  double global_batch = 0;  // samples per optimizer step
  int32_t dtype = COTUNE_DTYPE_FP32;  // of the dense GEMMs
  EmbOptimizer emb_optimizer = EmbOptimizer::kRowwiseAdagrad;
  DenseOptimizer dense_optimizer = DenseOptimizer::kAdam;
};

// Its implicit move constructor cannot throw (nlohmann::json's is noexcept); clang-tidy 14 follows
// calls into noexcept functions and reports an exception escaping it all the same.
struct Workload {  // NOLINT(bugprone-exception-escape): see above
  std::vector<Table> tables;
  Dense dense;
  Training training;
  nlohmann::json cluster;        // the "cluster" object without the recsys fields, for the host
  double host_bytes_per_node = -1;  // cluster.host_gib_per_node, < 0: the catalogue's figure
  double host_link_bytes_per_s = 0; // cluster.host_link_GBps: GPU <-> host memory (PCIe / C2C)
};

// Throws std::invalid_argument naming the field (a JSON pointer) and what was expected.
Workload parse_workload(const nlohmann::json& j);

// Helpers shared by the parsers (workload, generator, presets).
double positive_number(const nlohmann::json& v, const std::string& at);
double positive_integer(const nlohmann::json& v, const std::string& at);
std::string number_text(double v);  // "%.15g": 64, not 64.0
std::vector<double> layer_list(const nlohmann::json& v, const std::string& at);

// Bytes the dense part has in parameters, and the input width of the top MLP.
double dense_params(const Workload& w);
double interaction_width(const Workload& w);
double bottom_output(const Workload& w);

}  // namespace cotune_recsys

#endif
