// exhaustive: for spaces small enough to enumerate. Builds the cartesian product of every
// parameter's finite domain, keeps the valid configurations (checked in batches), scores all of
// them with the predictor and proposes the best unmeasured ones, plus a share of random exploration
// so that the predictor also learns away from its favourites. The ranking is kept while the host's
// score_version stays the same (no refit since), so most proposals score nothing.
//
// Options: "explore" (share of proposals drawn at random, default 0.1), "max_space" (largest
// domain it agrees to enumerate, default 200000). Spaces with FLOAT parameters or a larger domain
// are refused at creation with the size and the limit.
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

constexpr const char* kId = "org.cotune.searcher.exhaustive";
constexpr int kStateVersion = 1;
constexpr size_t kBatch = 4096;  // configurations per check()/score() call

cotune::Error invalid(const std::string& message) {
  return cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, std::string("exhaustive searcher: ") + message);
}

nlohmann::json parse_json(std::string_view text, const char* what) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    throw invalid(std::string(what) + ": not valid JSON (" + e.what() + ")");
  }
}

struct Options {
  double explore = 0.1;
  double max_space = 200000;

  nlohmann::json to_json() const { return {{"explore", explore}, {"max_space", max_space}}; }

  static Options parse(const nlohmann::json& j) {
    if (!j.is_object()) throw invalid("options: expected a JSON object");
    Options o;
    for (const auto& [key, value] : j.items()) {
      if (key == "explore") {
        if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > 1)
          throw invalid("option 'explore': expected a number in [0, 1]");
        o.explore = value.get<double>();
      } else if (key == "max_space") {
        if (!value.is_number() || value.get<double>() < 1 || value.get<double>() > 1e8 ||
            value.get<double>() != std::floor(value.get<double>()))
          throw invalid("option 'max_space': expected an integer in [1, 100000000]");
        o.max_space = value.get<double>();
      } else {
        throw invalid("unknown option '" + key + "'" + cotune::support::did_you_mean_listed(key, "explore, max_space") +
                      " (known: explore, max_space)");
      }
    }
    return o;
  }
};

// The finite domain of one parameter, or an error when it has none small enough.
std::vector<double> finite_domain(const cotune_param& p, double limit) {
  const std::string name(cotune::view(p.name));
  switch (p.type) {
    case COTUNE_PARAM_INT:
      if (p.values != nullptr && p.num_values > 0) return std::vector<double>(p.values, p.values + p.num_values);
      if (!(p.high - p.low + 1 <= limit))
        throw cotune::Error(COTUNE_ERR_RESOURCE_EXHAUSTED,
                            "exhaustive searcher: parameter '" + name + "' alone has more values than max_space=" +
                                std::to_string(static_cast<long long>(limit)));
      {
        std::vector<double> d;
        const double first = std::ceil(p.low);  // counted by an integer: a double stops advancing past 2^53
        for (long long i = 0; first + double(i) <= p.high; ++i) d.push_back(first + double(i));
        return d;
      }
    case COTUNE_PARAM_CATEGORICAL: {
      std::vector<double> d(p.num_choices);
      std::iota(d.begin(), d.end(), 0.0);
      return d;
    }
    case COTUNE_PARAM_BOOL:
      return {0, 1};
    case COTUNE_PARAM_FLOAT:
      throw cotune::Error(COTUNE_ERR_UNSUPPORTED,
                          "exhaustive searcher: parameter '" + name +
                              "' is FLOAT and cannot be enumerated (use random, evolution or reinforce)");
    default:
      throw invalid("parameter '" + name + "' has unknown type " + std::to_string(p.type));
  }
}

class ExhaustiveSearcher {
 public:
  ExhaustiveSearcher(std::string_view options, const cotune_param* const* params, size_t num_params, uint64_t seed)
      : options_(Options::parse(options.empty() ? nlohmann::json::object() : parse_json(options, "options"))),
        rng_(seed) {
    if (num_params == 0) throw invalid("the space has no parameters");
    double size = 1;
    for (size_t j = 0; j < num_params; ++j) {
      domains_.push_back(finite_domain(*params[j], options_.max_space));
      if (domains_.back().empty())
        throw invalid("parameter '" + std::string(cotune::view(params[j]->name)) + "' has an empty domain");
      size *= static_cast<double>(domains_.back().size());
    }
    if (size > options_.max_space) {
      std::ostringstream msg;
      msg.precision(15);
      msg << "exhaustive searcher: the space has " << size << " configurations, more than max_space="
          << options_.max_space << " (raise the option 'max_space' or use random, evolution or reinforce)";
      throw cotune::Error(COTUNE_ERR_RESOURCE_EXHAUSTED, msg.str());
    }
    space_size_ = static_cast<size_t>(size);
  }

  size_t propose(const cotune::SearchContext& context, size_t n, double* out) {
    const size_t d = domains_.size();
    if (context.num_params() != d)
      throw invalid("context has " + std::to_string(context.num_params()) + " parameters, the searcher " +
                    std::to_string(d));
    if (!enumerated_) enumerate(context);

    explore_credit_ += options_.explore * static_cast<double>(n);
    size_t explore = std::min(n, static_cast<size_t>(std::floor(explore_credit_)));
    explore_credit_ -= static_cast<double>(explore);

    // Scores change only when the predictor does: rank again only then (or when the host cannot say).
    const uint64_t version = context.score_version();
    if (version == 0 || version != ranked_version_ || !ranked_once_) {
      order_ = ranked(context, &uninformed_);
      ranked_version_ = version;
      ranked_once_ = true;
    }
    // Every score the same (nothing measured, no prior): the ranking is the enumeration order, a
    // corner of the space (all degrees 1). Draw at random instead; the order only fills what
    // sampling cannot find.
    if (uninformed_) explore = n;
    const std::vector<size_t>& order = order_;
    std::set<std::vector<double>> batch;
    std::vector<double> picked;
    size_t next = 0;  // position in `order`
    take_best(context, order, n - explore, &next, &batch, &picked);
    draw_random(context, n - picked.size() / d, &batch, &picked);
    take_best(context, order, n - picked.size() / d, &next, &batch, &picked);
    std::copy(picked.begin(), picked.end(), out);
    return picked.size() / d;
  }

  // The predictor already learns from the trials; enumeration needs nothing more.
  void observe(const double*, size_t, const double*, const int32_t*) {}

  std::string save() {
    std::ostringstream rng;
    rng << rng_;
    nlohmann::json state = {{"searcher", "exhaustive"},       {"version", kStateVersion},
                            {"num_params", domains_.size()},  {"space_size", space_size_},
                            {"options", options_.to_json()},  {"explore_credit", explore_credit_},
                            {"rng", rng.str()}};
    return state.dump();
  }

  void load(std::string_view bytes) {
    const nlohmann::json state = parse_json(bytes, "saved state");
    try {
      if (!state.is_object() || state.value("searcher", "") != "exhaustive")
        throw invalid("saved state: not an exhaustive searcher state");
      if (state.at("version").get<int>() != kStateVersion)
        throw invalid("saved state: version " + state.at("version").dump() + ", expected " +
                      std::to_string(kStateVersion));
      if (state.at("num_params").get<size_t>() != domains_.size() ||
          state.at("space_size").get<size_t>() != space_size_)
        throw invalid("saved state: made for another space (" + state.at("num_params").dump() + " parameters, " +
                      state.at("space_size").dump() + " configurations)");
      Options options = Options::parse(state.at("options"));
      const double credit = state.at("explore_credit").get<double>();
      if (!(credit >= 0 && credit < 1)) throw invalid("saved state: field 'explore_credit' must be in [0, 1)");
      std::mt19937_64 rng;  // NOLINT(cert-msc32-c,cert-msc51-cpp): its state is read from the saved one below
      std::istringstream in(state.at("rng").get<std::string>());
      in >> rng;
      if (in.fail()) throw invalid("saved state: field 'rng' is not a mt19937_64 state");
      options_ = options;
      explore_credit_ = credit;
      rng_ = rng;
    } catch (const nlohmann::json::exception& e) {
      throw invalid(std::string("saved state: missing or mistyped field (") + e.what() + ")");
    }
  }

 private:
  // Walks the cartesian product in mixed radix (last parameter fastest) and keeps valid points.
  void enumerate(const cotune::SearchContext& context) {
    const size_t d = domains_.size();
    std::vector<size_t> digit(d, 0);
    std::vector<double> chunk;
    std::vector<int32_t> ok;
    for (size_t done = 0; done < space_size_;) {
      const size_t m = std::min(kBatch, space_size_ - done);
      chunk.resize(m * d);
      for (size_t i = 0; i < m; ++i) {
        for (size_t j = 0; j < d; ++j) chunk[i * d + j] = domains_[j][digit[j]];
        for (size_t j = d; j-- > 0;) {
          if (++digit[j] < domains_[j].size()) break;
          digit[j] = 0;
        }
      }
      ok.resize(m);
      context.check_valid(chunk.data(), m, ok.data());
      for (size_t i = 0; i < m; ++i)
        if (ok[i]) valid_.insert(valid_.end(), chunk.begin() + i * d, chunk.begin() + (i + 1) * d);
      done += m;
    }
    enumerated_ = true;
  }

  // Indices of the valid configurations, best predicted score first (ties: enumeration order);
  // *all_equal is set when every score is the same.
  std::vector<size_t> ranked(const cotune::SearchContext& context, bool* all_equal) const {
    const size_t d = domains_.size();
    const size_t count = valid_.size() / d;
    std::vector<double> score(count);
    for (size_t i = 0; i < count; i += kBatch)
      context.score(valid_.data() + i * d, std::min(kBatch, count - i), score.data() + i);
    for (double& s : score)
      if (std::isnan(s)) s = -std::numeric_limits<double>::infinity();
    *all_equal = std::all_of(score.begin(), score.end(), [&](double s) { return s == score.front(); });
    std::vector<size_t> order(count);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
    return order;
  }

  // Appends up to `want` unseen configurations from `order`, starting at *next.
  void take_best(const cotune::SearchContext& context, const std::vector<size_t>& order, size_t want, size_t* next,
                 std::set<std::vector<double>>* batch, std::vector<double>* picked) const {
    const size_t d = domains_.size();
    size_t taken = 0;
    std::vector<double> rows;
    std::vector<int32_t> seen;
    while (taken < want && *next < order.size()) {
      const size_t m = std::min(order.size() - *next, std::max<size_t>(64, 2 * (want - taken)));
      rows.resize(m * d);
      for (size_t i = 0; i < m; ++i)
        std::copy_n(valid_.begin() + order[*next + i] * d, d, rows.begin() + i * d);
      seen.resize(m);
      context.seen(rows.data(), m, seen.data());
      size_t i = 0;
      for (; i < m && taken < want; ++i) {
        if (seen[i]) continue;
        std::vector<double> row(rows.begin() + i * d, rows.begin() + (i + 1) * d);
        if (!batch->insert(row).second) continue;
        picked->insert(picked->end(), row.begin(), row.end());
        ++taken;
      }
      *next += i;
    }
  }

  // Appends up to `want` random valid unseen configurations from context.sample().
  void draw_random(const cotune::SearchContext& context, size_t want, std::set<std::vector<double>>* batch,
                   std::vector<double>* picked) {
    cotune::draw_unseen_valid(context, domains_.size(), want, rng_, batch, picked);
  }

  Options options_;
  std::vector<std::vector<double>> domains_;
  size_t space_size_ = 0;
  std::mt19937_64 rng_;
  bool uninformed_ = false;    // the last ranking had every score equal
  double explore_credit_ = 0;  // fractional exploration proposals carried to the next propose()
  bool enumerated_ = false;    // valid_ is derived from the space, so it is rebuilt, never saved
  std::vector<double> valid_;  // the valid configurations, row-major
  // valid_'s indices, best predicted first, as ranked under score version ranked_version_ (derived
  // from the predictor: rebuilt after a restore, never saved).
  std::vector<size_t> order_;
  uint64_t ranked_version_ = 0;
  bool ranked_once_ = false;
};

}  // namespace

COTUNE_PLUGIN(cotune::searcher<ExhaustiveSearcher>(
    {kId, "exhaustive", "Enumerates a small space and proposes the best predicted configurations.", "1.0.0"}))
