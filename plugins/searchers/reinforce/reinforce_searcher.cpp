// reinforce: the CubicML searcher (Wen et al., 2024). The policy is one categorical distribution
// per parameter (logits over its finite domain; FLOAT parameters and very wide INT ranges are
// discretised into bins). Each iteration samples a batch of configurations, rewards each with the
// predictor's score normalised within the batch (invalid ones get the worst reward minus one), and
// takes a REINFORCE step (Williams, 1992) with a moving-average baseline and an entropy bonus. The
// policy finds the region of good configurations but rarely the very best one in it, so the best
// samples (and the best of earlier proposals, kept as elites and scored again after each refit)
// are then hill-climbed over one- and two-parameter changes (cotune/local_search.hpp). The best
// distinct unseen valid configurations met are proposed, plus a share of random exploration.
// Measured trials reported through observe() take one more policy step, normalised within their
// batch.
//
// Options: "explore" (0.1), "batch" (samples per iteration, 64), "iterations" (per propose, 20),
// "learning_rate" (0.5), "entropy" (bonus weight, 0.01), "baseline_decay" (0.9), "bins" (FLOAT
// parameters, 16), "int_bins" (INT ranges wider than this are binned, 256), "climb_starts"
// (configurations hill-climbed per propose, 16; 0: none), "climb_steps" (moves per climb, 20),
// "pair_moves" (two-parameter changes tried per move, at most; 2048), "sample_pool" (valid
// configurations drawn by the host and scored into the pool each propose, 64: what remains when the
// space is narrowed to a table's runs and the policy's samples mostly fall outside it).
#include <cotune/cotune.hpp>
#include <cotune/local_search.hpp>
#include <cotune/support/likely_meant.hpp>

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
constexpr int kStateVersion = 2;  // 2 added the elites; a version 1 state loads without them
constexpr int kMaxExtraPasses = 3;  // extra iterations blocks when the samples are all seen
constexpr size_t kElites = 32;      // best configurations carried from one proposal to the next

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
  int climb_starts = 16;
  int climb_steps = 20;
  int pair_moves = 2048;
  int sample_pool = 64;

  nlohmann::json to_json() const {
    return {{"explore", explore},       {"batch", batch},   {"iterations", iterations},
            {"learning_rate", learning_rate}, {"entropy", entropy}, {"baseline_decay", baseline_decay},
            {"bins", bins},             {"int_bins", int_bins},
            {"climb_starts", climb_starts}, {"climb_steps", climb_steps}, {"pair_moves", pair_moves},
            {"sample_pool", sample_pool}};
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
      else if (key == "climb_starts") o.climb_starts = static_cast<int>(checked_number(value, key, 0, 1000, true));
      else if (key == "climb_steps") o.climb_steps = static_cast<int>(checked_number(value, key, 1, 1000, true));
      else if (key == "pair_moves") o.pair_moves = static_cast<int>(checked_number(value, key, 0, 1000000, true));
      else if (key == "sample_pool") o.sample_pool = static_cast<int>(checked_number(value, key, 0, 1000000, true));
      else {
        constexpr const char* kKnown =
            "explore, batch, iterations, learning_rate, entropy, baseline_decay, bins, int_bins, climb_starts, "
            "climb_steps, pair_moves, sample_pool";
        throw invalid("unknown option '" + key + "'" + cotune::support::did_you_mean_listed(key, kKnown) + " (known: " +
                      kKnown + ")");
      }
    }
    return o;
  }
};

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
      arms_.push_back(cotune::candidate_values(*params[j], static_cast<size_t>(options_.bins),
                                               static_cast<size_t>(options_.int_bins)));
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
    std::vector<int32_t> seen;  // per pool member: measured or in flight
    rescore_elites(context, &pool);
    for (const cotune::ScoredConfig& c : cotune::scored_samples(context, rng_(), static_cast<size_t>(options_.sample_pool)))
      pool.add(c.config, c.score);
    for (int pass = 0; pass <= kMaxExtraPasses; ++pass) {
      for (int it = 0; it < options_.iterations; ++it) iterate(context, &pool);
      if (pass == 0) climb_from_best(context, &pool);
      seen = seen_flags(context, pool);
      if (static_cast<size_t>(std::count(seen.begin(), seen.end(), 0)) >= n - explore) break;
    }
    std::vector<size_t> order(pool.scores.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pool.scores[a] > pool.scores[b]; });
    keep_elites(pool, order);

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
                            {"logits", logits_},            {"elites", elites_}};
    return state.dump();
  }

  void load(std::string_view bytes) {
    const nlohmann::json state = parse_json(bytes, "saved state");
    try {
      if (!state.is_object() || state.value("searcher", "") != "reinforce")
        throw invalid("saved state: not a reinforce searcher state");
      const int version = state.at("version").get<int>();
      if (version != 1 && version != kStateVersion)
        throw invalid("saved state: version " + state.at("version").dump() + ", expected 1 or " +
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
      std::vector<std::vector<double>> elites;
      if (version >= 2) elites = state.at("elites").get<std::vector<std::vector<double>>>();
      for (const auto& e : elites)
        if (e.size() != arms_.size()) throw invalid("saved state: an elite configuration has the wrong length");
      std::mt19937_64 rng;  // NOLINT(cert-msc32-c,cert-msc51-cpp): its state is read from the saved one below
      std::istringstream in(state.at("rng").get<std::string>());
      in >> rng;
      if (in.fail()) throw invalid("saved state: field 'rng' is not a mt19937_64 state");
      options_ = options;
      logits_ = logits;
      explore_credit_ = credit;
      baseline_ = baseline;
      elites_ = elites;
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

    void add(const std::vector<double>& row, double score) {
      if (!std::isfinite(score) || !members.insert(row).second) return;
      rows.insert(rows.end(), row.begin(), row.end());
      scores.push_back(score);
    }
  };

  // The elites kept from earlier proposals, scored again by the (refitted) predictor.
  void rescore_elites(const cotune::SearchContext& context, Pool* pool) const {
    const size_t d = arms_.size();
    if (elites_.empty()) return;
    std::vector<double> rows;
    for (const auto& e : elites_) rows.insert(rows.end(), e.begin(), e.end());
    std::vector<double> score(elites_.size());
    context.score(rows.data(), elites_.size(), score.data());  // invalid rows score -inf and stay out
    for (size_t i = 0; i < elites_.size(); ++i)
      pool->add(std::vector<double>(rows.begin() + i * d, rows.begin() + (i + 1) * d), score[i]);
  }

  // Hill-climbs from the best `climb_starts` members of the pool (measured or not: the neighbours
  // of a measured configuration are what is worth measuring next); every valid configuration met
  // joins the pool.
  void climb_from_best(const cotune::SearchContext& context, Pool* pool) {
    const size_t d = arms_.size();
    if (options_.climb_starts == 0 || pool->scores.empty()) return;
    std::vector<size_t> order(pool->scores.size());
    std::iota(order.begin(), order.end(), size_t{0});
    const size_t starts = std::min(order.size(), static_cast<size_t>(options_.climb_starts));
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(starts), order.end(),
                      [&](size_t a, size_t b) { return pool->scores[a] > pool->scores[b]; });
    const cotune::HillClimber climber(context, arms_, static_cast<size_t>(options_.pair_moves));
    std::vector<cotune::ScoredConfig> visited;
    for (size_t s = 0; s < starts; ++s) {
      const size_t i = order[s];
      climber.climb({std::vector<double>(pool->rows.begin() + i * d, pool->rows.begin() + (i + 1) * d),
                     pool->scores[i]},
                    static_cast<size_t>(options_.climb_steps), rng_, &visited);
    }
    for (const auto& v : visited) pool->add(v.config, v.score);
  }

  static std::vector<int32_t> seen_flags(const cotune::SearchContext& context, const Pool& pool) {
    std::vector<int32_t> seen(pool.scores.size(), 0);
    if (!seen.empty()) context.seen(pool.rows.data(), seen.size(), seen.data());
    return seen;
  }

  // Keeps the best distinct configurations of this proposal's pool for the next one.
  void keep_elites(const Pool& pool, const std::vector<size_t>& order) {
    const size_t d = arms_.size();
    elites_.clear();
    for (size_t r = 0; r < order.size() && elites_.size() < kElites; ++r)
      elites_.emplace_back(pool.rows.begin() + order[r] * d, pool.rows.begin() + (order[r] + 1) * d);
  }

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
        size_t k = 0;  // inverse of the cumulative distribution at u
        double acc = probs[j][0];
        while (k + 1 < probs[j].size() && u >= acc) acc += probs[j][++k];
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
      pool->add(std::vector<double>(rows.begin() + i * d, rows.begin() + (i + 1) * d), score[i]);
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
    cotune::draw_unseen_valid(context, arms_.size(), want, rng_, batch, picked);
  }

  Options options_;
  std::vector<std::vector<double>> arms_;    // per parameter: the values its distribution picks from
  std::vector<std::vector<double>> logits_;  // per parameter: one logit per arm
  std::vector<std::vector<double>> elites_;  // the best configurations of the last proposal's pool
  double baseline_ = 0;                      // moving average of the batch mean reward
  double explore_credit_ = 0;                // fractional exploration carried to the next propose()
  std::mt19937_64 rng_;
};

}  // namespace

COTUNE_PLUGIN(cotune::searcher<ReinforceSearcher>(
    {kId, "reinforce", "CubicML's REINFORCE policy over parameter values, rewarded by the predictor.", "1.0.0"}))
