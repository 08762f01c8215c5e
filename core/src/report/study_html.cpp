// Assembles the study report from its sections, and the index of a store's studies.
#include <cotune/core/errors.hpp>
#include <cotune/core/io/output_file.hpp>
#include <cotune/core/report/html.hpp>
#include <cotune/core/report/study_html.hpp>
#include <cotune/core/report/study_json.hpp>
#include <cotune/core/run/study_report.hpp>
#include <cotune/core/store/store_location.hpp>

#include <boost/filesystem.hpp>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "report/report_context.hpp"

namespace cotune::core::report {
namespace {

// A section that fails (a plugin error, say) says so in its place; the rest of the report stands.
std::string guarded(std::string (*section)(const ReportContext&), const ReportContext& c) {
  try {
    return section(c);
  } catch (const std::exception& e) {
    return note_html(std::string("This section could not be produced: ") + e.what());
  }
}

std::string utc_now_text() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace

std::string study_report_html(Store& store, const std::string& name, const HtmlReportOptions& options) {
  std::optional<StudyRecord> study = store.find_study(name);
  if (!study) throw UserError("store " + store.path() + ": no study named '" + name + "' (cotune show lists them)");
  ReportContext c = load_report_context(store, *study, options);
  Page page("cotune study " + study->name);
  page.set_refresh(options.refresh_s);
  page.set_subtitle_html("Report written by cotune " + escape(COTUNE_VERSION) + " on " + escape(utc_now_text()) +
                         " from " + escape(store.path()) + ".");
  page.add_section("answer", "The answer", guarded(answer_html, c));
  page.add_section("study", "The study", guarded(study_facts_html, c));
  page.add_section("best", c.spec.pareto() ? "Pareto-optimal configurations" : "Best configurations",
                   guarded(best_configurations_html, c));
  page.add_section("convergence", "Convergence", guarded(convergence_html, c));
  page.add_section("prediction", "Predicted against measured", guarded(prediction_html, c));
  page.add_section("parameters", "Effect of each parameter", guarded(parameters_html, c));
  page.add_section("parallel", "Parallel coordinates", guarded(parallel_html, c));
  if (c.spec.pareto()) page.add_section("pareto", "Pareto front", guarded(pareto_html, c));
  page.add_section("breakdown", "Step-time breakdown of the best configuration", guarded(breakdown_html, c));
  page.add_section("failures", "Failed trials", guarded(failures_html, c));
  page.add_section("trials", "All trials", guarded(trials_table_html, c));
  return page.str();
}

void write_study_report(Store& store, const std::string& name, const std::string& path,
                        const HtmlReportOptions& options) {
  std::string html = study_report_html(store, name, options);
  if (writes_in_place(path)) {  // a device or a FIFO: written into, never replaced
    std::ofstream out(path, std::ios::binary);
    if (!out.write(html.data(), static_cast<std::streamsize>(html.size())) || !out.flush())
      throw UserError(path + ": cannot write the report (write failed)");
    return;
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw UserError(path + ": cannot write the report (cannot create " + tmp + ")");
    out.write(html.data(), static_cast<std::streamsize>(html.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw UserError(path + ": cannot write the report (write failed)");
    }
  }
  boost::system::error_code ec;
  boost::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw UserError(path + ": cannot write the report: " + ec.message());
  }
}

std::string default_report_path(const std::string& store_path, const std::string& name) {
  std::string file;
  for (char ch : name) file += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_' ? ch : '_';
  if (file.empty() || file[0] == '.') file = "study" + file;
  boost::filesystem::path dir = boost::filesystem::path(store_files_directory(store_path)) / "cotune-reports";
  boost::filesystem::create_directories(dir);
  return (dir / (file + ".html")).lexically_normal().string();
}

std::string write_run_report(const std::string& store_path, const std::string& name) {
  try {
    const std::string path = default_report_path(store_path, name);
    Store::Options o;
    o.create = false;
    Store store(store_path, o);
    write_study_report(store, name, path);
    return "report: " + path;
  } catch (const std::exception& e) {
    return std::string("report not written: ") + e.what();
  }
}

std::string studies_index_html(Store& store, const std::function<std::string(const std::string&)>& link,
                               int refresh_s, const std::function<std::string(const std::string&)>& compare_link) {
  Page page("cotune studies");
  page.set_refresh(refresh_s);
  page.set_subtitle_html("Store " + escape(store.path()) + ", as of " + escape(utc_now_text()) + ".");
  std::vector<StudySummary> studies = store.list_studies();
  std::string body;
  if (studies.empty()) {
    body = note_html("No studies in this store yet.");
  } else {
    body = "<table class=\"studies\"><thead><tr><th>study</th><th>status</th><th>trials</th><th>best</th></tr></thead>"
           "<tbody>";
    for (const StudySummary& s : studies) {
      std::string href = link(s.study.name);
      body += "<tr><td>" +
              (href.empty() ? escape(s.study.name)
                            : "<a href=\"" + escape(href) + "\">" + escape(s.study.name) + "</a>") +
              "</td><td>" + escape(study_status_text(store, s.study)) + "</td><td>" +
              escape(status_counts_text(s.trials_by_status, study_being_run(store, s.study))) +
              "</td><td class=\"num\">" +
              (s.best_objective ? escape(objective_metric(s.study) + " " + number_text(*s.best_objective)) : "-") +
              "</td></tr>";
    }
    body += "</tbody></table>";
    // Workloads that several studies tuned: a page comparing them.
    std::map<std::string, std::vector<std::string>> by_workload;
    for (const StudySummary& s : studies) by_workload[s.study.workload_key].push_back(s.study.name);
    std::string compare;
    for (const auto& [key, names] : by_workload) {
      const std::string href = compare_link ? compare_link(key) : "";
      if (names.size() < 2 || href.empty()) continue;
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      compare += "<li><a href=\"" + escape(href) + "\">compare</a> " + escape(list) + " (workload " +
                 escape(key.substr(0, 12)) + ")</li>";
    }
    if (!compare.empty()) body += "<h3>Workloads tuned by several studies</h3><ul class=\"compare\">" + compare + "</ul>";
  }
  page.add_section("studies", "Studies", body);
  return page.str();
}

}  // namespace cotune::core::report
