#include <cotune/support/likely_meant.hpp>

#include <algorithm>
#include <cctype>
#include <limits>

namespace cotune::support {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

namespace {

// The word in lower case with '-' read as '_': case and dash are how headers and keys most often
// differ from the names they mean ("TP_COMM_OVERLAP", "micro-batch").
std::string folded(std::string_view w) {
  std::string out(w);
  for (char& c : out) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Its '_'-separated parts, sorted: the same words in another order ("overlap_tp_comm").
std::vector<std::string> sorted_parts(const std::string& w) {
  std::vector<std::string> parts;
  for (size_t start = 0, end; start <= w.size(); start = end + 1) {
    end = std::min(w.find('_', start), w.size());
    if (end > start) parts.push_back(w.substr(start, end - start));
  }
  std::sort(parts.begin(), parts.end());
  return parts;
}

}  // namespace

std::string likely_meant(std::string_view raw, const std::vector<std::string>& names) {
  const std::string word = folded(raw);
  std::string closest;
  size_t best = std::numeric_limits<size_t>::max();
  for (const std::string& n : names) {
    const size_t d = edit_distance(word, folded(n));
    if (d < best) best = d, closest = n;
  }
  // Two edits make a short word into another one ("qps" into "gpus"): one is the limit there.
  if (best <= (word.size() >= 5 ? 2u : 1u)) return closest;
  // One name spelled out further ("tokens_per_second" for "tokens_per_s").
  for (const std::string& n : names) {
    const std::string f = folded(n);
    const std::string_view shorter = f.size() < word.size() ? std::string_view(f) : std::string_view(word);
    const std::string_view longer = f.size() < word.size() ? std::string_view(word) : std::string_view(f);
    if (shorter.size() >= 5 && longer.substr(0, shorter.size()) == shorter) return n;
  }
  // The same words in another order.
  const std::vector<std::string> parts = sorted_parts(word);
  for (const std::string& n : names)
    if (parts.size() >= 2 && sorted_parts(folded(n)) == parts) return n;
  return "";
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& names) {
  const std::string meant = likely_meant(word, names);
  return meant.empty() ? "" : " (did you mean \"" + meant + "\"?)";
}

std::string did_you_mean_listed(std::string_view word, std::string_view comma_separated_names) {
  std::vector<std::string> names;
  for (size_t start = 0; start < comma_separated_names.size();) {
    size_t end = comma_separated_names.find(',', start);
    if (end == std::string_view::npos) end = comma_separated_names.size();
    std::string_view name = comma_separated_names.substr(start, end - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (!name.empty()) names.emplace_back(name);
    start = end + 1;
  }
  return did_you_mean(word, names);
}

}  // namespace cotune::support
