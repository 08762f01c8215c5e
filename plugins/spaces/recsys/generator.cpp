// The seeded table generator (see generator.hpp).
#include "generator.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>

namespace cotune_recsys {
namespace {

using nlohmann::json;

// A draw rule for one table attribute.
class Draw {
 public:
  Draw(const json& v, const std::string& at, bool integer, double min_value, double max_value)
      : integer_(integer) {
    auto bound = [&](const json& x, const std::string& where) {
      if (!x.is_number()) throw std::invalid_argument(where + ": expected a number, got " + x.dump());
      const double d = x.get<double>();
      if (!(d >= min_value && d <= max_value))
        throw std::invalid_argument(where + ": " + x.dump() + " is outside [" + number_text(min_value) + ", " +
                                    number_text(max_value) + "]");
      return d;
    };
    if (v.is_number()) {
      kind_ = kConstant;
      lo_ = bound(v, at);
      return;
    }
    if (!v.is_object() || v.size() != 1)
      throw std::invalid_argument(at + ": expected a number, {\"choices\": [..]}, {\"uniform\": [lo, hi]} or "
                                  "{\"log_uniform\": [lo, hi]}, got " + v.dump());
    const std::string key = v.begin().key();
    const json& arg = v.begin().value();
    const std::string where = at + "/" + key;
    if (key == "choices") {
      if (!arg.is_array() || arg.empty()) throw std::invalid_argument(where + ": expected a non-empty list of numbers");
      kind_ = kChoices;
      for (size_t i = 0; i < arg.size(); ++i) choices_.push_back(bound(arg[i], where + "/" + std::to_string(i)));
      return;
    }
    if (key != "uniform" && key != "log_uniform")
      throw std::invalid_argument(where + ": unknown distribution (expected choices, uniform or log_uniform)");
    if (!arg.is_array() || arg.size() != 2) throw std::invalid_argument(where + ": expected [lo, hi]");
    lo_ = bound(arg[0], where + "/0");
    hi_ = bound(arg[1], where + "/1");
    if (lo_ > hi_) throw std::invalid_argument(where + ": lo " + arg[0].dump() + " is above hi " + arg[1].dump());
    kind_ = key == "uniform" ? kUniform : kLogUniform;
    if (kind_ == kLogUniform && lo_ <= 0) throw std::invalid_argument(where + ": log_uniform needs lo > 0");
  }

  double operator()(std::mt19937_64& rng) const {
    // Always consume one number so that each attribute's stream does not depend on the others' rules.
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    double x = lo_;
    if (kind_ == kChoices) x = choices_[std::min(choices_.size() - 1, static_cast<size_t>(u * choices_.size()))];
    else if (kind_ == kUniform) x = lo_ + u * (hi_ - lo_);
    else if (kind_ == kLogUniform) x = std::exp(std::log(lo_) + u * (std::log(hi_) - std::log(lo_)));
    return integer_ ? std::max(1.0, std::round(x)) : x;
  }

 private:
  enum Kind { kConstant, kChoices, kUniform, kLogUniform };
  Kind kind_ = kConstant;
  bool integer_;
  double lo_ = 0, hi_ = 0;
  std::vector<double> choices_;
};

}  // namespace

std::vector<Table> generate_tables(const json& spec, const std::string& at) {
  if (!spec.is_object()) throw std::invalid_argument(at + ": expected an object");
  for (auto it = spec.begin(); it != spec.end(); ++it) {
    const std::string& k = it.key();
    if (k != "count" && k != "seed" && k != "rows" && k != "dim" && k != "pooling" && k != "skew" && k != "prefix")
      throw std::invalid_argument(at + "/" + k + ": unknown generator field (expected count, seed, rows, dim, pooling, "
                                  "skew, prefix)");
  }
  for (const char* k : {"count", "seed", "rows", "dim"})
    if (!spec.contains(k)) throw std::invalid_argument(at + "/" + k + ": missing");
  const double count = positive_integer(spec["count"], at + "/count");
  if (count > 100000) throw std::invalid_argument(at + "/count: at most 100000 tables");
  const json& seed = spec["seed"];
  if (!seed.is_number_integer() || seed.get<int64_t>() < 0)
    throw std::invalid_argument(at + "/seed: expected a non-negative integer, got " + seed.dump());
  std::string prefix = "t";
  if (spec.contains("prefix")) {
    if (!spec["prefix"].is_string() || spec["prefix"].get<std::string>().empty())
      throw std::invalid_argument(at + "/prefix: expected a non-empty string");
    prefix = spec["prefix"].get<std::string>();
  }
  const Draw rows(spec["rows"], at + "/rows", true, 1, 1e12);
  const Draw dim(spec["dim"], at + "/dim", true, 1, 65536);
  const Draw pooling(spec.value("pooling", json(1.0)), at + "/pooling", false, 1e-6, 1e6);
  const Draw skew(spec.value("skew", json(0.0)), at + "/skew", false, 0, 0.99);

  // One stream per attribute, all derived from the seed: adding a skew rule leaves the rows alone.
  std::mt19937_64 r_rows(seed.get<uint64_t>() * 4 + 0), r_dim(seed.get<uint64_t>() * 4 + 1),
      r_pool(seed.get<uint64_t>() * 4 + 2), r_skew(seed.get<uint64_t>() * 4 + 3);
  std::vector<Table> tables(static_cast<size_t>(count));
  for (size_t i = 0; i < tables.size(); ++i) {
    Table& t = tables[i];
    t.name = prefix + std::to_string(i);
    t.rows = rows(r_rows);
    t.dim = dim(r_dim);
    t.pooling = pooling(r_pool);
    t.skew = skew(r_skew);
  }
  return tables;
}

}  // namespace cotune_recsys
