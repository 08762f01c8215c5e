// `cotune predictor eval [--space SPACE] --data RUNS.csv --target METRIC [--minimize] --predictor krr|mlp
// [--prior analytic|roofline|none] [--calibration CAL.json] [--train-frac 0.2] [--repeats 10] [--seed 1]
// [--group-by "a,b"] [--json] [--learning-curve]`: how well a predictor ranks held-out measured runs (predictor_eval.hpp).
#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/history/table_runs.hpp>
#include <cotune/core/history/predictor_eval.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/studyfile/study_file.hpp>
#include <cotune/support/likely_meant.hpp>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.hpp"

namespace cotune::cli {
namespace {
namespace po = boost::program_options;
using namespace cotune::core;
using nlohmann::json;

const std::vector<double> kCurveFractions = {0.05, 0.1, 0.2, 0.4, 0.6, 0.8};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    const size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
  }
  return out;
}

json figure_json(const EvalFigure& f) {
  json j = {{"mean", nullptr}, {"std", nullptr}, {"repeats", f.count}};
  if (f.count > 0) j["mean"] = f.mean, j["std"] = f.std;
  return j;
}

json result_json(const EvalResult& r, bool grouped) {
  json j = {{"rows", r.rows}, {"train_rows", r.train_rows}, {"test_rows", r.test_rows}, {"repeats", r.repeats},
            {"kendall_tau", figure_json(r.kendall_tau)}, {"spearman_rho", figure_json(r.spearman_rho)},
            {"mape_percent", figure_json(r.mape)}, {"r_squared", figure_json(r.r_squared)}};
  if (grouped) {
    j["groups"] = r.groups;
    j["group_kendall_tau"] = figure_json(r.group_tau);
    j["group_top1"] = figure_json(r.group_top1);
    j["group_top3"] = figure_json(r.group_top3);
  }
  return j;
}

std::string cell(const EvalFigure& f) {
  if (f.count == 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f +- %.3f", f.mean, f.std);
  return buf;
}

void print_text(std::ostream& out, const EvalResult& r, bool grouped) {
  out << "  rows " << r.rows << ": " << r.train_rows << " train / " << r.test_rows << " test, " << r.repeats
      << " repeats\n";
  out << "  kendall_tau    " << cell(r.kendall_tau) << "\n";
  out << "  spearman_rho   " << cell(r.spearman_rho) << "\n";
  out << "  mape_percent   " << cell(r.mape) << "\n";
  out << "  r_squared      " << cell(r.r_squared) << "\n";
  if (grouped) {
    out << "  groups         " << r.groups << " (with >= 2 held-out rows)\n";
    out << "  group_tau      " << cell(r.group_tau) << "\n";
    out << "  group_top1     " << cell(r.group_top1) << "\n";
    out << "  group_top3     " << cell(r.group_top3) << "\n";
  }
}

int eval(int argc, char** argv) {
  po::options_description opts("cotune predictor eval [--space SPACE] --data RUNS.csv --target METRIC [options]");
  std::string space = kDefaultSpace, data, target, predictor, prior = "analytic", group_by, predictor_options = "{}",
              calibration_path;
  std::vector<std::string> maps;
  double train_frac = 0.2;
  int repeats = 10;
  long long seed = 1;
  opts.add_options()("help,h", "show this help")("space", po::value(&space), (std::string("the space of the runs, one with a table schema (default ") + kDefaultSpace + ")").c_str())(
      "data", po::value(&data), "CSV of measured runs (the space's table schema, as cotune simulate --batch reads)")(
      "target", po::value(&target), "metric column to predict, e.g. step_time_s")(
      "minimize", "lower target values are better (default: higher)")(
      "predictor", po::value(&predictor), "predictor plugin: krr or mlp")(
      "predictor-options", po::value(&predictor_options), "the plugin's options as JSON (default {})")(
      "prior", po::value(&prior), "analytic (default), roofline or none")(
      "calibration", po::value(&calibration_path), "a calibration file (cotune calibrate) for the analytic prior")(
      "train-frac", po::value(&train_frac), "fraction of the rows to train on (default 0.2)")(
      "repeats", po::value(&repeats), "random splits (default 10)")("seed", po::value(&seed), "seed (default 1)")(
      "group-by", po::value(&group_by), "comma-separated columns; rows with equal values form a group")(
      "map", po::value(&maps)->composing(), "\"source column=canonical name\" (repeatable)")(
      "json", "print JSON")("learning-curve", "evaluate at training fractions 5% to 80%");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(e.what());
  }
  if (vm.count("help")) {
    std::cout << opts
              << "\nSplits the rows at random (repeatedly), fits the predictor on one part and prints Kendall's tau,\n"
                 "Spearman's rho, MAPE and R^2 on the rest; with --group-by also the mean tau within groups and\n"
                 "how often a group's predicted best is its true best (top1) or in its true top 3 (top3).\n";
    return 0;
  }
  if (data.empty()) throw UserError("--data: required (a CSV of measured runs)");
  if (target.empty()) throw UserError("--target: required (a metric column, e.g. step_time_s)");
  if (predictor.empty()) throw UserError("--predictor: required (krr or mlp)");
  if (prior != "analytic" && prior != "roofline" && prior != "none")
    throw UserError("--prior: expected analytic, roofline or none, got '" + prior + "'");
  if (repeats < 1) throw UserError("--repeats: expected at least 1, got " + std::to_string(repeats));
  if (!calibration_path.empty() && prior != "analytic")
    throw UserError("--calibration sets the analytic prior's constants; with --prior " + prior +
                    " it would change nothing (drop it, or --prior analytic)");
  if (seed < 0) throw UserError("--seed: expected a non-negative integer");
  std::vector<std::pair<std::string, std::string>> mapping;
  for (const std::string& m : maps) mapping.push_back(parse_column_mapping(m));
  const std::vector<std::string> groups = split_list(group_by);
  if (vm.count("group-by") && groups.empty()) throw UserError("--group-by: expected comma-separated column names");

  Registry registry;
  registry.load_default();
  const TableSchema schema = TableSchema::of(registry, space);
  const CsvTable table = read_csv_file(data);
  json calibration;
  if (!calibration_path.empty()) calibration = perf::read_calibration_file(calibration_path);
  const TableRuns runs = read_table_runs(table, mapping, registry, schema, calibration.is_null() ? nullptr : &calibration);
  for (const std::string& w : runs.warnings) std::cerr << "warning: " << w << "\n";
  for (const std::string& n : runs.notes) std::cerr << "note: " << n << "\n";
  if (!runs.rejected.empty())
    std::cerr << "note: " << runs.rejected.size() << " rows rejected (first: line " << runs.rejected.front().line
              << ": " << runs.rejected.front().reason << ")\n";
  if (!runs.runs.empty())
    for (const std::string& g : groups)
      if (!runs.runs.front().cells.count(g)) throw UserError("--group-by: " + data + " has no column '" + g + "'");

  std::vector<EvalSample> samples;
  size_t not_ok = 0, no_target = 0;
  for (const TableRun& r : runs.runs) {
    if (r.status != TrialStatus::kOk) {
      ++not_ok;
      continue;
    }
    if (!r.metrics.contains(target) || !(r.metrics[target].get<double>() > 0)) {
      ++no_target;
      continue;
    }
    EvalSample s;
    s.space = r.space.get();
    s.config = r.config;
    s.measured = r.metrics[target].get<double>();
    for (const std::string& g : groups) s.group += r.cells.at(g) + "\x1f";
    samples.push_back(std::move(s));
  }
  if (no_target > 0 && samples.empty()) {
    // A target that no row carries at all is most likely misspelt: name the metrics the rows have.
    std::vector<std::string> carried;
    for (const TableRun& r : runs.runs)
      for (auto it = r.metrics.begin(); it != r.metrics.end(); ++it)
        if (std::find(carried.begin(), carried.end(), it.key()) == carried.end()) carried.push_back(it.key());
    std::string list;
    for (const std::string& m : carried) list += (list.empty() ? "" : ", ") + m;
    throw UserError("--target '" + target + "': no ok row of " + data + " has a positive value in that column" +
                    support::did_you_mean(target, carried) + (list.empty() ? "" : "; the rows measure " + list));
  }
  if (not_ok + no_target > 0)
    std::cerr << "note: left out " << not_ok << " rows whose status is not ok and " << no_target
              << " without a positive " << target << "\n";

  EvalOptions o;
  o.predictor = predictor;
  o.predictor_options = predictor_options;
  o.prior = prior == "analytic" ? Prior::kAnalytic : prior == "roofline" ? Prior::kRoofline : Prior::kNone;
  o.target = target;
  o.minimize = vm.count("minimize") > 0;
  o.train_frac = train_frac;
  o.repeats = size_t(repeats);
  o.seed = std::uint64_t(seed);
  o.grouped = !groups.empty();
  const bool curve = vm.count("learning-curve") > 0;
  std::vector<double> fractions = curve ? kCurveFractions : std::vector<double>{train_frac};

  std::vector<std::pair<double, EvalResult>> results;
  for (double f : fractions) {
    o.train_frac = f;
    results.emplace_back(f, evaluate_predictor(registry, samples, o));
  }
  const EvalResult& first = results.front().second;
  if (vm.count("json")) {
    json j = {{"predictor", predictor}, {"prior", to_string(first.prior)}, {"target", target},
              {"direction", o.minimize ? "minimize" : "maximize"}, {"seed", seed}, {"data", data},
              {"rejected_rows", runs.rejected.size()}, {"dropped_rows", first.dropped},
              {"left_out_not_ok", not_ok}, {"left_out_without_target", no_target}};
    if (!calibration_path.empty()) j["calibration"] = calibration_path;
    if (!first.prior_note.empty()) j["prior_note"] = first.prior_note;
    if (!groups.empty()) j["group_by"] = groups;
    if (curve) {
      j["learning_curve"] = json::array();
      for (const auto& [f, r] : results) {
        json point = result_json(r, o.grouped);
        point["train_frac"] = f;
        j["learning_curve"].push_back(point);
      }
    } else {
      j.update(result_json(first, o.grouped));
      j["train_frac"] = train_frac;
    }
    j["schema_version"] = 1;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "predictor " << predictor << ", prior " << to_string(first.prior) << ", target " << target
            << " (" << (o.minimize ? "minimize" : "maximize") << "), seed " << seed
            << (calibration_path.empty() ? "" : ", calibration " + calibration_path) << "\n";
  if (!first.prior_note.empty()) std::cout << "  prior not used: " << first.prior_note << "\n";
  if (first.dropped > 0) std::cout << "  " << first.dropped << " rows left out: the prior could not estimate them\n";
  for (const auto& [f, r] : results) {
    if (curve) std::cout << "train fraction " << f << ":\n";
    print_text(std::cout, r, o.grouped);
  }
  return 0;
}

int run(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << "usage: cotune predictor eval [--space SPACE] --data RUNS.csv --target METRIC --predictor krr|mlp "
                 "[options]\n(cotune predictor eval --help for the options)\n";
    return argc < 2 ? 2 : 0;
  }
  const std::string sub = argv[1];
  if (sub != "eval") throw UserError("cotune predictor: unknown subcommand '" + sub + "' (expected eval)");
  std::string name = "cotune predictor eval";
  std::vector<char*> args = {name.data()};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  return eval(int(args.size()), args.data());
}

}  // namespace

COTUNE_COMMAND("predictor", "evaluate a predictor on measured runs (predictor eval)", run);

}  // namespace cotune::cli
