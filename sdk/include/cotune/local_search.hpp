// cotune/local_search.hpp: tools for searcher plugins that optimise the predictor's score over a
// space. draw_unseen_valid() draws valid configurations the study has not seen; candidate_values()
// gives the finite set of values a search picks among for a parameter; HillClimber climbs from a
// configuration to a local optimum of SearchContext::score over one- and two-parameter changes. Header-only, on top of cotune.hpp: it adds no ABI of its own.
//
// Why two-parameter moves: the parameters of a parallel layout are coupled (tp x pp x dp x cp must
// equal the GPU count), so most single changes of a valid layout are invalid, and a climber that
// only changes one value at a time stops at the first layout it reaches.
#ifndef COTUNE_LOCAL_SEARCH_HPP_
#define COTUNE_LOCAL_SEARCH_HPP_

#include <cotune/cotune.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cotune {

// The values a search over `p` picks among: an INT value list as given; every integer of an INT
// range no wider than `int_bins`, else `int_bins` integers spread evenly over it (geometrically for
// LOG_SCALE); FLOAT: the centres of `float_bins` equal bins (geometric for LOG_SCALE);
// CATEGORICAL: the choice indices; BOOL: 0 and 1. Throws cotune::Error for a malformed parameter.
inline std::vector<double> candidate_values(const cotune_param& p, size_t float_bins, size_t int_bins) {
  const std::string name(view(p.name));
  auto fail = [&](const std::string& what) {
    return Error(COTUNE_ERR_INVALID_ARGUMENT, "parameter '" + name + "' " + what);
  };
  const bool log_scale = (p.flags & COTUNE_PARAM_LOG_SCALE) != 0 && p.low > 0;
  // `count` points over [low, high]: bin centres, or rounded and deduplicated integers.
  auto spread = [&](size_t count, bool integer) {
    const double a = log_scale ? std::log(p.low) : p.low, b = log_scale ? std::log(p.high) : p.high;
    std::vector<double> out;
    for (size_t i = 0; i < count; ++i) {
      const double t = integer ? (count == 1 ? 0.0 : double(i) / double(count - 1)) : (double(i) + 0.5) / double(count);
      double v = a + t * (b - a);
      if (log_scale) v = std::exp(v);
      if (integer) v = std::clamp(std::round(v), std::ceil(p.low), std::floor(p.high));
      if (out.empty() || out.back() != v) out.push_back(v);
    }
    return out;
  };
  std::vector<double> values;
  switch (p.type) {
    case COTUNE_PARAM_INT: {
      if (p.values != nullptr && p.num_values > 0) {
        values.assign(p.values, p.values + p.num_values);
        break;
      }
      const double first = std::ceil(p.low), last = std::floor(p.high);
      if (last - first + 1 <= double(int_bins)) {
        for (int64_t i = 0; double(i) <= last - first; ++i) values.push_back(first + double(i));
      } else {
        values = spread(int_bins, true);
      }
      break;
    }
    case COTUNE_PARAM_FLOAT:
      if (!(p.low < p.high) || !std::isfinite(p.low) || !std::isfinite(p.high))
        throw fail("is FLOAT and needs finite bounds with low < high");
      values = spread(float_bins, false);
      break;
    case COTUNE_PARAM_CATEGORICAL:
      for (size_t k = 0; k < p.num_choices; ++k) values.push_back(double(k));
      break;
    case COTUNE_PARAM_BOOL:
      values = {0, 1};
      break;
    default:
      throw fail("has unknown type " + std::to_string(p.type));
  }
  if (values.empty()) throw fail("has an empty domain");
  return values;
}

// A configuration with its predicted score (higher is better).
struct ScoredConfig {
  std::vector<double> config;
  double score;
};

// Up to n valid configurations drawn by the host (context.sample), with their scores. Searchers add
// them to what their own moves find: where the valid configurations are sparse in the grid (a space
// narrowed to the runs a table holds), a policy's samples and a mutation's children mostly fall
// outside, and these are the candidates that remain.
inline std::vector<ScoredConfig> scored_samples(const SearchContext& context, uint64_t seed, size_t n) {
  const size_t d = context.num_params();
  std::vector<ScoredConfig> out;
  if (n == 0 || d == 0) return out;
  std::vector<double> rows(n * d);
  const size_t got = context.sample(seed, n, rows.data());
  if (got == 0) return out;
  std::vector<int32_t> ok(got);
  std::vector<double> score(got);
  context.check_valid(rows.data(), got, ok.data());
  context.score(rows.data(), got, score.data());
  for (size_t i = 0; i < got; ++i)
    if (ok[i] != 0 && std::isfinite(score[i]))
      out.push_back({std::vector<double>(rows.data() + static_cast<std::ptrdiff_t>(i * d),
                                         rows.data() + static_cast<std::ptrdiff_t>((i + 1) * d)),
                     score[i]});
  return out;
}

// Steepest-ascent hill climbing under the predictor's score. The neighbours of a configuration are
// every configuration that differs from it in one parameter or in two (each taking one of its
// candidate values); when the two-parameter neighbourhood has more than `max_pair_moves` members, a
// random subset of that size is tried at each step. Invalid neighbours are skipped (checked in one
// call per step), valid ones scored in one call per step.
class HillClimber {
 public:
  HillClimber(const SearchContext& context, std::vector<std::vector<double>> values, size_t max_pair_moves)
      : context_(context), values_(std::move(values)), max_pair_moves_(max_pair_moves) {}

  // Climbs from `start` (a valid configuration with score `start_score`) for at most `max_steps`
  // moves, each to the best neighbour while that improves the score. Every valid neighbour scored
  // is appended to *visited; returns the local optimum reached.
  ScoredConfig climb(ScoredConfig start, size_t max_steps, std::mt19937_64& rng,
                     std::vector<ScoredConfig>* visited) const {
    ScoredConfig at = std::move(start);
    for (size_t step = 0; step < max_steps; ++step) {
      const std::vector<double> rows = neighbours(at.config, rng);
      const size_t d = values_.size(), n = rows.size() / d;
      if (n == 0) break;
      std::vector<int32_t> ok(n);
      context_.check_valid(rows.data(), n, ok.data());
      std::vector<double> valid;
      for (size_t i = 0; i < n; ++i)
        if (ok[i]) valid.insert(valid.end(), rows.data() + i * d, rows.data() + (i + 1) * d);
      const size_t m = valid.size() / d;
      if (m == 0) break;
      std::vector<double> score(m);
      context_.score(valid.data(), m, score.data());
      size_t best = m;
      for (size_t i = 0; i < m; ++i) {
        if (!std::isfinite(score[i])) continue;
        visited->push_back({std::vector<double>(valid.data() + i * d, valid.data() + (i + 1) * d), score[i]});
        if (score[i] > at.score && (best == m || score[i] > score[best])) best = i;
      }
      if (best == m) break;  // a local optimum
      at = {std::vector<double>(valid.data() + best * d, valid.data() + (best + 1) * d), score[best]};
    }
    return at;
  }

 private:
  // The rows of x's neighbourhood (one- and two-parameter changes), concatenated.
  std::vector<double> neighbours(const std::vector<double>& x, std::mt19937_64& rng) const {
    const size_t d = values_.size();
    std::vector<double> rows;
    std::vector<std::vector<double>> others(d);  // per parameter: its values other than x's
    for (size_t j = 0; j < d; ++j)
      for (double v : values_[j])
        if (v != x[j]) others[j].push_back(v);
    for (size_t j = 0; j < d; ++j)
      for (double v : others[j]) {
        rows.insert(rows.end(), x.begin(), x.end());
        rows[rows.size() - d + j] = v;
      }
    std::vector<std::pair<size_t, size_t>> pairs;
    size_t pair_moves = 0;
    for (size_t j = 0; j < d; ++j)
      for (size_t k = j + 1; k < d; ++k)
        if (!others[j].empty() && !others[k].empty()) {
          pairs.emplace_back(j, k);
          pair_moves += others[j].size() * others[k].size();
        }
    auto add_pair = [&](size_t j, double v, size_t k, double w) {
      rows.insert(rows.end(), x.begin(), x.end());
      rows[rows.size() - d + j] = v;
      rows[rows.size() - d + k] = w;
    };
    if (pair_moves <= max_pair_moves_) {
      for (const auto& [j, k] : pairs)
        for (double v : others[j])
          for (double w : others[k]) add_pair(j, v, k, w);
      return rows;
    }
    // Too many to try: a random subset, distinct moves (pair, value index, value index).
    std::set<std::vector<size_t>> tried;
    std::uniform_int_distribution<size_t> pick_pair(0, pairs.size() - 1);
    for (size_t attempts = 0; tried.size() < max_pair_moves_ && attempts < 4 * max_pair_moves_; ++attempts) {
      const auto [j, k] = pairs[pick_pair(rng)];
      const size_t a = std::uniform_int_distribution<size_t>(0, others[j].size() - 1)(rng);
      const size_t b = std::uniform_int_distribution<size_t>(0, others[k].size() - 1)(rng);
      if (tried.insert({j, k, a, b}).second) add_pair(j, others[j][a], k, others[k][b]);
    }
    return rows;
  }

  const SearchContext& context_;
  std::vector<std::vector<double>> values_;
  size_t max_pair_moves_;
};

// Appends to `picked` (row-major, `dims` values a row) up to `want` configurations drawn from
// context.sample() that are valid, unseen by the study and not yet in `batch` (each taken is added
// to it). Gives up after 8 draws in a row that add nothing: a space nearly used up ends the draw
// instead of looping.
template <class Rng>
void draw_unseen_valid(const SearchContext& context, size_t dims, size_t want, Rng& rng,
                       std::set<std::vector<double>>* batch, std::vector<double>* picked) {
  size_t taken = 0;
  for (int stale = 0; taken < want && stale < 8;) {
    const size_t m = 2 * (want - taken) + 16;
    std::vector<double> drawn(m * dims);
    const size_t got = context.sample(static_cast<uint64_t>(rng()), m, drawn.data());
    std::vector<int32_t> ok(got), seen(got);
    if (got > 0) {
      context.check_valid(drawn.data(), got, ok.data());
      context.seen(drawn.data(), got, seen.data());
    }
    const size_t before = taken;
    for (size_t i = 0; i < got && taken < want; ++i) {
      if (!ok[i] || seen[i]) continue;
      std::vector<double> row(drawn.data() + i * dims, drawn.data() + (i + 1) * dims);
      if (!batch->insert(row).second) continue;
      picked->insert(picked->end(), row.begin(), row.end());
      ++taken;
    }
    stale = taken > before ? 0 : stale + 1;
  }
}

}  // namespace cotune

#endif  // COTUNE_LOCAL_SEARCH_HPP_
