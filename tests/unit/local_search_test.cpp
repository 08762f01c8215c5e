// The SDK's local search tools (cotune/local_search.hpp) over the real testgrid space plugin, whose
// objective is known: the values a parameter is searched over, and hill climbing under an exact
// predictor (the grid search context scores a configuration by its true objective).
#include <cotune/core/registry.hpp>
#include <cotune/local_search.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "fixtures/spaces/grid/grid_search_context.hpp"

namespace cotune {
namespace {

using core::Registry;
using core::Space;
using testing::GridSearchContext;

const Registry& registry() {
  static const Registry* reg = [] {
    auto* r = new Registry();
    EXPECT_TRUE(r->load_file(COTUNE_BINARY_DIR "/lib/cotune/test-plugins/libcotune-space-testgrid.so"));
    for (const auto& p : r->problems()) ADD_FAILURE() << p.file << ": " << p.reason;
    return r;
  }();
  return *reg;
}

std::vector<std::vector<double>> values_of(const Space& space) {
  std::vector<std::vector<double>> values;
  for (size_t j = 0; j < space.num_params(); ++j) values.push_back(candidate_values(*space.raw_params()[j], 16, 256));
  return values;
}

double objective(GridSearchContext& ctx, const std::vector<double>& x) { return ctx.objective(x.data()); }

TEST(CandidateValues, FollowsEachParameterKind) {
  auto space = registry().make_space("testgrid", "{}", "{}");
  const auto values = values_of(*space);
  ASSERT_EQ(values.size(), 5u);
  EXPECT_EQ(values[0], (std::vector<double>{1, 2, 4, 8, 16, 32}));  // an INT list as given
  EXPECT_EQ(values[1].size(), 21u);                                  // every integer of 0..20
  EXPECT_EQ(values[1].front(), 0);
  EXPECT_EQ(values[1].back(), 20);
  EXPECT_EQ(values[2], (std::vector<double>{0, 1, 2, 3}));  // the choice indices
  EXPECT_EQ(values[3], (std::vector<double>{0, 1}));        // a BOOL

  // A wide INT range is spread over int_bins values, ends included.
  const auto wide = candidate_values(*space->raw_params()[1], 16, 5);
  EXPECT_EQ(wide, (std::vector<double>{0, 5, 10, 15, 20}));
}

TEST(CandidateValues, RefusesAMalformedParameterWithItsName) {
  cotune_param p{};
  p.name = {"lr", 2};
  p.type = COTUNE_PARAM_FLOAT;
  p.low = 1;
  p.high = 1;
  try {
    candidate_values(p, 16, 256);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'lr'"), std::string::npos) << e.what();
  }
}

// From random valid starts: the climb never gets worse, visits only valid configurations (each with
// its true score), and ends where no one- or two-parameter change is better.
TEST(HillClimber, ClimbsToALocalOptimumThroughValidConfigurations) {
  auto space = registry().make_space("testgrid", "{}", "{}");
  GridSearchContext ctx(*space);
  const SearchContext context(&ctx.raw());
  const auto values = values_of(*space);
  const HillClimber climber(context, values, 1000000);  // every two-parameter change
  std::mt19937_64 rng(3);
  const size_t d = space->num_params();
  std::vector<double> starts(20 * d);
  ASSERT_EQ(space->sample(11, 20, starts.data()), 20u);
  for (size_t s = 0; s < 20; ++s) {
    const std::vector<double> start(starts.begin() + s * d, starts.begin() + (s + 1) * d);
    std::vector<ScoredConfig> visited;
    const ScoredConfig end = climber.climb({start, objective(ctx, start)}, 100, rng, &visited);
    EXPECT_GE(end.score, objective(ctx, start));
    EXPECT_DOUBLE_EQ(end.score, objective(ctx, end.config));
    ASSERT_FALSE(visited.empty());
    for (const auto& v : visited) {
      ASSERT_TRUE(space->valid(v.config.data()));
      ASSERT_DOUBLE_EQ(v.score, objective(ctx, v.config));
    }
    // No valid neighbour of the end point is better.
    for (size_t j = 0; j < d; ++j)
      for (size_t k = j; k < d; ++k)
        for (double a : values[j])
          for (double b : values[k]) {
            std::vector<double> x = end.config;
            x[j] = a;
            x[k] = b;
            if (space->valid(x.data())) {
              ASSERT_LE(objective(ctx, x), end.score + 1e-12);
            }
          }
  }
}

// Climbing from a configuration near the grid's unique optimum (a=8 b=13 c=blue d=1 e=7,
// objective 10) reaches it.
TEST(HillClimber, ReachesTheOptimumFromNearby) {
  auto space = registry().make_space("testgrid", "{}", "{}");
  GridSearchContext ctx(*space);
  const SearchContext context(&ctx.raw());
  const HillClimber climber(context, values_of(*space), 1000000);
  std::mt19937_64 rng(5);
  std::vector<ScoredConfig> visited;
  const std::vector<double> start = {4, 12, 2, 1, 6};
  ASSERT_TRUE(space->valid(start.data()));
  const ScoredConfig end = climber.climb({start, objective(ctx, start)}, 100, rng, &visited);
  EXPECT_DOUBLE_EQ(end.score, 10.0);
}

// A neighbourhood larger than max_pair_moves is sampled: each step tries at most that many
// two-parameter changes (plus the one-parameter ones).
TEST(HillClimber, TriesAtMostMaxPairMovesPerStep) {
  auto space = registry().make_space("testgrid", "{}", "{}");
  GridSearchContext ctx(*space);
  const SearchContext context(&ctx.raw());
  const auto values = values_of(*space);
  size_t singles = 0;
  for (const auto& v : values) singles += v.size() - 1;
  const HillClimber climber(context, values, 10);
  std::mt19937_64 rng(1);
  std::vector<ScoredConfig> visited;
  const std::vector<double> start = {1, 0, 0, 0, 1};
  ASSERT_TRUE(space->valid(start.data()));
  climber.climb({start, objective(ctx, start)}, 1, rng, &visited);
  EXPECT_LE(visited.size(), singles + 10);
}

}  // namespace
}  // namespace cotune
