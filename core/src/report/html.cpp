#include <cotune/core/report/html.hpp>

#include <cmath>
#include <cstdio>

namespace cotune::core::report {

void append_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
}

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_escaped(out, text);
  return out;
}

std::string number_text(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  double a = std::abs(v);
  if (v != 0 && (a >= 1e6 || a < 1e-3)) std::snprintf(buf, sizeof buf, "%.3e", v);
  else std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

void Page::add_section(const std::string& id, const std::string& heading, std::string body_html) {
  sections_.push_back({id, heading, std::move(body_html)});
}

namespace {
// Readable on a laptop screen and on paper; no external fonts or scripts.
constexpr const char* kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0 auto;max-width:1100px;
padding:16px 24px;color:#222;line-height:1.4}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:1.6em}
.subtitle{color:#555}nav ul{columns:3;padding-left:1.2em}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:6px;white-space:pre-wrap;word-break:break-all;margin:2px 0;
font-size:.85em;user-select:all}
svg.chart{max-width:100%;height:auto;font-size:11px;font-family:inherit}svg .chart-title{font-weight:600;font-size:13px}
svg .chart-note{fill:#888}.charts{display:flex;flex-wrap:wrap;gap:12px}.note{color:#666;font-size:.9em}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 16px}dl.facts dt{font-weight:600}dl.facts dd{margin:0}
.status-ok{color:#2a7}.status-failed,.status-oom,.status-timeout{color:#c33}
@media print{body{max-width:none}nav{display:none}h2{break-after:avoid}svg,table,pre{break-inside:avoid}}
)";
}  // namespace

std::string Page::str() const {
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
  if (refresh_s_ > 0) s += "<meta http-equiv=\"refresh\" content=\"" + std::to_string(refresh_s_) + "\">";
  s += "<title>" + escape(title_) + "</title><style>" + kStyle + "</style></head><body>\n";
  s += "<h1>" + escape(title_) + "</h1>";
  if (!subtitle_html_.empty()) s += "<p class=\"subtitle\">" + subtitle_html_ + "</p>";
  if (sections_.size() > 1) {
    s += "<nav><ul>";
    for (const Section& sec : sections_) s += "<li><a href=\"#" + escape(sec.id) + "\">" + escape(sec.heading) + "</a></li>";
    s += "</ul></nav>";
  }
  for (const Section& sec : sections_)
    s += "\n<section id=\"" + escape(sec.id) + "\"><h2>" + escape(sec.heading) + "</h2>" + sec.body + "</section>";
  return s + "\n</body></html>\n";
}

}  // namespace cotune::core::report
