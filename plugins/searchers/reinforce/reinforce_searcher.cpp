// reinforce: the CubicML searcher (Wen et al., 2024). The policy is one categorical distribution
// per parameter (logits over its finite domain; FLOAT parameters and very wide INT ranges are
// discretised into bins). Each iteration samples a batch of configurations, rewards each with the
// predictor's score normalised within the batch (invalid ones get the worst reward minus one), and
// takes a REINFORCE step (Williams, 1992) with a moving-average baseline and an entropy bonus. The
// best distinct unseen valid samples are proposed, plus a share of random exploration. Measured
// trials reported through observe() take one more policy step, normalised within their batch.
//
// Options: "explore" (0.1), "batch" (samples per iteration, 64), "iterations" (per propose, 20),
// "learning_rate" (0.5), "entropy" (bonus weight, 0.01), "baseline_decay" (0.9), "bins" (FLOAT
// parameters, 16), "int_bins" (INT ranges wider than this are binned, 256).
#include <cotune/cotune.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr const char* kId = "org.cotune.searcher.reinforce";
constexpr int kStateVersion = 1;
constexpr int kMaxExtraPasses = 3;  // extra iterations blocks when the samples are all seen

cotune::Error invalid(const std::string& message) {
  return cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, std::string("reinforce searcher: ") + message);
}

nlohmann::json parse_json(std::string_view text, const char* what) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    throw invalid(std::string(what) + ": not valid JSON (" + e.what() + ")");
  }
}

double checked_number(const nlohmann::json& value, const std::string& key, double low, double high, bool integer) {
  const bool ok = integer ? value.is_number_integer() : value.is_number();
  if (!ok || value.get<double>() < low || value.get<double>() > high) {
    std::ostringstream msg;
    msg << "option '" << key << "': expected " << (integer ? "an integer" : "a number") << " in [" << low << ", "
        << high << "]";
    throw invalid(msg.str());
  }
  return value.get<double>();
}

struct Options {
  double explore = 0.1;
  int batch = 64;
  int iterations = 20;
  double learning_rate = 0.5;
  double entropy = 0.01;
  double baseline_decay = 0.9;
  int bins = 16;
  int int_bins = 256;

  nlohmann::json to_json() const {
    return {{"explore", explore},       {"batch", batch},   {"iterations", iterations},
            {"learning_rate", learning_rate}, {"entropy", entropy}, {"baseline_decay", baseline_decay},
            {"bins", bins},             {"int_bins", int_bins}};
  }

  static Options parse(const nlohmann::json& j) {
    if (!j.is_object()) throw invalid("options: expected a JSON object");
    Options o;
    for (const auto& [key, value] : j.items()) {
      if (key == "explore") o.explore = checked_number(value, key, 0, 1, false);
      else if (key == "batch") o.batch = static_cast<int>(checked_number(value, key, 2, 100000, true));
      else if (key == "iterations") o.iterations = static_cast<int>(checked_number(value, key, 1, 100000, true));
      else if (key == "learning_rate") o.learning_rate = checked_number(value, key, 1e-9, 100, false);
      else if (key == "entropy") o.entropy = checked_number(value, key, 0, 100, false);
      else if (key == "baseline_decay") o.baseline_decay = checked_number(value, key, 0, 1, false);
      else if (key == "bins") o.bins = static_cast<int>(checked_number(value, key, 2, 100000, true));
      else if (key == "int_bins") o.int_bins = static_cast<int>(checked_number(value, key, 2, 100000, true));
      else
        throw invalid("unknown option '" + key +
                      "' (known: explore, batch, iterations, learning_rate, entropy, baseline_decay, bins, "
                      "int_bins)");
    }
    return o;
  }
};

// `count` points spread evenly over [low, high] (geometrically when log_scale): bin centres, or
// rounded and deduplicated integers.
std::vector<double> spread(double low, double high, size_t count, bool log_scale, bool integer) {
  const double a = log_scale ? std::log(low) : low, b = log_scale ? std::log(high) : high;
  std::vector<double> out;
  for (size_t i = 0; i < count; ++i) {
    const double t = integer ? (count == 1 ? 0.0 : double(i) / double(count - 1)) : (double(i) + 0.5) / double(count);
    double v = a + t * (b - a);
    if (log_scale) v = std::exp(v);
    if (integer) v = std::clamp(std::round(v), std::ceil(low), std::floor(high));
    if (out.empty() || out.back() != v) out.push_back(v);
  }
  return out;
}

// The values one parameter's categorical distribution chooses among.
std::vector<double> arms_of(const cotune_param& p, const Options& o) {
  const std::string name(cotune::view(p.name));
  const bool log_scale = (p.flags & COTUNE_PARAM_LOG_SCALE) != 0 && p.low > 0;
  std::vector<double> arms;
  switch (p.type) {
    case COTUNE_PARAM_INT:
      if (p.values != nullptr && p.num_values > 0) {
        arms.assign(p.values, p.values + p.num_values);
      } else if (std::floor(p.high) - std::ceil(p.low) + 1 <= o.int_bins) {
        for (double v = std::ceil(p.low); v <= p.high; ++v) arms.push_back(v);
      } else {
        arms = spread(p.low, p.high, static_cast<size_t>(o.int_bins), log_scale, true);
      }
      break;
    case COTUNE_PARAM_FLOAT:
      if (!(p.low < p.high) || !std::isfinite(p.low) || !std::isfinite(p.high))
        throw invalid("parameter '" + name + "': FLOAT needs finite bounds with low < high");
      arms = spread(p.low, p.high, static_cast<size_t>(o.bins), log_scale, false);
      break;
    case COTUNE_PARAM_CATEGORICAL:
      for (size_t k = 0; k < p.num_choices; ++k) arms.push_back(double(k));
      break;
    case COTUNE_PARAM_BOOL:
      arms = {0, 1};
      break;
    default:
      throw invalid("parameter '" + name + "' has unknown type " + std::to_string(p.type));
  }
  if (arms.empty()) throw invalid("parameter '" + name + "' has an empty domain");
  return arms;
}

std::vector<double> softmax(const std::vector<double>& z) {
  const double top = *std::max_element(z.begin(), z.end());
  std::vector<double> p(z.size());
  double sum = 0;
  for (size_t k = 0; k < z.size(); ++k) sum += p[k] = std::exp(z[k] - top);
  for (double& v : p) v /= sum;
  return p;
}

class ReinforceSearcher {
 public:
  ReinforceSearcher(std::string_view options, const cotune_param* const* params, size_t num_params, uint64_t seed)
      : options_(Options::parse(options.empty() ? nlohmann::json::object() : parse_json(options, "options"))),
        rng_(seed) {
    if (num_params == 0) throw invalid("the space has no parameters");
    for (size_t j = 0; j < num_params; ++j) {
      arms_.push_back(arms_of(*params[j], options_));
      logits_.emplace_back(arms_.back().size(), 0.0);
    }
  }

  size_t propose(const cotune::SearchContext& context, size_t n, double* out) {
    const size_t d = arms_.size();
    if (context.num_params() != d)
      throw invalid("context has " + std::to_string(context.num_params()) + " parameters, the searcher " +
                    std::to_string(d));
    explore_credit_ += options_.explore * static_cast<double>(n);
    const size_t explore = std::min(n, static_cast<size_t>(std::floor(explore_credit_)));
    explore_credit_ -= static_cast<double>(explore);

    // Train, collecting every distinct valid sample with its score, until enough are unseen.
    Pool pool;
    std::vector<int32_t> seen;
    for (int pass = 0; pass <= kMaxExtraPasses; ++pass) {
      for (int it = 0; it < options_.iterations; ++it) iterate(context, &pool);
      seen.assign(pool.scores.size(), 0);
      if (!seen.empty()) context.seen(pool.rows.data(), seen.size(), seen.data());
      if (static_cast<size_t>(std::count(seen.begin(), seen.end(), 0)) >= n - explore) break;
    }
    std::vector<size_t> order(pool.scores.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pool.scores[a] > pool.scores[b]; });

    std::set<std::vector<double>> batch;
    std::vector<double> picked;
    size_t next = 0;
    auto take_best = [&](size_t want) {
      for (size_t taken = 0; taken < want && next < order.size(); ++next) {
        const size_t i = order[next];
        if (seen[i]) continue;
        std::vector<double> row(pool.rows.begin() + i * d, pool.rows.begin() + (i + 1) * d);
        if (!batch.insert(row).second) continue;
        picked.insert(picked.end(), row.begin(), row.end());
        ++taken;
      }
    };
    take_best(n - explore);
    draw_random(context, n - picked.size() / d, &batch, &picked);
    take_best(n - picked.size() / d);
    std::copy(picked.begin(), picked.end(), out);
    return picked.size() / d;
  }

  // One policy step on measured results: real scores, normalised within the reported batch.
  void observe(const double* configs, size_t n, const double* scores, const int32_t* statuses) {
    if (n < 2) return;  // a single result carries no within-batch signal
    const size_t d = arms_.size();
    std::vector<std::vector<size_t>> picks(n, std::vector<size_t>(d));
    std::vector<double> s(n);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < d; ++j) picks[i][j] = nearest_arm(j, configs[i * d + j]);
      s[i] = statuses[i] == COTUNE_STATUS_OK ? scores[i] : std::numeric_limits<double>::quiet_NaN();
    }
    step(picks, rewards(s));
  }

  std::string save() {
    std::ostringstream rng;
    rng << rng_;
    std::vector<size_t> arm_counts;
    for (const auto& a : arms_) arm_counts.push_back(a.size());
    nlohmann::json state = {{"searcher", "reinforce"},     {"version", kStateVersion},
                            {"num_params", arms_.size()},  {"arm_counts", arm_counts},
                            {"options", options_.to_json()}, {"explore_credit", explore_credit_},
                            {"baseline", baseline_},        {"rng", rng.str()},
                            {"logits", logits_}};
    return state.dump();
  }

  void load(std::string_view bytes) {
    const nlohmann::json state = parse_json(bytes, "saved state");
    try {
      if (!state.is_object() || state.value("searcher", "") != "reinforce")
        throw invalid("saved state: not a reinforce searcher state");
      if (state.at("version").get<int>() != kStateVersion)
        throw invalid("saved state: version " + state.at("version").dump() + ", expected " +
                      std::to_string(kStateVersion));
      const Options options = Options::parse(state.at("options"));
      const auto logits = state.at("logits").get<std::vector<std::vector<double>>>();
      if (logits.size() != arms_.size())
        throw invalid("saved state: made for " + std::to_string(logits.size()) + " parameters, this space has " +
                      std::to_string(arms_.size()));
      for (size_t j = 0; j < arms_.size(); ++j) {
        if (logits[j].size() != arms_[j].size())
          throw invalid("saved state: parameter " + std::to_string(j) + " has " + std::to_string(logits[j].size()) +
                        " logits, this space gives it " + std::to_string(arms_[j].size()) +
                        " values (another space or other 'bins')");
        for (double z : logits[j])
          if (!std::isfinite(z)) throw invalid("saved state: a logit is not finite");
      }
      const double credit = state.at("explore_credit").get<double>();
      if (!(credit >= 0 && credit < 1)) throw invalid("saved state: field 'explore_credit' must be in [0, 1)");
      const double baseline = state.at("baseline").get<double>();
      std::mt19937_64 rng;  // NOLINT(cert-msc32-c,cert-msc51-cpp): its state is read from the saved one below
      std::istringstream in(state.at("rng").get<std::string>());
      in >> rng;
      if (in.fail()) throw invalid("saved state: field 'rng' is not a mt19937_64 state");
      options_ = options;
      logits_ = logits;
      explore_credit_ = credit;
      baseline_ = baseline;
      rng_ = rng;
    } catch (const nlohmann::json::exception& e) {
      throw invalid(std::string("saved state: missing or mistyped field (") + e.what() + ")");
    }
  }

 private:
  // Distinct valid samples of one propose(), with their predicted scores.
  struct Pool {
    std::vector<double> rows;
    std::vector<double> scores;
    std::set<std::vector<double>> members;
  };

  // Samples a batch from the policy, scores it and takes one REINFORCE step.
  void iterate(const cotune::SearchContext& context, Pool* pool) {
    const size_t d = arms_.size(), b = static_cast<size_t>(options_.batch);
    std::vector<std::vector<double>> probs;
    for (const auto& z : logits_) probs.push_back(softmax(z));
    std::vector<std::vector<size_t>> picks(b, std::vector<size_t>(d));
    std::vector<double> rows(b * d);
    std::uniform_real_distribution<double> unit(0, 1);
    for (size_t i = 0; i < b; ++i)
      for (size_t j = 0; j < d; ++j) {
        const double u = unit(rng_);
        size_t k = 0;
        for (double acc = probs[j][0]; k + 1 < probs[j].size() && u >= acc; acc += probs[j][++k]) {
        }
        picks[i][j] = k;
        rows[i * d + j] = arms_[j][k];
      }
    std::vector<int32_t> ok(b);
    context.check_valid(rows.data(), b, ok.data());
    std::vector<double> score(b, std::numeric_limits<double>::quiet_NaN());
    std::vector<double> valid_rows;
    for (size_t i = 0; i < b; ++i)
      if (ok[i]) valid_rows.insert(valid_rows.end(), rows.begin() + i * d, rows.begin() + (i + 1) * d);
    std::vector<double> valid_scores(valid_rows.size() / d);
    if (!valid_scores.empty()) context.score(valid_rows.data(), valid_scores.size(), valid_scores.data());
    for (size_t i = 0, k = 0; i < b; ++i) {
      if (!ok[i]) continue;
      score[i] = valid_scores[k++];
      std::vector<double> row(rows.begin() + i * d, rows.begin() + (i + 1) * d);
      if (std::isfinite(score[i]) && pool->members.insert(row).second) {
        pool->rows.insert(pool->rows.end(), row.begin(), row.end());
        pool->scores.push_back(score[i]);
      }
    }
    step(picks, rewards(score));
  }

  // Scores normalised within the batch (zero mean, unit deviation); a non-finite score (invalid or
  // failed) gets the worst normalised reward minus one.
  static std::vector<double> rewards(const std::vector<double>& score) {
    double sum = 0, sum2 = 0;
    size_t count = 0;
    for (double s : score)
      if (std::isfinite(s)) sum += s, sum2 += s * s, ++count;
    const double mean = count ? sum / double(count) : 0;
    const double sd = count ? std::sqrt(std::max(0.0, sum2 / double(count) - mean * mean)) : 0;
    std::vector<double> r(score.size(), 0.0);
    double worst = 0;
    for (size_t i = 0; i < score.size(); ++i)
      if (std::isfinite(score[i])) {
        r[i] = sd > 1e-12 * (1 + std::fabs(mean)) ? (score[i] - mean) / sd : 0;
        worst = std::min(worst, r[i]);
      }
    for (size_t i = 0; i < score.size(); ++i)
      if (!std::isfinite(score[i])) r[i] = worst - 1;
    return r;
  }

  // Gradient ascent on E[reward] + entropy * H(policy), with the baseline as control variate.
  void step(const std::vector<std::vector<size_t>>& picks, const std::vector<double>& reward) {
    const size_t b = picks.size();
    const double mean_reward = std::accumulate(reward.begin(), reward.end(), 0.0) / double(b);
    for (size_t j = 0; j < logits_.size(); ++j) {
      const std::vector<double> p = softmax(logits_[j]);
      std::vector<double> grad(p.size(), 0.0);
      for (size_t i = 0; i < b; ++i) {
        const double advantage = reward[i] - baseline_;
        for (size_t k = 0; k < p.size(); ++k) grad[k] -= advantage * p[k];
        grad[picks[i][j]] += advantage;
      }
      double entropy = 0;
      for (double q : p)
        if (q > 0) entropy -= q * std::log(q);
      for (size_t k = 0; k < p.size(); ++k) {
        const double d_entropy = p[k] > 0 ? -p[k] * (std::log(p[k]) + entropy) : 0;
        logits_[j][k] += options_.learning_rate * (grad[k] / double(b) + options_.entropy * d_entropy);
      }
    }
    baseline_ = options_.baseline_decay * baseline_ + (1 - options_.baseline_decay) * mean_reward;
  }

  size_t nearest_arm(size_t j, double v) const {
    const std::vector<double>& a = arms_[j];
    size_t best = 0;
    for (size_t k = 1; k < a.size(); ++k)
      if (std::fabs(a[k] - v) < std::fabs(a[best] - v)) best = k;
    return best;
  }

  // Appends up to `want` random valid unseen configurations from context.sample().
  void draw_random(const cotune::SearchContext& context, size_t want, std::set<std::vector<double>>* batch,
                   std::vector<double>* picked) {
    const size_t d = arms_.size();
    size_t taken = 0;
    for (int stale = 0; taken < want && stale < 8;) {
      const size_t m = 2 * (want - taken) + 16;
      std::vector<double> drawn(m * d);
      const size_t got = context.sample(rng_(), m, drawn.data());
      std::vector<int32_t> ok(got), seen(got);
      if (got > 0) {
        context.check_valid(drawn.data(), got, ok.data());
        context.seen(drawn.data(), got, seen.data());
      }
      const size_t before = taken;
      for (size_t i = 0; i < got && taken < want; ++i) {
        if (!ok[i] || seen[i]) continue;
        std::vector<double> row(drawn.begin() + i * d, drawn.begin() + (i + 1) * d);
        if (!batch->insert(row).second) continue;
        picked->insert(picked->end(), row.begin(), row.end());
        ++taken;
      }
      stale = taken > before ? 0 : stale + 1;
    }
  }

  Options options_;
  std::vector<std::vector<double>> arms_;    // per parameter: the values its distribution picks from
  std::vector<std::vector<double>> logits_;  // per parameter: one logit per arm
  double baseline_ = 0;                      // moving average of the batch mean reward
  double explore_credit_ = 0;                // fractional exploration carried to the next propose()
  std::mt19937_64 rng_;
};

}  // namespace

COTUNE_PLUGIN(cotune::searcher<ReinforceSearcher>(
    {kId, "reinforce", "1.0.0", "CubicML's REINFORCE policy over parameter values, rewarded by the predictor."}))
