// HTML building blocks of the report: escaping and the page skeleton with its inline stylesheet.
#ifndef COTUNE_CORE_REPORT_HTML_HPP_
#define COTUNE_CORE_REPORT_HTML_HPP_

#include <string>
#include <string_view>
#include <vector>

namespace cotune::core::report {

// Escapes & < > " ' so that text is safe in element content and in quoted attributes.
std::string escape(std::string_view text);
void append_escaped(std::string& out, std::string_view text);

// Number formatting for tables: up to 4 significant digits, exponent for very large/small values.
std::string number_text(double v);

// A complete HTML document: <head> with the inline stylesheet, a title, a table of contents and the
// sections in the order added. `refresh_s` > 0 adds a meta refresh (the live view of a running study).
class Page {
 public:
  explicit Page(std::string title) : title_(std::move(title)) {}
  void set_refresh(int seconds) { refresh_s_ = seconds; }
  void set_subtitle_html(std::string html) { subtitle_html_ = std::move(html); }
  // `body_html` must already be escaped where it holds user text; `id` is a plain identifier.
  void add_section(const std::string& id, const std::string& heading, std::string body_html);
  std::string str() const;

 private:
  struct Section {
    std::string id, heading, body;
  };
  std::string title_, subtitle_html_;
  int refresh_s_ = 0;
  std::vector<Section> sections_;
};

}  // namespace cotune::core::report

#endif  // COTUNE_CORE_REPORT_HTML_HPP_
