// evolution: regularised (aging) evolution, after Real et al., "Regularized Evolution for Image
// Classifier Architecture Search" (AAAI 2019). A population of configurations ages in a queue:
// each child is bred by a tournament (the best of `sample_size` members drawn at random) and a
// mutation of one or a few parameters; it joins the young end and the oldest member leaves.
// Fitness is the predictor's score for bred children (re-scored at each propose(), as the
// predictor is refitted) and the measured score for trials reported through observe(). Breeding
// finds good regions but rarely the very best configuration in one, so the best children and
// members are then hill-climbed under the predictor over one- and two-parameter changes
// (cotune/local_search.hpp). Proposals are the best-scoring distinct unseen valid configurations
// met, plus a share of random exploration.
//
// Options: "explore" (share of random proposals, default 0.1), "population" (default 20: a study
// measures tens of configurations, and a larger population keeps breeding from mediocre ones for
// most of it), "sample_size" (tournament size, default 10), "children" (children bred per propose,
// default 128; 256 took 39 ms a proposal against 23 ms with 1,000 trials measured, and found
// nothing sooner), "climb_starts" (configurations hill-climbed per propose, 48; 0: none),
// "climb_steps" (moves per climb, 20), "pair_moves" (two-parameter changes tried per move, at most;
// 2048), "sample_pool" (valid configurations drawn by the host and scored next to the children each
// propose, 64: what remains when the space is narrowed to a table's runs and mutations mostly fall
// outside it).
#include <cotune/cotune.hpp>
#include <cotune/local_search.hpp>
#include <cotune/support/likely_meant.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr const char* kId = "org.cotune.searcher.evolution";
constexpr int kStateVersion = 1;
constexpr size_t kRound = 32;           // children bred, checked and scored together
constexpr int kMaxBreedAttempts = 4;    // breeding passes per propose when the children are all seen
constexpr double kNeighbourShare = 0.7; // mutations to a neighbouring value (else: any other value)
constexpr size_t kClimbFloatBins = 16;  // values per FLOAT parameter for the hill climber
constexpr size_t kClimbIntBins = 256;   // INT ranges wider than this are climbed over this many values

cotune::Error invalid(const std::string& message) {
  return cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, std::string("evolution searcher: ") + message);
}

nlohmann::json parse_json(std::string_view text, const char* what) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    throw invalid(std::string(what) + ": not valid JSON (" + e.what() + ")");
  }
}

// JSON has no infinities: non-finite fitness values travel as strings.
nlohmann::json encode_number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}
double decode_number(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  throw invalid("saved state: '" + s + "' is not a number");
}

int checked_int(const nlohmann::json& value, const std::string& key, int low, int high) {
  if (!value.is_number_integer() || value.get<int64_t>() < low || value.get<int64_t>() > high)
    throw invalid("option '" + key + "': expected an integer in [" + std::to_string(low) + ", " +
                  std::to_string(high) + "]");
  return value.get<int>();
}

struct Options {
  double explore = 0.1;
  int population = 20;
  int sample_size = 10;
  int children = 128;
  int climb_starts = 48;
  int climb_steps = 20;
  int pair_moves = 2048;
  int sample_pool = 64;

  nlohmann::json to_json() const {
    return {{"explore", explore},         {"population", population},   {"sample_size", sample_size},
            {"children", children},       {"climb_starts", climb_starts}, {"climb_steps", climb_steps},
            {"pair_moves", pair_moves},   {"sample_pool", sample_pool}};
  }

  static Options parse(const nlohmann::json& j) {
    if (!j.is_object()) throw invalid("options: expected a JSON object");
    Options o;
    for (const auto& [key, value] : j.items()) {
      if (key == "explore") {
        if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > 1)
          throw invalid("option 'explore': expected a number in [0, 1]");
        o.explore = value.get<double>();
      } else if (key == "population") {
        o.population = checked_int(value, key, 2, 100000);
      } else if (key == "sample_size") {
        o.sample_size = checked_int(value, key, 1, 100000);
      } else if (key == "children") {
        o.children = checked_int(value, key, 1, 1000000);
      } else if (key == "climb_starts") {
        o.climb_starts = checked_int(value, key, 0, 1000);
      } else if (key == "climb_steps") {
        o.climb_steps = checked_int(value, key, 1, 1000);
      } else if (key == "pair_moves") {
        o.pair_moves = checked_int(value, key, 0, 1000000);
      } else if (key == "sample_pool") {
        o.sample_pool = checked_int(value, key, 0, 1000000);
      } else {
        constexpr const char* kKnown =
            "explore, population, sample_size, children, climb_starts, climb_steps, pair_moves, sample_pool";
        throw invalid("unknown option '" + key + "'" + cotune::support::did_you_mean_listed(key, kKnown) + " (known: " +
                      kKnown + ")");
      }
    }
    if (o.sample_size > o.population)
      throw invalid("option 'sample_size' (" + std::to_string(o.sample_size) + ") must not exceed 'population' (" +
                    std::to_string(o.population) + ")");
    return o;
  }
};

// What mutation needs to know of a parameter.
struct Domain {
  int32_t type = 0;
  bool log_scale = false;
  double low = 0, high = 0;
  std::vector<double> values;  // INT lists
  size_t choices = 0;          // CATEGORICAL

  explicit Domain(const cotune_param& p)
      : type(p.type), log_scale((p.flags & COTUNE_PARAM_LOG_SCALE) != 0 && p.low > 0), low(p.low), high(p.high) {
    const std::string name(cotune::view(p.name));
    if (type == COTUNE_PARAM_INT && p.values != nullptr && p.num_values > 0)
      values.assign(p.values, p.values + p.num_values);
    if (type == COTUNE_PARAM_CATEGORICAL) {
      choices = p.num_choices;
      if (choices == 0) throw invalid("parameter '" + name + "' has no choices");
    }
    if (type < COTUNE_PARAM_INT || type > COTUNE_PARAM_BOOL)
      throw invalid("parameter '" + name + "' has unknown type " + std::to_string(type));
    if (!(low <= high)) throw invalid("parameter '" + name + "' has low > high");
  }

  // False when the parameter has a single value, so mutating it cannot change anything.
  bool can_change() const {
    if (type == COTUNE_PARAM_CATEGORICAL) return choices > 1;
    if (!values.empty()) return values.size() > 1;
    if (type == COTUNE_PARAM_INT) return std::floor(high) > std::ceil(low);
    return high > low;
  }

  // A different value of the domain: a neighbour of v, or any other value.
  double mutate(double v, std::mt19937_64& rng) const {
    std::uniform_real_distribution<double> unit(0, 1);
    const bool neighbour = unit(rng) < kNeighbourShare;
    if (type == COTUNE_PARAM_BOOL) return v != 0 ? 0 : 1;
    if (type == COTUNE_PARAM_CATEGORICAL) return other_index(static_cast<size_t>(v), choices, rng);
    if (!values.empty()) {
      const size_t i = std::min<size_t>(std::lower_bound(values.begin(), values.end(), v) - values.begin(),
                                        values.size() - 1);
      if (!neighbour) return values[other_index(i, values.size(), rng)];
      const bool up = (i == 0) || (i + 1 < values.size() && unit(rng) < 0.5);
      return values[up ? i + 1 : i - 1];
    }
    if (type == COTUNE_PARAM_INT) return mutate_int(v, neighbour, rng);
    return mutate_float(v, neighbour, rng);
  }

 private:
  static size_t other_index(size_t i, size_t n, std::mt19937_64& rng) {
    size_t j = std::uniform_int_distribution<size_t>(0, n - 2)(rng);
    return j >= i ? j + 1 : j;
  }

  double mutate_int(double v, bool neighbour, std::mt19937_64& rng) const {
    const double lo = std::ceil(low), hi = std::floor(high);
    double w = v;
    if (neighbour && log_scale) {  // a step of up to x2 either way, at least 1
      const double f = std::exp(std::uniform_real_distribution<double>(-std::log(2.0), std::log(2.0))(rng));
      w = std::round(v * f);
    } else if (neighbour) {  // a step of 1 to a tenth of the range
      const double reach = std::max(1.0, std::round((hi - lo) / 10));
      const double step = std::floor(std::uniform_real_distribution<double>(1, reach + 1)(rng));
      w = std::uniform_int_distribution<int>(0, 1)(rng) ? v + step : v - step;
    } else {
      w = std::floor(std::uniform_real_distribution<double>(lo, hi + 1)(rng));
    }
    w = std::clamp(w, lo, hi);
    if (w == v) w = v + 1 <= hi ? v + 1 : v - 1;
    return w;
  }

  double mutate_float(double v, bool neighbour, std::mt19937_64& rng) const {
    const double lo = log_scale ? std::log(low) : low, hi = log_scale ? std::log(high) : high;
    const double x = log_scale ? std::log(std::max(v, low)) : v;
    double y = neighbour ? x + std::normal_distribution<double>(0, 0.1 * (hi - lo))(rng)
                         : std::uniform_real_distribution<double>(lo, hi)(rng);
    y = std::clamp(y, lo, hi);
    return log_scale ? std::clamp(std::exp(y), low, high) : y;
  }
};

struct Member {
  std::vector<double> config;
  double fitness = 0;
  bool measured = false;
};

class EvolutionSearcher {
 public:
  EvolutionSearcher(std::string_view options, const cotune_param* const* params, size_t num_params, uint64_t seed)
      : options_(Options::parse(options.empty() ? nlohmann::json::object() : parse_json(options, "options"))),
        rng_(seed) {
    if (num_params == 0) throw invalid("the space has no parameters");
    for (size_t j = 0; j < num_params; ++j) {
      domains_.emplace_back(*params[j]);
      if (domains_.back().can_change()) mutable_params_.push_back(j);
      climb_values_.push_back(cotune::candidate_values(*params[j], kClimbFloatBins, kClimbIntBins));
    }
  }

  size_t propose(const cotune::SearchContext& context, size_t n, double* out) {
    const size_t d = domains_.size();
    if (context.num_params() != d)
      throw invalid("context has " + std::to_string(context.num_params()) + " parameters, the searcher " +
                    std::to_string(d));
    explore_credit_ += options_.explore * static_cast<double>(n);
    const size_t explore = std::min(n, static_cast<size_t>(std::floor(explore_credit_)));
    explore_credit_ -= static_cast<double>(explore);

    rescore_population(context);
    seed_population(context);

    // Breed until enough distinct unseen children (or a few passes that bring nothing new).
    Pool pool;
    std::vector<int32_t> seen;
    for (int attempt = 0; attempt < kMaxBreedAttempts && !population_.empty(); ++attempt) {
      breed(context, &pool);
      seen.assign(pool.scores.size(), 0);
      if (!seen.empty()) context.seen(pool.rows.data(), seen.size(), seen.data());
      if (attempt == 0) {
        climb_from_best(context, &pool);
        // After the climb, not before: climbs from random samples are long, and the samples are
        // here to be proposed where children cannot reach (a space narrowed to a table's runs).
        for (const cotune::ScoredConfig& c :
             cotune::scored_samples(context, rng_(), static_cast<size_t>(options_.sample_pool)))
          pool.add(c.config, c.score);
      }
      if (static_cast<size_t>(std::count(seen.begin(), seen.end(), 0)) >= n) break;
    }
    seen.assign(pool.scores.size(), 0);
    if (!seen.empty()) context.seen(pool.rows.data(), seen.size(), seen.data());
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

  // Measured trials join the population with their real score; failed ones never become parents.
  void observe(const double* configs, size_t n, const double* scores, const int32_t* statuses) {
    const size_t d = domains_.size();
    for (size_t i = 0; i < n; ++i) {
      if (statuses[i] != COTUNE_STATUS_OK || !std::isfinite(scores[i])) continue;
      add_member({std::vector<double>(configs + i * d, configs + (i + 1) * d), scores[i], true});
    }
  }

  std::string save() {
    std::ostringstream rng;
    rng << rng_;
    nlohmann::json members = nlohmann::json::array();
    for (const Member& m : population_)
      members.push_back({{"config", m.config}, {"fitness", encode_number(m.fitness)}, {"measured", m.measured}});
    nlohmann::json state = {{"searcher", "evolution"},      {"version", kStateVersion},
                            {"num_params", domains_.size()}, {"options", options_.to_json()},
                            {"explore_credit", explore_credit_}, {"rng", rng.str()},
                            {"population", members}};
    return state.dump();
  }

  void load(std::string_view bytes) {
    const nlohmann::json state = parse_json(bytes, "saved state");
    try {
      if (!state.is_object() || state.value("searcher", "") != "evolution")
        throw invalid("saved state: not an evolution searcher state");
      if (state.at("version").get<int>() != kStateVersion)
        throw invalid("saved state: version " + state.at("version").dump() + ", expected " +
                      std::to_string(kStateVersion));
      const size_t d = domains_.size();
      if (state.at("num_params").get<size_t>() != d)
        throw invalid("saved state: made for " + state.at("num_params").dump() + " parameters, this space has " +
                      std::to_string(d));
      Options options = Options::parse(state.at("options"));
      const double credit = state.at("explore_credit").get<double>();
      if (!(credit >= 0 && credit < 1)) throw invalid("saved state: field 'explore_credit' must be in [0, 1)");
      std::mt19937_64 rng;  // NOLINT(cert-msc32-c,cert-msc51-cpp): its state is read from the saved one below
      std::istringstream in(state.at("rng").get<std::string>());
      in >> rng;
      if (in.fail()) throw invalid("saved state: field 'rng' is not a mt19937_64 state");
      std::deque<Member> population;
      for (const auto& m : state.at("population")) {
        Member member{m.at("config").get<std::vector<double>>(), decode_number(m.at("fitness")),
                      m.at("measured").get<bool>()};
        if (member.config.size() != d)
          throw invalid("saved state: a population member has " + std::to_string(member.config.size()) +
                        " values, expected " + std::to_string(d));
        population.push_back(std::move(member));
      }
      if (population.size() > static_cast<size_t>(options.population))
        throw invalid("saved state: population larger than the option 'population'");
      options_ = options;
      explore_credit_ = credit;
      rng_ = rng;
      population_ = std::move(population);
    } catch (const nlohmann::json::exception& e) {
      throw invalid(std::string("saved state: missing or mistyped field (") + e.what() + ")");
    }
  }

 private:
  // Distinct valid children of one propose(), with their predicted scores.
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

  // Hill-climbs from the `climb_starts` best of the children and the population (measured members
  // included: their neighbours are what is worth measuring next), by predicted score; every valid
  // configuration met joins the pool.
  void climb_from_best(const cotune::SearchContext& context, Pool* pool) {
    const size_t d = domains_.size();
    if (options_.climb_starts == 0) return;
    std::vector<cotune::ScoredConfig> starts;
    for (size_t i = 0; i < pool->scores.size(); ++i)
      starts.push_back({std::vector<double>(pool->rows.begin() + i * d, pool->rows.begin() + (i + 1) * d),
                        pool->scores[i]});
    if (!population_.empty()) {
      std::vector<double> rows;
      for (const Member& m : population_) rows.insert(rows.end(), m.config.begin(), m.config.end());
      std::vector<double> score(population_.size());
      context.score(rows.data(), population_.size(), score.data());  // invalid ones score -inf
      for (size_t i = 0; i < population_.size(); ++i)
        if (std::isfinite(score[i])) starts.push_back({population_[i].config, score[i]});
    }
    const size_t count = std::min(starts.size(), static_cast<size_t>(options_.climb_starts));
    std::partial_sort(starts.begin(), starts.begin() + static_cast<std::ptrdiff_t>(count), starts.end(),
                      [](const cotune::ScoredConfig& a, const cotune::ScoredConfig& b) { return a.score > b.score; });
    const cotune::HillClimber climber(context, climb_values_, static_cast<size_t>(options_.pair_moves));
    std::vector<cotune::ScoredConfig> visited;
    std::set<std::vector<double>> climbed;
    std::vector<cotune::ScoredConfig> optima;
    for (size_t s = 0; s < count; ++s)
      if (climbed.insert(starts[s].config).second)
        optima.push_back(climber.climb(starts[s], static_cast<size_t>(options_.climb_steps), rng_, &visited));
    for (const auto& v : visited) pool->add(v.config, v.score);
    // The local optima join the population (Lamarckian): later tournaments breed from them.
    for (auto& o : optima)
      if (climbed.insert(o.config).second) add_member({std::move(o.config), fitness_of(o.score), false});
  }

  void add_member(Member m) {
    population_.push_back(std::move(m));
    while (population_.size() > static_cast<size_t>(options_.population)) population_.pop_front();
  }

  // The predictor was refitted since the last call: predicted fitness is stale.
  void rescore_population(const cotune::SearchContext& context) {
    std::vector<double> rows;
    std::vector<size_t> who;
    for (size_t i = 0; i < population_.size(); ++i) {
      if (population_[i].measured) continue;
      rows.insert(rows.end(), population_[i].config.begin(), population_[i].config.end());
      who.push_back(i);
    }
    if (who.empty()) return;
    std::vector<double> score(who.size());
    context.score(rows.data(), who.size(), score.data());
    for (size_t k = 0; k < who.size(); ++k) population_[who[k]].fitness = fitness_of(score[k]);
  }

  // Fills a young population with random valid configurations (the first generation).
  void seed_population(const cotune::SearchContext& context) {
    const size_t d = domains_.size();
    const size_t want = static_cast<size_t>(options_.population);
    for (int round = 0; population_.size() < want && round < 4; ++round) {
      const size_t m = want - population_.size();
      std::vector<double> drawn(m * d);
      const size_t got = context.sample(rng_(), m, drawn.data());
      if (got == 0) break;
      std::vector<int32_t> ok(got);
      std::vector<double> score(got);
      context.check_valid(drawn.data(), got, ok.data());
      context.score(drawn.data(), got, score.data());
      for (size_t i = 0; i < got; ++i)
        if (ok[i]) add_member({std::vector<double>(drawn.begin() + i * d, drawn.begin() + (i + 1) * d),
                               fitness_of(score[i]), false});
    }
  }

  // Breeds options_.children children, in rounds checked and scored together; valid ones join the
  // population (aging out the oldest) and the pool.
  void breed(const cotune::SearchContext& context, Pool* pool) {
    const size_t d = domains_.size();
    std::vector<double> kids;
    std::vector<int32_t> ok;
    for (size_t done = 0; done < static_cast<size_t>(options_.children);) {
      const size_t m = std::min(kRound, static_cast<size_t>(options_.children) - done);
      kids.resize(m * d);
      for (size_t i = 0; i < m; ++i) {
        std::vector<double> child = mutate(tournament());
        std::copy(child.begin(), child.end(), kids.begin() + i * d);
      }
      ok.resize(m);
      context.check_valid(kids.data(), m, ok.data());
      std::vector<double> valid_rows;
      for (size_t i = 0; i < m; ++i)
        if (ok[i]) valid_rows.insert(valid_rows.end(), kids.begin() + i * d, kids.begin() + (i + 1) * d);
      std::vector<double> valid_scores(valid_rows.size() / d);
      if (!valid_scores.empty()) context.score(valid_rows.data(), valid_scores.size(), valid_scores.data());
      for (size_t k = 0; k < valid_scores.size(); ++k) {
        std::vector<double> child(valid_rows.begin() + k * d, valid_rows.begin() + (k + 1) * d);
        const double fitness = fitness_of(valid_scores[k]);
        if (pool->members.insert(child).second) {
          pool->rows.insert(pool->rows.end(), child.begin(), child.end());
          pool->scores.push_back(fitness);
        }
        add_member({std::move(child), fitness, false});
      }
      done += m;
    }
  }

  // The fittest of sample_size members drawn without replacement (ties: the one drawn first).
  const std::vector<double>& tournament() {
    const size_t size = population_.size();
    const size_t s = std::min(size, static_cast<size_t>(options_.sample_size));
    index_scratch_.resize(size);
    std::iota(index_scratch_.begin(), index_scratch_.end(), size_t{0});
    size_t best = size;
    for (size_t k = 0; k < s; ++k) {
      const size_t r = std::uniform_int_distribution<size_t>(k, size - 1)(rng_);
      std::swap(index_scratch_[k], index_scratch_[r]);
      const size_t i = index_scratch_[k];
      if (best == size || population_[i].fitness > population_[best].fitness) best = i;
    }
    // breed() runs only with a non-empty population and sample_size >= 1, so the loop set `best`.
    // cppcheck-suppress containerOutOfBounds
    return population_[best].config;
  }

  // Changes one parameter, and a few more with decreasing probability.
  std::vector<double> mutate(const std::vector<double>& parent) {
    std::vector<double> child = parent;
    if (mutable_params_.empty()) return child;
    std::vector<size_t> which = mutable_params_;
    std::uniform_real_distribution<double> unit(0, 1);
    size_t k = 1;
    while (k < which.size() && unit(rng_) < 0.3) ++k;
    for (size_t i = 0; i < k; ++i) {
      std::swap(which[i], which[std::uniform_int_distribution<size_t>(i, which.size() - 1)(rng_)]);
      child[which[i]] = domains_[which[i]].mutate(child[which[i]], rng_);
    }
    return child;
  }

  // Appends up to `want` random valid unseen configurations from context.sample().
  void draw_random(const cotune::SearchContext& context, size_t want, std::set<std::vector<double>>* batch,
                   std::vector<double>* picked) {
    cotune::draw_unseen_valid(context, domains_.size(), want, rng_, batch, picked);
  }

  static double fitness_of(double score) {
    return std::isnan(score) ? -std::numeric_limits<double>::infinity() : score;
  }

  Options options_;
  std::vector<Domain> domains_;
  std::vector<size_t> mutable_params_;
  std::vector<std::vector<double>> climb_values_;  // per parameter: the values the hill climber tries
  std::mt19937_64 rng_;
  double explore_credit_ = 0;  // fractional exploration proposals carried to the next propose()
  std::deque<Member> population_;  // oldest first
  std::vector<size_t> index_scratch_;
};

}  // namespace

COTUNE_PLUGIN(cotune::searcher<EvolutionSearcher>(
    {kId, "evolution", "Regularised (aging) evolution guided by the predictor.", "1.0.0"}))
