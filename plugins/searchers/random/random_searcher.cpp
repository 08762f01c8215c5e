// random: the baseline searcher. Proposes valid configurations drawn uniformly by the space
// (context.sample), dropping those already seen and duplicates within a batch. Every comparison
// of searchers is made against it.
//
// Options: "explore" (checked and accepted for uniformity with the other searchers; every proposal
// of this searcher is exploration anyway), "rounds" (consecutive sampling rounds that bring nothing new before
// propose() gives up, default 8).
#include <cotune/cotune.hpp>
#include <cotune/support/likely_meant.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr const char* kId = "org.cotune.searcher.random";
constexpr int kStateVersion = 1;

cotune::Error invalid(const std::string& message) {
  return cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, std::string("random searcher: ") + message);
}

struct Options {
  int rounds = 8;

  nlohmann::json to_json() const { return {{"rounds", rounds}}; }

  static Options parse(const nlohmann::json& j) {
    if (!j.is_object()) throw invalid("options: expected a JSON object");
    Options o;
    for (const auto& [key, value] : j.items()) {
      if (key == "explore") {
        if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > 1)
          throw invalid("option 'explore': expected a number in [0, 1]");
      } else if (key == "rounds") {
        if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 1000)
          throw invalid("option 'rounds': expected an integer in [1, 1000]");
        o.rounds = value.get<int>();
      } else {
        throw invalid("unknown option '" + key + "'" + cotune::support::did_you_mean_listed(key, "explore, rounds") +
                      " (known: explore, rounds)");
      }
    }
    return o;
  }
};

nlohmann::json parse_json(std::string_view text, const char* what) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    throw invalid(std::string(what) + ": not valid JSON (" + e.what() + ")");
  }
}

class RandomSearcher {
 public:
  RandomSearcher(std::string_view options, const cotune_param* const* /*params*/, size_t num_params,
                 uint64_t seed)
      : options_(Options::parse(options.empty() ? nlohmann::json::object() : parse_json(options, "options"))),
        num_params_(num_params),
        rng_(seed) {
    if (num_params == 0) throw invalid("the space has no parameters");
  }

  size_t propose(const cotune::SearchContext& context, size_t n, double* out) {
    if (context.num_params() != num_params_)
      throw invalid("context has " + std::to_string(context.num_params()) + " parameters, the searcher " +
                    std::to_string(num_params_));
    const size_t d = num_params_;
    std::set<std::vector<double>> batch;
    size_t count = 0;
    for (int stale = 0; count < n && stale < options_.rounds;) {
      const size_t want = 2 * (n - count) + 16;  // headroom for seen and invalid draws
      std::vector<double> drawn(want * d);
      const size_t got = context.sample(rng_(), want, drawn.data());
      std::vector<int32_t> valid(got), seen(got);
      if (got > 0) {
        context.check_valid(drawn.data(), got, valid.data());
        context.seen(drawn.data(), got, seen.data());
      }
      size_t added = 0;
      for (size_t i = 0; i < got && count < n; ++i) {
        if (!valid[i] || seen[i]) continue;
        std::vector<double> row(drawn.begin() + i * d, drawn.begin() + (i + 1) * d);
        if (!batch.insert(row).second) continue;
        std::copy(row.begin(), row.end(), out + count * d);
        ++count;
        ++added;
      }
      stale = added > 0 ? 0 : stale + 1;
    }
    return count;
  }

  // Random search learns nothing from results.
  void observe(const double*, size_t, const double*, const int32_t*) {}

  std::string save() {
    std::ostringstream rng;
    rng << rng_;
    nlohmann::json state = {{"searcher", "random"},      {"version", kStateVersion},
                            {"num_params", num_params_}, {"options", options_.to_json()},
                            {"rng", rng.str()}};
    return state.dump();
  }

  void load(std::string_view bytes) {
    const nlohmann::json state = parse_json(bytes, "saved state");
    try {
      if (!state.is_object() || state.value("searcher", "") != "random")
        throw invalid("saved state: not a random searcher state");
      if (state.at("version").get<int>() != kStateVersion)
        throw invalid("saved state: version " + state.at("version").dump() + ", expected " +
                      std::to_string(kStateVersion));
      if (state.at("num_params").get<size_t>() != num_params_)
        throw invalid("saved state: made for " + state.at("num_params").dump() + " parameters, this space has " +
                      std::to_string(num_params_));
      Options options = Options::parse(state.at("options"));
      std::mt19937_64 rng;  // NOLINT(cert-msc32-c,cert-msc51-cpp): its state is read from the saved one below
      std::istringstream in(state.at("rng").get<std::string>());
      in >> rng;
      if (in.fail()) throw invalid("saved state: field 'rng' is not a mt19937_64 state");
      options_ = options;
      rng_ = rng;
    } catch (const nlohmann::json::exception& e) {
      throw invalid(std::string("saved state: missing or mistyped field (") + e.what() + ")");
    }
  }

 private:
  Options options_;
  size_t num_params_;
  std::mt19937_64 rng_;
};

}  // namespace

COTUNE_PLUGIN(cotune::searcher<RandomSearcher>({kId, "random",
                                                "Uniform random sampling of valid, unseen configurations.", "1.0.0"}))
