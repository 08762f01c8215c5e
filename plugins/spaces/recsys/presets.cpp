// The model presets (see presets.hpp).
#include "presets.hpp"

#include <stdexcept>

namespace cotune_recsys {

using nlohmann::json;

json preset_model(const std::string& name, const std::string& at) {
  if (name == "criteo-terabyte") {
    // Row counts of the 26 categorical features of Criteo Terabyte as the MLPerf DLRM reference
    // uses them (--max-ind-range=40000000), 128-wide embeddings, one lookup per feature.
    static const double rows[26] = {39884406, 39043,    17289,    7420,   20263, 3,        7120,     1543,    63,
                                    38532951, 2953546,  403346,   10,     2208,  11938,    155,      4,       976,
                                    14,       39979771, 25641295, 39664984, 585935, 12972, 108,      36};
    json tables = json::array();
    for (int i = 0; i < 26; ++i)
      tables.push_back({{"name", "cat_" + std::to_string(i)}, {"rows", rows[i]}, {"dim", 128}, {"pooling", 1}});
    return {{"tables", tables},
            {"dense_features", 13},
            {"bottom_mlp", {512, 256, 128}},
            {"top_mlp", {1024, 1024, 512, 256, 1}},
            {"interaction", "dot"}};
  }
  if (name == "ads-500") {
    // 500 tables with log-uniform sizes (1e4 to 1e8 rows: about 5.4e9 rows, 3.2 TB in fp32),
    // multi-hot features (1 to 100 lookups per sample) and skewed access, as in ads ranking models.
    return {{"table_generator",
             {{"count", 500},
              {"seed", 2024},
              {"rows", {{"log_uniform", {1e4, 1e8}}}},
              {"dim", {{"choices", {64, 128, 256}}}},
              {"pooling", {{"log_uniform", {1, 100}}}},
              {"skew", {{"uniform", {0.5, 0.95}}}}}},
            {"dense_features", 512},
            {"bottom_mlp", {1024, 512, 256}},
            {"top_mlp", {2048, 1024, 512, 1}},
            {"interaction", "cat"}};
  }
  throw std::invalid_argument(at + ": unknown preset '" + name + "' (expected criteo-terabyte or ads-500)");
}

}  // namespace cotune_recsys
