// The searcher plugins (random, exhaustive, evolution, reinforce), each through its real .so, over
// the testgrid fixture space whose objective is known. The "predictor" here is exact (score() is
// the objective), so that a searcher's quality, not a model's, is what the tests measure.
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fixtures/spaces/grid/grid_search_context.hpp"

namespace cotune {
namespace {

using core::PluginError;
using core::Registry;
using core::Searcher;
using core::Space;
using testing::GridSearchContext;

constexpr double kOptimum = 10.0;  // the testgrid objective's best valid value

const Registry& registry() {
  static const Registry* reg = [] {
    auto* r = new Registry();
    for (const char* name : {"random", "exhaustive", "evolution", "reinforce"}) {
      const std::string path = std::string(COTUNE_PLUGIN_DIR) + "/libcotune-searcher-" + name + ".so";
      EXPECT_TRUE(r->load_file(path)) << path;
    }
    EXPECT_TRUE(r->load_file(COTUNE_BINARY_DIR "/lib/cotune/test-plugins/libcotune-space-testgrid.so"));
    for (const auto& p : r->problems()) ADD_FAILURE() << p.file << ": " << p.reason;
    return r;
  }();
  return *reg;
}

std::unique_ptr<Space> grid(const std::string& options = "{}") { return registry().make_space("testgrid", "{}", options); }

using Rows = std::vector<std::vector<double>>;

Rows propose(Searcher& s, GridSearchContext& ctx, size_t n) {
  std::vector<double> out(n * ctx.num_params());
  const size_t got = s.propose(ctx.raw(), n, out.data());
  Rows rows;
  for (size_t i = 0; i < got; ++i)
    rows.emplace_back(out.begin() + i * ctx.num_params(), out.begin() + (i + 1) * ctx.num_params());
  return rows;
}

// What the study loop does with proposals: mark them in flight, run them, report the results.
void run(Searcher& s, GridSearchContext& ctx, const Rows& rows) {
  std::vector<double> flat, scores;
  for (const auto& r : rows) {
    flat.insert(flat.end(), r.begin(), r.end());
    scores.push_back(ctx.objective(r.data()));
  }
  ctx.mark_seen(flat.data(), rows.size());
  std::vector<int32_t> statuses(rows.size(), COTUNE_STATUS_OK);
  s.observe(flat.data(), rows.size(), scores.data(), statuses.data());
}

// Best objective found within `budget` proposals made `batch` at a time.
double best_within(Searcher& s, GridSearchContext& ctx, size_t budget, size_t batch) {
  double best = -INFINITY;
  for (size_t done = 0; done < budget;) {
    const Rows rows = propose(s, ctx, std::min(batch, budget - done));
    if (rows.empty()) break;
    for (const auto& r : rows) best = std::max(best, ctx.objective(r.data()));
    run(s, ctx, rows);
    done += rows.size();
  }
  return best;
}

// Every valid configuration of the plain testgrid with its objective.
std::vector<std::pair<double, std::vector<double>>> enumerate_grid(const Space& space, GridSearchContext& ctx) {
  std::vector<std::pair<double, std::vector<double>>> all;
  for (double a : {1, 2, 4, 8, 16, 32})
    for (double b = 0; b <= 20; ++b)
      for (double c = 0; c < 4; ++c)
        for (double d = 0; d < 2; ++d)
          for (double e = 1; e <= 12; ++e) {
            std::vector<double> x = {a, b, c, d, e};
            if (space.valid(x.data())) all.emplace_back(ctx.objective(x.data()), x);
          }
  std::sort(all.begin(), all.end(), [](const auto& l, const auto& r) { return l.first > r.first; });
  return all;
}

// ------------------------------------------------------------------------------------------------
// The contract every searcher keeps
// ------------------------------------------------------------------------------------------------

class EverySearcher : public ::testing::TestWithParam<const char*> {};

TEST_P(EverySearcher, ProposesValidDistinctUnseenConfigurations) {
  auto space = grid();
  GridSearchContext ctx(*space);
  // Pretend a few hundred configurations, the best ones among them, were measured already.
  auto all = enumerate_grid(*space, ctx);
  for (size_t i = 0; i < 20; ++i) ctx.mark_seen(all[i].second.data(), 1);
  std::vector<double> earlier(300 * space->num_params());
  ctx.mark_seen(earlier.data(), space->sample(99, 300, earlier.data()));

  auto s = registry().make_searcher(GetParam(), "{}", *space, 1);
  for (int round = 0; round < 8; ++round) {
    const Rows rows = propose(*s, ctx, 8);
    ASSERT_EQ(rows.size(), 8u) << "round " << round;
    std::set<std::string> keys;
    for (const auto& r : rows) {
      EXPECT_TRUE(space->valid(r.data())) << space->key(r.data()) << ": " << space->explain(r.data());
      EXPECT_FALSE(ctx.is_seen(r.data())) << space->key(r.data());
      EXPECT_TRUE(keys.insert(space->key(r.data())).second) << "twice in one batch: " << space->key(r.data());
    }
    run(*s, ctx, rows);
  }
}

TEST_P(EverySearcher, MixesInTheRequestedShareOfExploration) {
  auto space = grid();
  {
    GridSearchContext ctx(*space);
    auto s = registry().make_searcher(GetParam(), R"({"explore": 0.25})", *space, 3);
    for (int round = 0; round < 4; ++round) {
      const Rows rows = propose(*s, ctx, 8);
      ASSERT_EQ(rows.size(), 8u);
      const auto sampled = std::count_if(rows.begin(), rows.end(), [&](const auto& r) { return ctx.was_sampled(r.data()); });
      EXPECT_GE(sampled, 2) << "round " << round;
      run(*s, ctx, rows);
    }
  }
  {
    GridSearchContext ctx(*space);
    auto s = registry().make_searcher(GetParam(), R"({"explore": 1})", *space, 3);
    const Rows rows = propose(*s, ctx, 8);
    ASSERT_EQ(rows.size(), 8u);
    for (const auto& r : rows) EXPECT_TRUE(ctx.was_sampled(r.data())) << space->key(r.data());
  }
}

TEST_P(EverySearcher, IsDeterministicGivenTheSeed) {
  auto space = grid();
  GridSearchContext ctx_a(*space), ctx_b(*space);
  auto a = registry().make_searcher(GetParam(), "{}", *space, 42);
  auto b = registry().make_searcher(GetParam(), "{}", *space, 42);
  for (int round = 0; round < 3; ++round) {
    const Rows ra = propose(*a, ctx_a, 6), rb = propose(*b, ctx_b, 6);
    EXPECT_EQ(ra, rb) << "round " << round;
    run(*a, ctx_a, ra);
    run(*b, ctx_b, rb);
  }
}

TEST_P(EverySearcher, RestoredStateProposesWhatTheOriginalWould) {
  auto space = grid();
  GridSearchContext ctx(*space);
  auto original = registry().make_searcher(GetParam(), R"({"explore": 0.2})", *space, 5);
  for (int round = 0; round < 3; ++round) run(*original, ctx, propose(*original, ctx, 8));
  ASSERT_TRUE(original->can_save());
  const std::string state = original->save();

  // Restored into a searcher made with another seed and other options: the state wins.
  auto restored = registry().make_searcher(GetParam(), "{}", *space, 777);
  restored->load(state);
  GridSearchContext twin(*space);
  twin.copy_seen_from(ctx);
  for (int round = 0; round < 2; ++round) {
    const Rows expected = propose(*original, ctx, 8);
    const Rows got = propose(*restored, twin, 8);
    EXPECT_EQ(got, expected) << "round " << round;
    run(*original, ctx, expected);
    run(*restored, twin, got);
  }
  EXPECT_EQ(restored->save(), original->save());
}

TEST_P(EverySearcher, RejectsAGarbageState) {
  auto space = grid();
  auto s = registry().make_searcher(GetParam(), "{}", *space, 1);
  for (const std::string bad : {"not json at all", "{}", "[1,2,3]", R"({"searcher": "nope", "version": 1})"}) {
    try {
      s->load(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const PluginError& e) {
      EXPECT_EQ(e.code(), COTUNE_ERR_INVALID_ARGUMENT) << e.what();
      EXPECT_NE(std::string(e.what()).find("saved state"), std::string::npos) << e.what();
    }
  }
  // A state with its RNG cut short.
  std::string state = s->save();
  const auto rng = state.find("\"rng\":\"");
  ASSERT_NE(rng, std::string::npos);
  state.replace(rng + 7, state.find('"', rng + 7) - (rng + 7), "1 2 3");
  EXPECT_THROW(s->load(state), PluginError);
  // After refusals the searcher still works.
  GridSearchContext ctx(*space);
  EXPECT_EQ(propose(*s, ctx, 4).size(), 4u);
}

TEST_P(EverySearcher, NamesAnUnknownOption) {
  auto space = grid();
  try {
    registry().make_searcher(GetParam(), R"({"explore": 0.1, "colour": "blue"})", *space, 1);
    FAIL() << "an unknown option was accepted";
  } catch (const PluginError& e) {
    EXPECT_NE(std::string(e.what()).find("'colour'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(registry().make_searcher(GetParam(), R"({"explore": 2})", *space, 1), PluginError);
  EXPECT_THROW(registry().make_searcher(GetParam(), "{not json", *space, 1), PluginError);
}

INSTANTIATE_TEST_SUITE_P(Searchers, EverySearcher,
                         ::testing::Values("random", "exhaustive", "evolution", "reinforce"));

// ------------------------------------------------------------------------------------------------
// Spaces with FLOAT parameters (all but exhaustive)
// ------------------------------------------------------------------------------------------------

class FloatSearcher : public ::testing::TestWithParam<const char*> {};

TEST_P(FloatSearcher, HandlesFloatParameters) {
  auto space = grid(R"({"float": true})");
  GridSearchContext ctx(*space);
  auto s = registry().make_searcher(GetParam(), "{}", *space, 11);
  for (int round = 0; round < 4; ++round) {
    const Rows rows = propose(*s, ctx, 8);
    ASSERT_EQ(rows.size(), 8u);
    for (const auto& r : rows) {
      EXPECT_TRUE(space->valid(r.data())) << space->key(r.data());
      EXPECT_FALSE(ctx.is_seen(r.data()));
    }
    run(*s, ctx, rows);
  }
}

INSTANTIATE_TEST_SUITE_P(Searchers, FloatSearcher, ::testing::Values("random", "evolution", "reinforce"));

// ------------------------------------------------------------------------------------------------
// Search quality
// ------------------------------------------------------------------------------------------------

struct Quality {
  int hits = 0;       // runs that found the optimum
  double mean_best = 0;
};

// Runs `name` over 8 seeds with a budget of 48 trials in batches of 8 (0.6% of the valid space).
Quality quality(const Space& space, const char* name, double noise) {
  Quality q;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    GridSearchContext ctx(space, noise);
    auto s = registry().make_searcher(name, "{}", space, seed);
    const double best = best_within(*s, ctx, 48, 8);
    q.mean_best += best / 8;
    if (best >= kOptimum - 1e-9) ++q.hits;
  }
  std::printf("%-10s predictor noise %.1f: optimum found in %d/8 runs, mean best %.3f (optimum %.1f)\n", name, noise,
              q.hits, q.mean_best, kOptimum);
  return q;
}

// With an exact predictor the guided searchers find the optimum almost every time; random search,
// with 48 of ~8000 valid configurations, almost never.
TEST(SearchQuality, EvolutionAndReinforceBeatRandomWithAnExactPredictor) {
  auto space = grid();
  const Quality random = quality(*space, "random", 0);
  const Quality evolution = quality(*space, "evolution", 0);
  const Quality reinforce = quality(*space, "reinforce", 0);
  EXPECT_GE(evolution.hits, 6);
  EXPECT_GE(reinforce.hits, 6);
  EXPECT_LE(random.hits, 2);
  EXPECT_GT(evolution.mean_best, random.mean_best);
  EXPECT_GT(reinforce.mean_best, random.mean_best);
}

// The hill climbing (cotune/local_search.hpp) takes the guided searchers from the good region to
// its best configuration: with an exact predictor, the very first proposal is the optimum.
TEST(SearchQuality, EvolutionAndReinforceProposeTheOptimumFirstWithAnExactPredictor) {
  auto space = grid();
  for (const char* name : {"evolution", "reinforce"})
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      GridSearchContext ctx(*space);
      auto s = registry().make_searcher(name, R"({"explore": 0})", *space, seed);
      const Rows first = propose(*s, ctx, 1);
      ASSERT_EQ(first.size(), 1u);
      EXPECT_DOUBLE_EQ(ctx.objective(first[0].data()), kOptimum) << name << ", seed " << seed;
    }
}

// With a predictor whose error is as large as the differences near the optimum (sd 0.5) and that
// never learns (it is not refitted here), the guided searchers cannot tell the optimum from its
// neighbours, but they still end far closer to it than random search.
TEST(SearchQuality, EvolutionAndReinforceBeatRandomWithANoisyPredictor) {
  auto space = grid();
  const Quality random = quality(*space, "random", 0.5);
  const Quality evolution = quality(*space, "evolution", 0.5);
  const Quality reinforce = quality(*space, "reinforce", 0.5);
  EXPECT_GT(evolution.mean_best, random.mean_best + 0.3);
  EXPECT_GT(reinforce.mean_best, random.mean_best + 0.3);
}

// ------------------------------------------------------------------------------------------------
// Exhaustive
// ------------------------------------------------------------------------------------------------

TEST(Exhaustive, ProposesTheExactBestUnmeasuredConfigurations) {
  auto space = grid();
  GridSearchContext ctx(*space);
  const auto all = enumerate_grid(*space, ctx);
  ASSERT_DOUBLE_EQ(all.front().first, kOptimum);
  auto s = registry().make_searcher("exhaustive", R"({"explore": 0})", *space, 1);

  const Rows first = propose(*s, ctx, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0], all.front().second);
  run(*s, ctx, first);

  // Then the next best, in order of objective (ties may come in either order).
  const Rows next = propose(*s, ctx, 5);
  ASSERT_EQ(next.size(), 5u);
  for (size_t i = 0; i < next.size(); ++i) EXPECT_DOUBLE_EQ(ctx.objective(next[i].data()), all[i + 1].first) << i;
  EXPECT_EQ(ctx.sample_calls(), 0u) << "no exploration was asked for";
}

TEST(Exhaustive, KeepsItsRankingWhileTheScoreVersionStaysTheSame) {
  auto space = grid();
  const size_t valid = [&] {
    GridSearchContext probe(*space);
    return enumerate_grid(*space, probe).size();
  }();
  // Three proposals of two configurations each, every one measured before the next.
  auto three_proposals = [&](GridSearchContext& ctx) {
    auto searcher = registry().make_searcher("exhaustive", R"({"explore": 0})", *space, 1);
    Rows all;
    for (int i = 0; i < 3; ++i) {
      const Rows rows = propose(*searcher, ctx, 2);
      all.insert(all.end(), rows.begin(), rows.end());
      run(*searcher, ctx, rows);
    }
    return std::make_pair(std::move(searcher), all);
  };
  // Version 0 (the host cannot say): every proposal scores every valid configuration.
  GridSearchContext unknown(*space);
  const Rows by_unknown = three_proposals(unknown).second;
  EXPECT_EQ(unknown.scored(), 3 * valid);

  // A known version: scored once, then not again until the version changes; same proposals.
  GridSearchContext known(*space);
  known.set_score_version(7);
  auto [b, by_known] = three_proposals(known);
  EXPECT_EQ(known.scored(), valid);
  EXPECT_EQ(by_known, by_unknown);
  known.set_score_version(8);
  propose(*b, known, 1);
  EXPECT_EQ(known.scored(), 2 * valid);
}

TEST(Exhaustive, ExploresWhenAsked) {
  auto space = grid();
  GridSearchContext ctx(*space);
  const auto all = enumerate_grid(*space, ctx);
  auto s = registry().make_searcher("exhaustive", R"({"explore": 0.5})", *space, 1);
  const Rows rows = propose(*s, ctx, 8);
  ASSERT_EQ(rows.size(), 8u);
  for (size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(ctx.objective(rows[i].data()), all[i].first) << i;
  for (size_t i = 4; i < 8; ++i) EXPECT_TRUE(ctx.was_sampled(rows[i].data())) << i;
}

TEST(Exhaustive, DrawsAtRandomWhileEveryScoreIsTheSame) {
  // Before any measurement without a prior, the enumeration order would propose the first corner
  // of the space; the searcher samples instead, and ranks as soon as the scores say something.
  auto space = grid();
  GridSearchContext ctx(*space);
  const auto all = enumerate_grid(*space, ctx);
  ctx.set_flat(true);
  auto s = registry().make_searcher("exhaustive", R"({"explore": 0})", *space, 1);
  const Rows first = propose(*s, ctx, 4);
  ASSERT_EQ(first.size(), 4u);
  for (const auto& row : first) EXPECT_TRUE(ctx.was_sampled(row.data())) << space->key(row.data());
  run(*s, ctx, first);

  ctx.set_flat(false);
  const size_t samples = ctx.sample_calls();
  const Rows ranked = propose(*s, ctx, 1);
  ASSERT_EQ(ranked.size(), 1u);
  const bool optimum_measured = ctx.is_seen(all.front().second.data());
  EXPECT_DOUBLE_EQ(ctx.objective(ranked[0].data()), all[optimum_measured ? 1 : 0].first);
  EXPECT_EQ(ctx.sample_calls(), samples) << "no exploration was asked for";
}

TEST(Exhaustive, EnumeratesTheWholeSpaceThenStops) {
  auto space = grid();
  GridSearchContext ctx(*space);
  const auto all = enumerate_grid(*space, ctx);
  auto s = registry().make_searcher("exhaustive", R"({"explore": 0})", *space, 1);
  std::set<std::string> proposed;
  for (Rows rows; !(rows = propose(*s, ctx, 1000)).empty();) {
    for (const auto& r : rows) EXPECT_TRUE(proposed.insert(space->key(r.data())).second);
    run(*s, ctx, rows);
  }
  EXPECT_EQ(proposed.size(), all.size());
}

TEST(Exhaustive, RefusesTooLargeSpacesAndFloatParameters) {
  auto expect_refusal = [](const Space& space, const std::string& options, std::vector<std::string> words) {
    try {
      registry().make_searcher("exhaustive", options, space, 1);
      ADD_FAILURE() << "accepted " << options;
    } catch (const PluginError& e) {
      for (const auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  };
  // 6 * 21 * 4 * 2 * 12 = 12096 configurations; with pad, 100 times more.
  expect_refusal(*grid(R"({"extra": 100})"), "{}", {"1209600", "max_space=200000"});
  expect_refusal(*grid(), R"({"max_space": 1000})", {"12096", "max_space=1000"});
  expect_refusal(*grid(R"({"float": true})"), "{}", {"'lr'", "FLOAT"});
  EXPECT_NO_THROW(registry().make_searcher("exhaustive", R"({"max_space": 12096})", *grid(), 1));
}

}  // namespace
}  // namespace cotune
