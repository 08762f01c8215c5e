#include <cotune/core/model/cost_model.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/history/predictor_eval.hpp>
#include <cotune/core/history/ranking_metrics.hpp>
#include <cotune/core/model/surrogate.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <random>

namespace cotune::core {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The rows as the predictor sees them.
struct Design {
  size_t width = 0;
  std::vector<double> x;       // rows x width
  std::vector<double> offset;  // log(estimate) under the prior, else 0
  std::vector<double> terms;   // roofline terms, rows x perf::kRooflineTerms (roofline prior)
  std::vector<double> y;       // log(measured) - offset
  std::vector<double> measured;
  std::vector<std::string> group;
};

std::optional<double> estimate(const Space& space, const double* config, const std::string& metric) {
  try {
    const cotune_trace& trace = space.lower(config);
    cotune_sim_result r{};
    r.struct_size = sizeof r;
    perf::simulate(trace, &r);
    auto v = model_metric(r, trace, metric);
    if (v && std::isfinite(*v) && *v > 0) return v;
  } catch (const std::exception&) {
    // A configuration that does not lower has no estimate; the caller drops it.
  }
  return std::nullopt;
}

Design build_design(const std::vector<EvalSample>& samples, const EvalOptions& o, EvalResult& result) {
  result.prior = o.prior;
  if (o.prior != Prior::kNone) {
    for (const EvalSample& s : samples)
      if (!s.space->can_lower()) {
        result.prior = Prior::kNone;
        result.prior_note = "the space '" + s.space->info().name + "' does not lower configurations to step traces";
        break;
      }
    cotune_sim_result probe{};
    cotune_trace empty{};
    if (result.prior == Prior::kAnalytic && !model_metric(probe, empty, o.target)) {
      result.prior = Prior::kNone;
      result.prior_note = "the performance model does not estimate the metric '" + o.target + "'";
    }
  }
  Design d;
  const size_t features = samples.front().space->feature_names().size();
  for (const EvalSample& s : samples)
    if (s.space->feature_names().size() != features)
      throw UserError("the rows' spaces give different numbers of features (" + std::to_string(features) + " and " +
                      std::to_string(s.space->feature_names().size()) + ")");
  d.width = features + (result.prior != Prior::kNone ? 1 : 0);
  std::vector<double> f(features);
  for (const EvalSample& s : samples) {
    double offset = 0;  // the roofline prior's comes per repeat (set_roofline_offsets)
    if (result.prior == Prior::kAnalytic) {
      auto e = estimate(*s.space, s.config.data(), o.target);
      if (!e) {
        ++result.dropped;
        continue;
      }
      offset = std::log(*e);
    } else if (result.prior == Prior::kRoofline) {
      double terms[perf::kRooflineTerms];
      if (!roofline_terms_of(*s.space, s.config.data(), terms)) {
        ++result.dropped;
        continue;
      }
      d.terms.insert(d.terms.end(), terms, terms + perf::kRooflineTerms);
    }
    s.space->featurize(s.config.data(), 1, f.data());
    d.x.insert(d.x.end(), f.begin(), f.end());
    if (result.prior != Prior::kNone) d.x.push_back(offset);
    d.offset.push_back(offset);
    d.y.push_back(std::log(s.measured) - offset);
    d.measured.push_back(s.measured);
    d.group.push_back(s.group);
  }
  return d;
}

// The roofline prior of one repeat: rates fitted on the training rows (order[0, train)), the
// estimate of every row as its offset, its log as the last feature, targets the residual over it.
void set_roofline_offsets(Design& d, const std::vector<size_t>& order, size_t train) {
  const size_t k = perf::kRooflineTerms;
  std::vector<double> terms, values;
  for (size_t j = 0; j < train; ++j) {
    const size_t i = order[j];
    terms.insert(terms.end(), d.terms.begin() + i * k, d.terms.begin() + (i + 1) * k);
    values.push_back(d.measured[i]);
  }
  CostModel model(k);
  model.fit(terms.data(), train, values.data());
  for (size_t i = 0; i < d.measured.size(); ++i) {
    const double e = model.fitted() ? model.predict(d.terms.data() + i * k) : 0;
    d.offset[i] = e > 0 ? std::log(e) : 0;  // no rates (or no time for this row): the features alone
    d.x[(i + 1) * d.width - 1] = d.offset[i];
    d.y[i] = std::log(d.measured[i]) - d.offset[i];
  }
}

struct Accumulator {
  std::vector<double> values;
  void add(double v) {
    if (std::isfinite(v)) values.push_back(v);
  }
  EvalFigure figure() const {
    EvalFigure f;
    f.count = values.size();
    if (values.empty()) {
      f.mean = f.std = kNaN;
      return f;
    }
    double sum = 0;
    for (double v : values) sum += v;
    f.mean = sum / double(values.size());
    double ss = 0;
    for (double v : values) ss += (v - f.mean) * (v - f.mean);
    f.std = values.size() > 1 ? std::sqrt(ss / double(values.size() - 1)) : 0;
    return f;
  }
};

bool constant(const std::vector<double>& y) {
  for (double v : y)
    if (std::fabs(v - y.front()) > 1e-12 * std::max(1.0, std::fabs(y.front()))) return false;
  return true;
}

}  // namespace

EvalResult evaluate_predictor(const Registry& registry, const std::vector<EvalSample>& samples,
                              const EvalOptions& o) {
  if (samples.empty()) throw UserError("predictor eval: no rows to evaluate on");
  if (o.train_rows == 0 && !(o.train_frac > 0 && o.train_frac < 1))
    throw UserError("--train-frac: expected a fraction between 0 and 1 (exclusive), got " + std::to_string(o.train_frac));
  if (o.repeats == 0) throw UserError("--repeats: expected at least 1");
  for (const EvalSample& s : samples)
    if (!(std::isfinite(s.measured) && s.measured > 0))
      throw UserError("predictor eval: measured values must be positive and finite (got " + std::to_string(s.measured) +
                      ")");
  nlohmann::json plugin_options = nlohmann::json::parse(o.predictor_options.empty() ? "{}" : o.predictor_options,
                                                        nullptr, false);
  if (!plugin_options.is_object()) throw UserError("predictor options: expected a JSON object, got " + o.predictor_options);

  EvalResult result;
  Design d = build_design(samples, o, result);
  const size_t n = d.y.size();
  result.rows = n;
  result.repeats = o.repeats;
  const size_t train = o.train_rows > 0 ? o.train_rows : size_t(std::lround(o.train_frac * double(n)));
  if (train < 2 || train + 2 > n) {
    char frac[32];
    std::snprintf(frac, sizeof(frac), "%g", o.train_frac);
    throw UserError("predictor eval: " + std::to_string(n) + " usable rows cannot be split into " + std::to_string(train) +
                    " to train on (at least 2) and at least 2 to test on" +
                    (result.dropped ? " (" + std::to_string(result.dropped) + " rows had no model estimate)" : "") +
                    (o.train_rows > 0 ? std::string() : std::string("; --train-frac sets the share trained on (now ") +
                                                            frac + ")"));
  }
  result.train_rows = train;
  result.test_rows = n - train;

  std::mt19937_64 rng(o.seed);
  std::vector<size_t> order(n);
  Accumulator tau, rho, mape_acc, r2, gtau, gtop1, gtop3;
  double groups_total = 0;
  for (size_t rep = 0; rep < o.repeats; ++rep) {
    for (size_t i = 0; i < n; ++i) order[i] = i;
    for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[size_t(rng() % (i + 1))]);
    if (result.prior == Prior::kRoofline) set_roofline_offsets(d, order, train);

    std::vector<double> xt, yt;
    for (size_t k = 0; k < train; ++k) {
      const size_t i = order[k];
      xt.insert(xt.end(), d.x.begin() + i * d.width, d.x.begin() + (i + 1) * d.width);
      yt.push_back(d.y[i]);
    }
    std::vector<double> xs;
    for (size_t k = train; k < n; ++k) {
      const size_t i = order[k];
      xs.insert(xs.end(), d.x.begin() + i * d.width, d.x.begin() + (i + 1) * d.width);
    }
    const size_t m = n - train;
    std::vector<double> pred(m);
    if (constant(yt)) {
      std::fill(pred.begin(), pred.end(), yt.front());
    } else {
      nlohmann::json opts = plugin_options;
      opts["log"] = false;
      opts["seed"] = o.seed + rep;
      auto predictor = registry.make_predictor(o.predictor, opts.dump());
      predictor->fit(xt.data(), train, d.width, yt.data());
      predictor->predict(xs.data(), m, d.width, pred.data());
    }
    std::vector<double> predicted(m), measured(m);
    std::map<std::string, std::vector<size_t>> by_group;
    for (size_t k = 0; k < m; ++k) {
      const size_t i = order[train + k];
      predicted[k] = std::exp(d.offset[i] + pred[k]);
      measured[k] = d.measured[i];
      if (o.grouped) by_group[d.group[i]].push_back(k);
    }
    tau.add(kendall_tau(predicted, measured));
    rho.add(spearman_rho(predicted, measured));
    mape_acc.add(mape(predicted, measured));
    r2.add(r_squared(predicted, measured));
    if (!o.grouped) continue;
    Accumulator rt, r1, r3;
    for (const auto& [name, members] : by_group) {
      if (members.size() < 2) continue;
      std::vector<double> gp, gm;
      for (size_t k : members) gp.push_back(predicted[k]), gm.push_back(measured[k]);
      rt.add(kendall_tau(gp, gm));
      r1.add(predicted_best_in_top_k(gp, gm, 1, !o.minimize) ? 1.0 : 0.0);
      r3.add(predicted_best_in_top_k(gp, gm, 3, !o.minimize) ? 1.0 : 0.0);
    }
    groups_total += double(r1.values.size());
    gtau.add(rt.figure().mean);
    gtop1.add(r1.figure().mean);
    gtop3.add(r3.figure().mean);
  }
  result.kendall_tau = tau.figure();
  result.spearman_rho = rho.figure();
  result.mape = mape_acc.figure();
  result.r_squared = r2.figure();
  if (o.grouped) {
    result.groups = size_t(std::lround(groups_total / double(o.repeats)));
    result.group_tau = gtau.figure();
    result.group_top1 = gtop1.figure();
    result.group_top3 = gtop3.figure();
  }
  return result;
}

}  // namespace cotune::core
