// Export checker (see framework_check.hpp). Sections: text and CSV helpers, the reference data,
// bash and Python-literal and TOML parsing, then one checker per framework: format, names and
// types, the frameworks' cross-field rules, and agreement with the configuration.
#include "support/framework_check.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace cotune::testing {

using nlohmann::json;

namespace {

// ---- Text helpers ---------------------------------------------------------------------------------

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines = split(text, '\n');
  for (std::string& l : lines)
    if (!l.empty() && l.back() == '\r') l.pop_back();
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

// A whole decimal integer, optionally signed.
std::optional<int64_t> parse_int(const std::string& s) {
  static const std::regex re("[+-]?[0-9]+");
  if (!std::regex_match(s, re)) return std::nullopt;
  try {
    return std::stoll(s);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// A whole decimal number (no inf/nan, no hex).
std::optional<double> parse_float(const std::string& s) {
  static const std::regex re("[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?");
  if (!std::regex_match(s, re)) return std::nullopt;
  return std::strtod(s.c_str(), nullptr);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// RFC 4180 rows (quoted fields may hold commas, doubled quotes and newlines).
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(field);
      field.clear();
    } else if (c == '\n') {
      rows.back().push_back(field);
      field.clear();
      rows.emplace_back();
    } else if (c != '\r') {
      field += c;
    }
  }
  if (!field.empty() || !rows.back().empty()) rows.back().push_back(field);
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

// The rows of a CSV file as header -> value maps.
std::vector<std::map<std::string, std::string>> csv_records(const std::string& path) {
  const auto rows = parse_csv(read_file(path));
  std::vector<std::map<std::string, std::string>> out;
  if (rows.empty()) return out;
  for (size_t r = 1; r < rows.size(); ++r) {
    std::map<std::string, std::string> rec;
    for (size_t c = 0; c < rows[0].size(); ++c) rec[rows[0][c]] = c < rows[r].size() ? rows[r][c] : "";
    out.push_back(std::move(rec));
  }
  return out;
}

CheckResult fail(const std::string& rule, const std::string& message) { return CheckResult::fail(rule, message); }

// Runs checks in order and returns the first failure.
CheckResult first_failure(const std::vector<std::function<CheckResult()>>& checks) {
  for (const auto& check : checks) {
    CheckResult r = check();
    if (!r.ok) return r;
  }
  return CheckResult::pass();
}

std::string str(int64_t v) { return std::to_string(v); }

// ---- Configuration access -------------------------------------------------------------------------

std::optional<int64_t> cfg_int(const json& c, const std::string& key) {
  if (!c.is_object() || !c.contains(key)) return std::nullopt;
  const json& v = c[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number() && v.get<double>() == std::floor(v.get<double>())) return static_cast<int64_t>(v.get<double>());
  return std::nullopt;
}

std::optional<std::string> cfg_str(const json& c, const std::string& key) {
  if (!c.is_object() || !c.contains(key) || !c[key].is_string()) return std::nullopt;
  return c[key].get<std::string>();
}

std::optional<bool> cfg_bool(const json& c, const std::string& key) {
  if (!c.is_object() || !c.contains(key) || !c[key].is_boolean()) return std::nullopt;
  return c[key].get<bool>();
}

// "a == b" failures of the export against the configuration.
CheckResult agree(const std::string& what, int64_t exported, std::optional<int64_t> expected) {
  if (!expected || exported == *expected) return CheckResult::pass();
  return fail("consistency", what + " is " + str(exported) + " in the export but " + str(*expected) +
                                 " in the configuration");
}

// The world size of a header comment ("... for 64 GPUs ..."); 0 when there is none.
int64_t world_of(const std::vector<std::string>& comments) {
  static const std::regex re("for ([0-9]+) GPUs?");
  std::smatch m;
  for (const std::string& c : comments)
    if (std::regex_search(c, m, re)) return std::stoll(m[1].str());
  return 0;
}

// The header must name the version and its commit (first 8 hex digits).
CheckResult check_header(const std::vector<std::string>& comments, const std::string& framework,
                         const std::string& version, const std::string& commit) {
  if (comments.empty()) return fail("header", "no header comment naming " + framework + " " + version);
  const std::string& h = comments.front();
  if (h.find(version) == std::string::npos)
    return fail("header", "the header comment does not name version " + version + ": " + h);
  if (!commit.empty() && h.find(commit.substr(0, 8)) == std::string::npos)
    return fail("header", "the header comment does not name commit " + commit.substr(0, 8) + ": " + h);
  if (world_of(comments) <= 0) return fail("header", "no \"for N GPUs\" in the header comment: " + h);
  return CheckResult::pass();
}

}  // namespace

// ---- Reference data -------------------------------------------------------------------------------

const FrameworkData& FrameworkData::load(const std::string& frameworks_dir) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<FrameworkData>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[frameworks_dir];
  if (!slot) slot = std::make_unique<FrameworkData>(frameworks_dir);
  return *slot;
}

FrameworkData::FrameworkData(const std::string& dir) {
  load_megatron(dir);
  for (const char* v : {"v0.1.0", "v0.2.2", "HEAD"}) load_titan(dir, v);
  load_deepspeed(dir);
  load_nemo(dir);
}

void FrameworkData::load_megatron(const std::string& dir) {
  for (const auto& r : csv_records(dir + "/megatron_lm_arguments.csv")) {
    const std::string version = starts_with(r.at("source_ref"), "main") ? "main" : r.at("source_ref");
    MegatronFlag f;
    f.flag = r.at("flag");
    f.dest = r.at("dest");
    f.type = r.at("type");
    f.default_value = r.at("default");
    f.nargs = r.at("nargs");
    f.action = r.at("action");
    if (!r.at("choices").empty()) f.choices = split(r.at("choices"), '|');
    megatron_[version][f.flag] = f;
    if (version == "main" && (r.at("defined_at").find("(ModelParallelConfig)") != std::string::npos ||
                              r.at("defined_at").find("(TransformerConfig)") != std::string::npos))
      model_config_fields_[f.dest] = f.default_value;
    commits_["megatron@" + version] = r.at("source_commit");
  }
}

void FrameworkData::load_titan(const std::string& dir, const std::string& version) {
  static const std::regex variant_re("activation_checkpoint \\{variant (.+)\\}");
  for (const auto& r : csv_records(dir + "/torchtitan_config_" + version + ".csv")) {
    TitanField f;
    f.section = r.at("section");
    f.key = r.at("key");
    f.type = r.at("type");
    f.default_value = r.at("default");
    f.kind = r.at("kind");
    f.cli_override = r.at("cli_override") != "no";
    commits_["torchtitan@" + version] = r.at("source_commit");
    std::smatch m;
    if (std::regex_match(f.section, m, variant_re)) titan_variants_.insert(m[1].str());
    if (f.kind == "subsection") titan_tables_[version].insert(f.section == "(top)" ? f.key : f.section + "." + f.key);
    titan_[version][f.section + "|" + f.key] = f;
  }
  // The default variant's fields sit under plain "activation_checkpoint" (SelectiveAC.Config).
  if (version == "HEAD") titan_variants_.insert("selective");
}

void FrameworkData::load_deepspeed(const std::string& dir) {
  for (const auto& r : csv_records(dir + "/deepspeed_config_keys.csv")) {
    DeepSpeedKey k;
    k.key = r.at("key");
    k.type = r.at("type");
    k.allowed = r.at("allowed_values");
    k.head_only = starts_with(r.at("source_ref"), "main");
    commits_[std::string("deepspeed@") + (k.head_only ? "master" : r.at("source_ref"))] = r.at("source_commit");
    deepspeed_[k.key] = k;
  }
}

// Section 2 of nemo_recipe_fields.md: "| cfg.a.b / c | class | at | default | notes |" rows, where
// "x / c" is the sibling field c and "x_first_y / _last_" swaps the word between underscores.
void FrameworkData::load_nemo(const std::string& dir) {
  const std::string md = read_file(dir + "/nemo_recipe_fields.md");
  static const std::regex preset_re("^- `([a-z0-9_]+)` \\([0-9]+\\)");
  static const std::regex commit_re("HEAD of main: `([0-9a-f]{40})`");
  std::smatch m;
  if (std::regex_search(md, m, commit_re)) commits_["nemo@main"] = m[1].str();
  for (const std::string& line : lines_of(md)) {
    if (std::regex_search(line, m, preset_re)) nemo_presets_.insert(m[1].str());
    if (!starts_with(line, "| cfg.")) continue;
    const std::vector<std::string> cells = split(line, '|');
    if (cells.size() < 6) continue;
    const std::vector<std::string> names = split(cells[1], '/');
    const std::string first = trim(names[0]);
    const std::string default_value = trim(cells[4]);
    nemo_fields_[first] = default_value;
    for (size_t i = 1; i < names.size(); ++i) {
      const std::string other = trim(names[i]);
      std::string path;
      if (starts_with(other, "_") && ends_with(other, "_")) {
        const size_t at = first.find("_first_");
        if (at == std::string::npos) throw std::runtime_error("nemo_recipe_fields.md: cannot expand " + cells[1]);
        path = first.substr(0, at) + other + first.substr(at + 7);
      } else {
        path = first.substr(0, first.rfind('.') + 1) + other;
      }
      nemo_fields_[path] = default_value;
    }
  }
  // docs/exports.md: the dataset's sequence length is written as well.
  nemo_fields_["cfg.dataset.seq_length"] = "4096";
  // The model provider inherits every field of Megatron-Core's TransformerConfig and of its base
  // ModelParallelConfig (section 2's first row); load_megatron kept them from
  // megatron_lm_arguments.csv, which says where each is defined.
  for (const auto& [dest, default_value] : model_config_fields_)
    nemo_fields_.emplace("cfg.model." + dest, default_value);  // section 2's own rows stay
  if (nemo_fields_.empty() || nemo_presets_.empty()) throw std::runtime_error("nemo_recipe_fields.md: no fields");
}

const FrameworkData::MegatronFlag* FrameworkData::megatron_flag(const std::string& version,
                                                                const std::string& flag) const {
  auto v = megatron_.find(version);
  if (v == megatron_.end()) return nullptr;
  auto f = v->second.find(flag);
  return f == v->second.end() ? nullptr : &f->second;
}

std::string FrameworkData::commit(const std::string& framework, const std::string& version) const {
  auto it = commits_.find(framework + "@" + version);
  return it == commits_.end() ? "" : it->second;
}

const FrameworkData::TitanField* FrameworkData::titan_field(const std::string& version, const std::string& section,
                                                            const std::string& key) const {
  auto v = titan_.find(version);
  if (v == titan_.end()) return nullptr;
  auto f = v->second.find(section + "|" + key);
  return f == v->second.end() ? nullptr : &f->second;
}

bool FrameworkData::titan_table(const std::string& version, const std::string& section) const {
  auto v = titan_tables_.find(version);
  return v != titan_tables_.end() && v->second.count(section) > 0;
}

const FrameworkData::DeepSpeedKey* FrameworkData::deepspeed_key(const std::string& key) const {
  auto it = deepspeed_.find(key);
  return it == deepspeed_.end() ? nullptr : &it->second;
}

bool FrameworkData::deepspeed_section(const std::string& prefix) const {
  auto it = deepspeed_.lower_bound(prefix + ".");
  return it != deepspeed_.end() && starts_with(it->first, prefix + ".");
}

// ---- Bash fragments -------------------------------------------------------------------------------

namespace {

// Splits one line of a bash array into words: single quotes make one literal word; unquoted
// characters that bash would expand or treat as syntax (globs, parentheses, pipes, ...) are refused,
// since the word would not reach the program as written.
bool bash_words(const std::string& line, std::vector<std::string>* words, std::string* error) {
  static const std::string kSpecial = "\"\\$`()|&;<>*?[]{}!";
  words->clear();
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t') {
      if (in_word) words->push_back(word);
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      const size_t end = line.find('\'', i + 1);
      if (end == std::string::npos) return *error = "unterminated quote in: " + line, false;
      word += line.substr(i + 1, end - i - 1);
      in_word = true;
      i = end;
    } else if (kSpecial.find(c) != std::string::npos || (!in_word && (c == '#' || c == '~'))) {
      return *error = std::string("unquoted '") + c + "' (bash would interpret it) in: " + line, false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words->push_back(word);
  return true;
}

// The parts of a bash export: comments, "export NAME=VALUE" lines and one NAME=( ... ) array whose
// lines are words. Blank lines are allowed.
struct BashFragment {
  std::vector<std::string> comments;
  std::map<std::string, std::string> env;
  std::vector<std::vector<std::string>> lines;  // the array's lines, as words
};

bool parse_bash(const std::string& text, const std::string& array, BashFragment* out, std::string* error) {
  static const std::regex export_re("export ([A-Za-z_][A-Za-z0-9_]*)=(.*)");
  enum { kBefore, kInside, kAfter } state = kBefore;
  int n = 0;
  for (const std::string& raw : lines_of(text)) {
    ++n;
    const std::string line = trim(raw);
    const std::string at = "line " + std::to_string(n) + ": ";
    std::smatch m;
    if (line.empty()) continue;
    if (line[0] == '#') {
      out->comments.push_back(line);
    } else if (state == kInside && line == ")") {
      state = kAfter;
    } else if (state == kInside) {
      std::vector<std::string> words;
      if (!bash_words(line, &words, error)) return *error = at + *error, false;
      out->lines.push_back(words);
    } else if (line == array + "=(") {
      if (state != kBefore) return *error = at + "a second " + array + " array", false;
      state = kInside;
    } else if (std::regex_match(line, m, export_re)) {
      std::vector<std::string> words;
      if (!bash_words(m[2].str(), &words, error)) return *error = at + *error, false;
      if (words.size() > 1) return *error = at + "an export of several words: " + line, false;
      out->env[m[1].str()] = words.empty() ? "" : words[0];
    } else {
      return *error = at + "not a comment, an export or the " + array + " array: " + line, false;
    }
  }
  if (state == kBefore) return *error = "no " + array + "=( ... ) array", false;
  if (state == kInside) return *error = "the " + array + " array is not closed", false;
  return true;
}

}  // namespace

bool MegatronScript::has(const std::string& flag) const {
  for (const auto& a : args)
    if (a.first == flag) return true;
  return false;
}

std::optional<std::string> MegatronScript::value(const std::string& flag) const {
  for (const auto& a : args)
    if (a.first == flag && !a.second.empty()) return a.second.front();
  return std::nullopt;
}

bool parse_megatron_script(const std::string& text, MegatronScript* out, std::string* error) {
  BashFragment b;
  if (!parse_bash(text, "MEGATRON_ARGS", &b, error)) return false;
  *out = MegatronScript();
  out->comments = b.comments;
  out->env = b.env;
  for (const auto& words : b.lines) {
    if (words.empty() || !starts_with(words[0], "--"))
      return *error = "an array line does not start with a flag: " + join(words, " "), false;
    out->args.emplace_back(words[0], std::vector<std::string>(words.begin() + 1, words.end()));
  }
  out->world = world_of(out->comments);
  return true;
}

// ---- Megatron-LM expressions ----------------------------------------------------------------------

namespace {

// Recursive descent over Python's list arithmetic: expr := term ('+' term)*; term := atom ('*' atom)*;
// atom := int | '[' int (',' int)* ']' | '(' expr ')'. A value is an int or a list.
class ListExpr {
 public:
  explicit ListExpr(const std::string& s) {
    for (char c : s)
      if (c != ' ') s_ += c;
  }
  std::vector<int64_t> eval() {
    Value v = expr();
    if (pos_ != s_.size()) bad("unexpected '" + s_.substr(pos_) + "'");
    if (!v.is_list) bad("not a list");
    return v.list;
  }

 private:
  struct Value {
    bool is_list = false;
    int64_t n = 0;
    std::vector<int64_t> list;
  };
  [[noreturn]] void bad(const std::string& why) const { throw std::invalid_argument(s_ + ": " + why); }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  Value expr() {
    Value v = term();
    while (eat('+')) {
      Value r = term();
      if (v.is_list != r.is_list) bad("adds a list and an int");
      if (v.is_list) v.list.insert(v.list.end(), r.list.begin(), r.list.end());
      else v.n += r.n;
    }
    return v;
  }
  Value term() {
    Value v = atom();
    while (eat('*')) {
      Value r = atom();
      if (v.is_list && r.is_list) bad("multiplies two lists");
      if (!v.is_list && !r.is_list) {
        v.n *= r.n;
        continue;
      }
      Value& list = v.is_list ? v : r;
      const int64_t times = v.is_list ? r.n : v.n;
      if (times < 0 || times > 100000) bad("repeat count out of range");
      Value out;
      out.is_list = true;
      for (int64_t i = 0; i < times; ++i) out.list.insert(out.list.end(), list.list.begin(), list.list.end());
      v = out;
    }
    return v;
  }
  Value atom() {
    Value v;
    if (eat('(')) {
      v = expr();
      if (!eat(')')) bad("missing ')'");
      return v;
    }
    if (eat('[')) {
      v.is_list = true;
      if (eat(']')) return v;
      do v.list.push_back(number()); while (eat(','));
      if (!eat(']')) bad("missing ']'");
      return v;
    }
    v.n = number();
    return v;
  }
  int64_t number() {
    const size_t start = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (pos_ == start) bad("expected a number at '" + s_.substr(start) + "'");
    return std::stoll(s_.substr(start, pos_ - start));
  }

  std::string s_;
  size_t pos_ = 0;
};

// The layout grammar: seq := item*; item := (letter | '|' | '(' seq ')') ('*' int)?; commas and
// spaces are cosmetic. Expands to a string of letters and '|'.
class LayoutExpr {
 public:
  explicit LayoutExpr(const std::string& s) {
    for (char c : s)
      if (c != ' ' && c != ',') s_ += c;
  }
  std::string expand() {
    std::string out = seq();
    if (pos_ != s_.size()) bad("unexpected '" + s_.substr(pos_) + "'");
    return out;
  }

 private:
  [[noreturn]] void bad(const std::string& why) const { throw std::invalid_argument(s_ + ": " + why); }
  std::string seq() {
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != ')') out += item();
    return out;
  }
  std::string item() {
    std::string unit;
    const char c = s_[pos_++];
    if (c == '(') {
      unit = seq();
      if (pos_ >= s_.size() || s_[pos_] != ')') bad("missing ')'");
      ++pos_;
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
      unit = std::string(1, c);
    } else {
      bad(std::string("unknown layer letter '") + c + "'");
    }
    if (pos_ < s_.size() && s_[pos_] == '*') {
      ++pos_;
      const size_t start = pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      if (pos_ == start) bad("'*' without a count");
      const int64_t n = std::stoll(s_.substr(start, pos_ - start));
      std::string out;
      for (int64_t i = 0; i < n && out.size() < 1000000; ++i) out += unit;
      return out;
    }
    return unit;
  }

  std::string s_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<int64_t> eval_layer_pattern(const std::string& expr) { return ListExpr(expr).eval(); }

std::vector<std::string> expand_pipeline_layout(const std::string& layout) {
  return split(LayoutExpr(layout).expand(), '|');
}

// ---- Megatron-LM ----------------------------------------------------------------------------------

namespace {

const std::vector<std::string> kRecomputeModulesV019 = {"core_attn", "moe_act", "layernorm",    "mla_up_proj",
                                                        "mlp",       "moe",     "shared_experts", "gdn_norm_out"};
const std::vector<std::string> kRecomputeModulesHeadExtra = {"gdp_in_proj", "gdp_qkv", "mhc"};

bool valid_recompute_module(const std::string& name, bool head) {
  return contains(kRecomputeModulesV019, name) || (head && contains(kRecomputeModulesHeadExtra, name));
}

// Whether one value fits a flag's CSV type and choices.
CheckResult check_megatron_value(const FrameworkData::MegatronFlag& f, const std::string& v) {
  const std::string what = f.flag + " " + v;
  if (f.type == "int" && !parse_int(v)) return fail("type", what + ": expected an int");
  if (f.type == "float" && !parse_float(v)) return fail("type", what + ": expected a float");
  if (f.type == "moe_freq_type" && !parse_int(v)) {
    try {
      eval_layer_pattern(v);
    } catch (const std::invalid_argument& e) {
      return fail("type", what + ": expected an int or a list expression (" + e.what() + ")");
    }
  }
  if (!f.choices.empty() && f.type != "moe_freq_type" && !contains(f.choices, v))
    return fail("choices", what + ": not one of " + join(f.choices, ", "));
  return CheckResult::pass();
}

// Arity by action and nargs, then each value's type.
CheckResult check_megatron_arity(const FrameworkData::MegatronFlag& f, const std::vector<std::string>& values) {
  const size_t n = values.size();
  if (!f.takes_value()) {
    if (n != 0) return fail("arity", f.flag + " is a switch (" + f.action + ") but has values: " + join(values, " "));
    return CheckResult::pass();
  }
  const bool ok = f.nargs.empty() ? n == 1 : f.nargs == "+" ? n >= 1 : f.nargs == "*" ? true
                                         : parse_int(f.nargs) ? n == static_cast<size_t>(*parse_int(f.nargs)) : n >= 1;
  if (!ok)
    return fail("arity", f.flag + " takes " + (f.nargs.empty() ? std::string("one value") : "nargs " + f.nargs) +
                             " but has " + std::to_string(n));
  for (const std::string& v : values) {
    CheckResult r = check_megatron_value(f, v);
    if (!r.ok) return r;
  }
  return CheckResult::pass();
}

class MegatronCheck {
 public:
  MegatronCheck(const FrameworkData& data, std::string version, const MegatronScript& s, const json& config)
      : data_(data), version_(std::move(version)), s_(s), c_(config) {}

  CheckResult run() {
    return first_failure({[&] { return flags(); }, [&] { return grid(); }, [&] { return tensor(); },
                          [&] { return pipeline(); }, [&] { return environment(); }, [&] { return sharding(); },
                          [&] { return batch(); }, [&] { return moe(); }, [&] { return attention(); },
                          [&] { return precision(); }, [&] { return recompute(); }, [&] { return shape(); },
                          [&] { return consistency(); }});
  }

 private:
  bool on(const std::string& flag) const { return s_.has(flag); }
  // Whether any spelling with this dest was given (--no-X and --disable-X share one).
  bool dest_given(const std::string& dest) const { return dests_.count(dest) > 0; }
  int64_t num(const std::string& flag, int64_t fallback) const {
    auto v = s_.value(flag);
    auto n = v ? parse_int(*v) : std::nullopt;
    return n ? *n : fallback;
  }
  std::string text(const std::string& flag, const std::string& fallback) const {
    auto v = s_.value(flag);
    return v ? *v : fallback;
  }
  std::vector<std::string> values(const std::string& flag) const {
    for (const auto& a : s_.args)
      if (a.first == flag) return a.second;
    return {};
  }

  // Every flag exists at this version, once, with its arity, type and choices.
  CheckResult flags() {
    std::set<std::string> seen;
    for (const auto& a : s_.args) {
      const FrameworkData::MegatronFlag* f = data_.megatron_flag(version_, a.first);
      if (!f) {
        const std::string other = version_ == "main" ? "core_v0.19.0" : "main";
        return fail("flag", a.first + " is not a flag of Megatron-LM " + version_ +
                                (data_.megatron_flag(other, a.first) ? " (it exists at " + other + ")" : ""));
      }
      if (!seen.insert(a.first).second) return fail("duplicate", a.first + " is given twice");
      CheckResult r = check_megatron_arity(*f, a.second);
      if (!r.ok) return r;
      dests_.insert(f->dest);
    }
    tp_ = num("--tensor-model-parallel-size", 1);
    pp_ = num("--pipeline-model-parallel-size", 1);
    cp_ = num("--context-parallel-size", 1);
    ep_ = num("--expert-model-parallel-size", 1);
    etp_ = num("--expert-tensor-parallel-size", tp_);
    layers_ = num("--num-layers", 0);
    world_ = s_.world;
    for (const auto& [flag, v] : std::vector<std::pair<std::string, int64_t>>{
             {"--tensor-model-parallel-size", tp_}, {"--pipeline-model-parallel-size", pp_},
             {"--context-parallel-size", cp_}, {"--expert-model-parallel-size", ep_},
             {"--expert-tensor-parallel-size", etp_}})
      if (v < 1) return fail("type", flag + " " + str(v) + ": must be >= 1");
    return CheckResult::pass();
  }

  // M01, M02, M05: the world size against the parallel grid.
  CheckResult grid() {
    if (world_ <= 0) return fail("M01", "the world size is unknown: no \"for N GPUs\" in the header comment");
    int64_t gtp = 1;
    if (on("--tensor-parallel-num-weight-shards")) {
      const int64_t shards = num("--tensor-parallel-num-weight-shards", tp_);
      if (shards < tp_ || shards % tp_ != 0)
        return fail("M05", "--tensor-parallel-num-weight-shards " + str(shards) + " is not a multiple of tp " + str(tp_));
      gtp = shards / tp_;
    }
    const int64_t model = tp_ * pp_ * cp_ * gtp;
    if (world_ % model != 0)
      return fail("M01", "world size " + str(world_) + " is not a multiple of tp*pp*cp = " + str(model));
    dp_ = world_ / model;
    if (world_ % (etp_ * ep_ * pp_) != 0)
      return fail("M02", "world size " + str(world_) + " is not a multiple of etp*ep*pp = " + str(etp_ * ep_ * pp_));
    return CheckResult::pass();
  }

  // M06, M07, M08, M09, M59: attention heads and sequence parallelism against tp.
  CheckResult tensor() {
    const int64_t heads = num("--num-attention-heads", 0);
    if (heads > 0 && heads % tp_ != 0)
      return fail("M06", "--num-attention-heads " + str(heads) + " is not divisible by tp " + str(tp_));
    if (on("--num-query-groups") && !on("--group-query-attention"))
      return fail("M59", "--num-query-groups without --group-query-attention is dropped (full multi-head attention)");
    if (on("--group-query-attention")) {
      const int64_t groups = num("--num-query-groups", 1);
      if (groups % tp_ != 0 && tp_ % groups != 0)
        return fail("M07", "--num-query-groups " + str(groups) + " is neither a multiple nor a divisor of tp " + str(tp_));
    }
    if (on("--sequence-parallel") && tp_ == 1)
      return fail("M08", "--sequence-parallel with tp 1 (Megatron-LM turns it off with a warning)");
    if (on("--tp-comm-overlap") && !on("--sequence-parallel"))
      return fail("M09", "--tp-comm-overlap requires --sequence-parallel");
    return CheckResult::pass();
  }

  // M13-M20: how the layers are split over pipeline ranks; sets vpp_ and rank_layers_.
  CheckResult pipeline() {
    const bool per_stage = on("--num-layers-per-virtual-pipeline-stage");
    const bool stages = on("--num-virtual-stages-per-pipeline-rank");
    const bool layout = on("--pipeline-model-parallel-layout");
    if (int(per_stage) + int(stages) + int(layout) > 1)
      return fail("M13", "more than one of --num-layers-per-virtual-pipeline-stage, "
                         "--num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout");
    const bool first = on("--decoder-first-pipeline-num-layers"), last = on("--decoder-last-pipeline-num-layers");
    const bool emb = on("--account-for-embedding-in-pipeline-split"), loss = on("--account-for-loss-in-pipeline-split");
    if (layout) {
      if (first || last || emb || loss)
        return fail("M20", "--pipeline-model-parallel-layout with first/last stage or account-for flags");
      return pipeline_layout();
    }
    if ((first || last) && (emb || loss))
      return fail("M18b", "--decoder-first/last-pipeline-num-layers with --account-for-*-in-pipeline-split");
    if ((first || last) && per_stage)
      return fail("M15b", "uneven first/last stages with --num-layers-per-virtual-pipeline-stage");
    const int64_t extras = int64_t(emb) + int64_t(loss);
    vpp_ = 1;
    if (per_stage) {
      const int64_t n = num("--num-layers-per-virtual-pipeline-stage", 0);
      if (n < 1 || (layers_ + extras) % pp_ != 0 || ((layers_ + extras) / pp_) % n != 0)
        return fail("M15", "--num-layers-per-virtual-pipeline-stage " + str(n) + ": " + str(layers_ + extras) +
                               " layers do not split into pp " + str(pp_) + " ranks of whole stages");
      vpp_ = (layers_ + extras) / pp_ / n;
    } else if (stages) {
      vpp_ = num("--num-virtual-stages-per-pipeline-rank", 0);
      if (vpp_ < 1) return fail("M15", "--num-virtual-stages-per-pipeline-rank must be >= 1");
    }
    CheckResult r = interleaving();
    if (!r.ok) return r;
    if (first || last) return pipeline_uneven(first, last);
    const int64_t total = layers_ + extras;
    if (total % pp_ != 0 || (total / pp_) % vpp_ != 0)
      return fail(extras ? "M19" : "M14", str(total) + " layers (with " + str(extras) +
                                              " for embedding/loss) do not split evenly over pp " + str(pp_) +
                                              " x vpp " + str(vpp_));
    rank_layers_.assign(static_cast<size_t>(pp_), total / pp_);
    rank_layers_.front() -= int64_t(emb);
    rank_layers_.back() -= int64_t(loss);
    return CheckResult::pass();
  }

  // M16: an interleaved schedule needs pipeline ranks.
  CheckResult interleaving() const {
    const bool overlap = !dest_given("overlap_p2p_comm");
    if (vpp_ > 1 && (pp_ < 2 || (!overlap && pp_ < 3)))
      return fail("M16", "a virtual pipeline degree of " + str(vpp_) + " with pp " + str(pp_));
    return CheckResult::pass();
  }

  // M18: --decoder-first/last-pipeline-num-layers.
  CheckResult pipeline_uneven(bool first, bool last) {
    const int64_t f = first ? num("--decoder-first-pipeline-num-layers", 0) : 0;
    const int64_t l = last ? num("--decoder-last-pipeline-num-layers", 0) : 0;
    if ((first && f <= 0) || (last && l <= 0)) return fail("M18", "first/last stage layer counts must be > 0");
    const int64_t middle_ranks = pp_ - int64_t(first) - int64_t(last), rest = layers_ - f - l;
    if (middle_ranks < 0) return fail("M18", "uneven first and last stages with pp " + str(pp_));
    if (middle_ranks == 0 ? rest != 0 : (rest <= 0 || rest % middle_ranks != 0))
      return fail("M18", str(rest) + " remaining layers do not spread evenly over " + str(middle_ranks) +
                             " middle pipeline ranks");
    const int64_t mid = middle_ranks > 0 ? rest / middle_ranks : 0;
    if (vpp_ > 1 && (f % vpp_ != 0 || l % vpp_ != 0 || mid % vpp_ != 0))
      return fail("M18", "first " + str(f) + ", last " + str(l) + " and middle " + str(mid) +
                             " layers must each divide by vpp " + str(vpp_));
    rank_layers_.assign(static_cast<size_t>(pp_), mid);
    if (first) rank_layers_.front() = f;
    if (last) rank_layers_.back() = l;
    return CheckResult::pass();
  }

  // M19/M20: --pipeline-model-parallel-layout.
  CheckResult pipeline_layout() {
    const std::string layout = text("--pipeline-model-parallel-layout", "");
    std::vector<std::string> stages;
    try {
      stages = expand_pipeline_layout(layout);
    } catch (const std::invalid_argument& e) {
      return fail("M20", std::string("--pipeline-model-parallel-layout: ") + e.what());
    }
    const std::string all = join(stages, "");
    const auto count = [&](char c) { return std::count(all.begin(), all.end(), c); };
    if (stages.size() % static_cast<size_t>(pp_) != 0)
      return fail("M20", "the layout has " + std::to_string(stages.size()) + " stages, not a multiple of pp " + str(pp_));
    if (count('E') != 1 || stages.front().empty() || stages.front()[0] != 'E')
      return fail("M20", "the layout must start with E, once: " + layout);
    if (count('L') != 1 || stages.back().empty() || stages.back().back() != 'L')
      return fail("M20", "the layout must end with L, once: " + layout);
    if (count('t') != layers_)
      return fail("M20", "the layout has " + std::to_string(count('t')) + " decoder layers but --num-layers is " +
                             str(layers_));
    if (count('m') != num("--mtp-num-layers", 0) || (count('m') > 0 && all.rfind('t') > all.find('m')))
      return fail("M20", "the layout's m layers must match --mtp-num-layers and follow every decoder layer");
    vpp_ = static_cast<int64_t>(stages.size()) / pp_;
    rank_layers_.assign(static_cast<size_t>(pp_), 0);
    for (size_t i = 0; i < stages.size(); ++i)
      rank_layers_[i % static_cast<size_t>(pp_)] += std::count(stages[i].begin(), stages[i].end(), 't');
    return interleaving();
  }

  // M11: CUDA_DEVICE_MAX_CONNECTIONS.
  CheckResult environment() const {
    const bool fsdp = on("--use-torch-fsdp2") || on("--use-megatron-fsdp");
    auto it = s_.env.find("CUDA_DEVICE_MAX_CONNECTIONS");
    const bool one = it != s_.env.end() && it->second == "1";
    if (fsdp && one) return fail("M11", "FSDP needs CUDA_DEVICE_MAX_CONNECTIONS other than 1");
    if (!fsdp && (tp_ > 1 || cp_ > 1) && !one && !on("--overlap-moe-expert-parallel-comm"))
      return fail("M11", "tp > 1 or cp > 1 needs export CUDA_DEVICE_MAX_CONNECTIONS=1");
    return CheckResult::pass();
  }

  // M26-M29: the distributed optimizer and the FSDPs.
  CheckResult sharding() const {
    const bool dist = on("--use-distributed-optimizer"), mfsdp = on("--use-megatron-fsdp");
    const bool fsdp2 = on("--use-torch-fsdp2");
    const std::string ckpt = text("--ckpt-format", "torch_dist");
    if (on("--overlap-param-gather") && (!(dist || mfsdp) || !on("--overlap-grad-reduce")))
      return fail("M26", "--overlap-param-gather needs --use-distributed-optimizer (or Megatron-FSDP) and "
                         "--overlap-grad-reduce");
    if (fsdp2 && mfsdp) return fail("M27", "--use-torch-fsdp2 with --use-megatron-fsdp");
    if (fsdp2 && (pp_ > 1 || ep_ > 1 || dist || on("--fp16") || (ckpt != "torch_dist" && ckpt != "torch_dcp")))
      return fail("M27", "--use-torch-fsdp2 needs pp 1, ep 1, no --use-distributed-optimizer, no --fp16 and "
                         "--ckpt-format torch_dist or torch_dcp");
    if (fsdp2 && !dest_given("gradient_accumulation_fusion"))
      return fail("M27b", "--use-torch-fsdp2 needs --no-gradient-accumulation-fusion");
    if (fsdp2 && !on("--untie-embeddings-and-output-weights"))
      return fail("M27c", "--use-torch-fsdp2 needs --untie-embeddings-and-output-weights");
    if (mfsdp && ckpt != "fsdp_dtensor") return fail("M28", "--use-megatron-fsdp needs --ckpt-format fsdp_dtensor");
    if (mfsdp && dist && num("--megatron-fsdp-version", 1) == 2)
      return fail("M28", "--megatron-fsdp-version 2 forbids --use-distributed-optimizer");
    if (ckpt == "torch_dcp" && !(fsdp2 && tp_ <= 1 && pp_ <= 1))
      return fail("M29", "--ckpt-format torch_dcp only with --use-torch-fsdp2, tp 1 and pp 1");
    if (ckpt == "fsdp_dtensor" && !mfsdp) return fail("M29", "--ckpt-format fsdp_dtensor only with --use-megatron-fsdp");
    if (on("--cpu-offloading") && (pp_ > 1 || on("--recompute-granularity")))
      return fail("M24", "--cpu-offloading with pp > 1 or recomputation");
    return CheckResult::pass();
  }

  // M32, M33, M37: batch and sequence.
  CheckResult batch() const {
    const int64_t micro = num("--micro-batch-size", 0);
    if (micro <= 0) return fail("M32", "--micro-batch-size is required and must be > 0");
    if (on("--global-batch-size")) {
      const int64_t global = num("--global-batch-size", 0);
      if (global < micro * dp_ || global % (micro * dp_) != 0)
        return fail("M33", "--global-batch-size " + str(global) + " is not a multiple of micro-batch " + str(micro) +
                               " x dp " + str(dp_));
    }
    const int64_t seq = num("--seq-length", 0);
    if (cp_ > 1 && seq % (2 * cp_) != 0)
      return fail("M37", "--seq-length " + str(seq) + " is not divisible by 2 x cp = " + str(2 * cp_));
    return CheckResult::pass();
  }

  // M41-M47: mixture of experts.
  CheckResult moe() const {
    const bool moe = on("--num-experts");
    const int64_t experts = num("--num-experts", 0);
    if (ep_ > 1 && (!moe || experts % ep_ != 0))
      return fail("M41", "ep " + str(ep_) + " needs --num-experts divisible by it (have " + str(experts) + ")");
    if (moe && experts > 0 && !dest_given("add_bias_linear") && etp_ != 1)
      return fail("M42", "an MoE model with linear biases needs etp 1 (or --disable-bias-linear)");
    const bool softmax = text("--moe-router-score-function", "softmax") == "softmax";
    if (moe && num("--moe-router-topk", 2) == 1 && softmax && !on("--moe-router-pre-softmax") &&
        text("--moe-router-load-balancing-type", "aux_loss") != "sinkhorn")
      return fail("M43", "--moe-router-topk 1 with softmax routing needs --moe-router-pre-softmax");
    if (on("--moe-layer-freq")) {
      CheckResult r = layer_freq();
      if (!r.ok) return r;
    }
    if (on("--moe-shared-expert-intermediate-size") && num("--moe-shared-expert-intermediate-size", 0) <= 0)
      return fail("M45", "--moe-shared-expert-intermediate-size must be > 0");
    const std::string dispatcher = text("--moe-token-dispatcher-type", "allgather");
    if (on("--moe-shared-expert-overlap") && dispatcher == "allgather")
      return fail("M45", "--moe-shared-expert-overlap needs the alltoall or flex dispatcher");
    if (on("--moe-enable-deepep") && dispatcher != "flex") return fail("M46", "--moe-enable-deepep needs flex");
    if (on("--moe-pad-expert-input-to-capacity") && !on("--moe-expert-capacity-factor"))
      return fail("M48", "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor");
    if (on("--overlap-moe-expert-parallel-comm")) {
      const std::vector<std::string> modules = values("--recompute-modules");
      if (ep_ <= 1) return fail("M50", "--overlap-moe-expert-parallel-comm needs ep > 1");
      if (dispatcher == "allgather") return fail("M50", "--overlap-moe-expert-parallel-comm needs alltoall or flex");
      if (pp_ > 1 && vpp_ <= 1) return fail("M50", "--overlap-moe-expert-parallel-comm with pp > 1 needs a virtual pipeline");
      if (text("--recompute-granularity", "") == "full" || on("--recompute-method") || on("--recompute-num-layers") ||
          std::find(modules.begin(), modules.end(), "moe") != modules.end())
        return fail("M50", "--overlap-moe-expert-parallel-comm with full recomputation or the moe recompute module");
      if (!on("--bf16") && !on("--fp16")) return fail("M50", "--overlap-moe-expert-parallel-comm needs bf16 or fp16");
      if (on("--moe-shared-expert-overlap"))
        return fail("M50", "--overlap-moe-expert-parallel-comm with --moe-shared-expert-overlap");
      if (num("--mtp-num-layers", 0) > 1) return fail("M50", "--overlap-moe-expert-parallel-comm with more than one MTP layer");
    }
    return CheckResult::pass();
  }

  // M44: an int N >= 1, or a list of 0/1 as long as the model.
  CheckResult layer_freq() const {
    const std::string v = text("--moe-layer-freq", "1");
    if (auto n = parse_int(v)) {
      if (*n < 1) return fail("M44", "--moe-layer-freq " + v + " must be >= 1");
      return CheckResult::pass();
    }
    const std::vector<int64_t> list = eval_layer_pattern(v);
    if (static_cast<int64_t>(list.size()) != layers_)
      return fail("M44", "--moe-layer-freq " + v + " has " + std::to_string(list.size()) + " entries but --num-layers is " +
                             str(layers_));
    for (int64_t x : list)
      if (x != 0 && x != 1) return fail("M44", "--moe-layer-freq " + v + " holds values other than 0 and 1");
    return CheckResult::pass();
  }

  // M51, M51b, M55: attention variants.
  CheckResult attention() const {
    const bool mla = on("--multi-latent-attention");
    if (mla && on("--group-query-attention"))
      return fail("M51", "--multi-latent-attention with --group-query-attention");
    if (mla && on("--rotary-interleaved")) return fail("M51", "--rotary-interleaved with MLA");
    if (!mla && on("--rope-type") && text("--rope-type", "") != "rope")
      return fail("M51b", "non-MLA attention accepts only --rope-type rope");
    if (on("--use-flash-attn")) return fail("M55", "--use-flash-attn has no effect; use --attention-backend");
    if (text("--attention-backend", "auto") == "local" && text("--spec", "") != "local")
      return fail("M55", "--attention-backend local needs --spec local");
    return CheckResult::pass();
  }

  // M52, M53: precision.
  CheckResult precision() const {
    if (on("--fp16") && on("--bf16")) return fail("M53", "--fp16 with --bf16");
    if (on("--fp32-residual-connection") && !on("--fp16") && !on("--bf16"))
      return fail("M53", "--fp32-residual-connection needs --fp16 or --bf16");
    const bool fp8 = on("--fp8-format");
    if (fp8 && on("--fp4-format")) return fail("M52", "FP8 and FP4 together");
    const std::string recipe = text("--fp8-recipe", "delayed");
    if (fp8 && recipe == "custom" && !on("--fp8-quantizer-factory"))
      return fail("M52", "--fp8-recipe custom needs --fp8-quantizer-factory");
    if (on("--fp8-param-gather") &&
        (!fp8 || !(on("--use-distributed-optimizer") || on("--use-torch-fsdp2") || on("--use-megatron-fsdp"))))
      return fail("M52", "--fp8-param-gather needs FP8 and a sharded optimizer or FSDP");
    if (on("--first-last-layers-bf16") && fp8 && recipe == "delayed")
      return fail("M52", "--first-last-layers-bf16 with the delayed FP8 recipe");
    return CheckResult::pass();
  }

  // M12, M47, M54: recomputation.
  CheckResult recompute() const {
    std::string granularity = text("--recompute-granularity", on("--recompute-activations") ? "selective" : "");
    const bool method = on("--recompute-method"), layers = on("--recompute-num-layers");
    if (granularity == "full") {
      if (!method || !layers) return fail("M54", "--recompute-granularity full needs --recompute-method and "
                                                 "--recompute-num-layers");
      const int64_t n = num("--recompute-num-layers", 0), per_rank = (layers_ + pp_ - 1) / pp_;
      if (n < 1 || n > per_rank)
        return fail("M54", "--recompute-num-layers " + str(n) + " outside 1.." + str(per_rank));
    } else if (method || layers) {
      return fail("M54", "--recompute-method/--recompute-num-layers without full recomputation");
    }
    const std::vector<std::string> modules = values("--recompute-modules");
    if (!modules.empty() && granularity != "selective")
      return fail("M54", "--recompute-modules without --recompute-granularity selective");
    const bool fp8_delayed = on("--fp8-format") && text("--fp8-recipe", "delayed") == "delayed";
    for (const std::string& m : modules) {
      if (!valid_recompute_module(m, version_ == "main"))
        return fail("M54", "--recompute-modules " + m + " is not a module Megatron-LM " + version_ + " knows");
      if (m == "mla_up_proj" && !on("--multi-latent-attention")) return fail("M54", "mla_up_proj recompute needs MLA");
      if (m == "moe_act" && !on("--moe-grouped-gemm")) return fail("M47", "moe_act recompute needs --moe-grouped-gemm");
      if (m == "shared_experts" && on("--moe-shared-expert-overlap"))
        return fail("M54", "shared_experts recompute with --moe-shared-expert-overlap");
      if ((m == "moe_act" || m == "layernorm") && fp8_delayed)
        return fail("M54", m + " recompute with FP8 delayed scaling");
    }
    if (on("--distribute-saved-activations") &&
        (tp_ < 2 || granularity != "full" || !method || on("--sequence-parallel")))
      return fail("M12", "--distribute-saved-activations needs tp > 1, full recompute with a method, no SP");
    return CheckResult::pass();
  }

  // M36, M56, M56b, M62, M63: model shape and removed flags.
  CheckResult shape() const {
    for (const char* removed : {"--batch-size", "--warmup", "--model-parallel-size", "--checkpoint-activations"})
      if (on(removed)) return fail("M36", std::string(removed) + " was removed and aborts the launch");
    for (const char* required : {"--num-layers", "--hidden-size", "--num-attention-heads", "--max-position-embeddings",
                                 "--seq-length"})
      if (!on(required)) return fail("M56", std::string(required) + " is required");
    if (num("--seq-length", 0) > num("--max-position-embeddings", 0))
      return fail("M56b", "--seq-length exceeds --max-position-embeddings");
    if (on("--swiglu") && (on("--squared-relu") || on("--quick-geglu")))
      return fail("M62", "--squared-relu/--quick-geglu with --swiglu");
    const std::string pos = text("--position-embedding-type", "learned_absolute");
    if (on("--mtp-num-layers") && pos != "rope" && pos != "none")
      return fail("M63", "MTP needs --position-embedding-type rope or none");
    return CheckResult::pass();
  }

  // The export against the configuration (and the workload facts it carries).
  CheckResult consistency() const {
    if (!c_.is_object()) return CheckResult::pass();
    return first_failure({[&] { return consistency_grid(); }, [&] { return consistency_batch(); },
                          [&] { return consistency_pipeline(); }, [&] { return consistency_memory(); }});
  }

  CheckResult consistency_grid() const {
    return first_failure({[&] { return agree("the world size", world_, cfg_int(c_, "gpus")); },
                          [&] { return agree("tp", tp_, cfg_int(c_, "tp")); },
                          [&] { return agree("pp", pp_, cfg_int(c_, "pp")); },
                          [&] { return agree("cp", cp_, cfg_int(c_, "cp")); },
                          [&] { return agree("ep", ep_, cfg_int(c_, "ep")); },
                          [&] { return agree("dp (world / tp pp cp)", dp_, cfg_int(c_, "dp")); },
                          [&] {
                            const int64_t etp = cfg_int(c_, "etp").value_or(0);
                            if (!on("--num-experts")) return CheckResult::pass();
                            return agree("etp", etp_, etp > 0 ? etp : tp_);
                          },
                          [&] {
                            auto sp = cfg_bool(c_, "sp");
                            if (!sp || *sp == on("--sequence-parallel")) return CheckResult::pass();
                            return fail("consistency", std::string("--sequence-parallel is ") +
                                                           (*sp ? "missing" : "given") + " but the configuration has sp " +
                                                           (*sp ? "true" : "false"));
                          }});
  }

  CheckResult consistency_batch() const {
    return first_failure({[&] { return agree("the micro-batch", num("--micro-batch-size", 0), cfg_int(c_, "micro_batch")); },
                          [&] {
                            auto global = cfg_int(c_, "global_batch");
                            if (global && !on("--global-batch-size"))
                              return fail("consistency", "--global-batch-size is missing");
                            return agree("the global batch", num("--global-batch-size", 0), global);
                          },
                          [&] { return agree("--seq-length", num("--seq-length", 0), cfg_int(c_, "seq_len")); },
                          [&] { return agree("--num-layers", layers_, cfg_int(c_, "num_layers")); }});
  }

  CheckResult consistency_pipeline() const {
    CheckResult r = agree("the virtual pipeline degree", vpp_, cfg_int(c_, "vpp"));
    if (!r.ok || pp_ < 2) return r;
    const int64_t first = cfg_int(c_, "first_stage_layers").value_or(0);
    const int64_t last = cfg_int(c_, "last_stage_layers").value_or(0);
    if (first > 0) {
      r = agree("the first pipeline rank's decoder layers", rank_layers_.front(), first);
      if (!r.ok) return r;
    }
    if (first > 0 || last > 0) return agree("the last pipeline rank's decoder layers", rank_layers_.back(), last > 0 ? last : first);
    return CheckResult::pass();
  }

  // zero stage and recomputation.
  CheckResult consistency_memory() const {
    if (auto zero = cfg_int(c_, "zero")) {
      const bool dist = on("--use-distributed-optimizer"), fsdp = on("--use-megatron-fsdp");
      const std::string strategy = text("--data-parallel-sharding-strategy", "optim_grads_params");
      const bool ok = *zero == 0   ? !dist && !fsdp
                      : *zero == 1 ? dist && !fsdp
                      : *zero == 2 ? fsdp && strategy == "optim_grads"
                                   : fsdp && strategy == "optim_grads_params";
      if (!ok)
        return fail("consistency", "zero " + str(*zero) + " is not what the export says (distributed optimizer " +
                                       (dist ? "on" : "off") + ", Megatron-FSDP " + (fsdp ? strategy : "off") + ")");
    }
    auto recompute = cfg_str(c_, "recompute");
    if (!recompute) return CheckResult::pass();
    const std::string granularity = text("--recompute-granularity", on("--recompute-activations") ? "selective" : "none");
    if (granularity != *recompute)
      return fail("consistency", "recompute " + *recompute + " but the export's granularity is " + granularity);
    auto modules = cfg_str(c_, "recompute_modules");
    if (*recompute != "selective" || !modules || modules->empty()) return CheckResult::pass();
    std::vector<std::string> want = split(*modules, ','), have = values("--recompute-modules");
    if (have.empty()) have = {"core_attn"};
    std::sort(want.begin(), want.end());
    std::sort(have.begin(), have.end());
    if (want != have)
      return fail("consistency", "recompute_modules " + *modules + " but --recompute-modules is " + join(have, " "));
    return CheckResult::pass();
  }

  const FrameworkData& data_;
  const std::string version_;
  const MegatronScript& s_;
  const json& c_;
  std::set<std::string> dests_;
  int64_t tp_ = 1, pp_ = 1, cp_ = 1, ep_ = 1, etp_ = 1, dp_ = 1, vpp_ = 1, layers_ = 0, world_ = 0;
  std::vector<int64_t> rank_layers_;
};

CheckResult check_megatron(const FrameworkData& data, const std::string& version, const std::string& text,
                           const json& config) {
  MegatronScript s;
  std::string error;
  if (!parse_megatron_script(text, &s, &error)) return fail("format", error);
  CheckResult r = check_header(s.comments, "Megatron-LM", version, data.commit("megatron", version));
  if (!r.ok) return r;
  return MegatronCheck(data, version, s, config).run();
}

}  // namespace

// ---- TOML and Python literals ---------------------------------------------------------------------

namespace {

// One value of the subset of TOML in docs/exports.md (integers, floats, booleans, basic strings,
// arrays), or of Python literals (integers, floats, True/False/None, quoted strings, lists), to
// JSON. A trailing "# comment" is allowed. Throws std::invalid_argument.
class LiteralParser {
 public:
  enum class Syntax { kToml, kPython };
  LiteralParser(const std::string& s, Syntax syntax) : s_(s), syntax_(syntax) {}

  json parse() {
    json v = value();
    space();
    if (pos_ < s_.size() && s_[pos_] != '#') bad("unexpected '" + s_.substr(pos_) + "'");
    return v;
  }

 private:
  [[noreturn]] void bad(const std::string& why) const { throw std::invalid_argument(why + " in: " + s_); }
  void space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  bool word(const std::string& w) {
    if (s_.compare(pos_, w.size(), w) != 0) return false;
    const size_t end = pos_ + w.size();
    if (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_')) return false;
    pos_ = end;
    return true;
  }
  json value() {
    space();
    if (pos_ >= s_.size()) bad("a value is missing");
    const char c = s_[pos_];
    if (c == '"' || (c == '\'' && syntax_ == Syntax::kPython)) return quoted(c);
    if (c == '[') return array();
    const bool toml = syntax_ == Syntax::kToml;
    if (word(toml ? "true" : "True")) return true;
    if (word(toml ? "false" : "False")) return false;
    if (!toml && word("None")) return nullptr;
    return number();
  }
  json quoted(char q) {
    std::string out;
    for (++pos_; pos_ < s_.size() && s_[pos_] != q; ++pos_) {
      if (s_[pos_] != '\\') {
        out += s_[pos_];
        continue;
      }
      if (++pos_ >= s_.size()) break;
      const char e = s_[pos_];
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
    }
    if (pos_ >= s_.size()) bad("unterminated string");
    ++pos_;
    return out;
  }
  json array() {
    json out = json::array();
    ++pos_;
    for (;;) {
      space();
      if (pos_ < s_.size() && s_[pos_] == ']') break;
      out.push_back(value());
      space();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ >= s_.size() || s_[pos_] != ']') bad("expected ',' or ']'");
    }
    ++pos_;
    return out;
  }
  json number() {
    const size_t start = pos_;
    while (pos_ < s_.size() && std::strchr("+-0123456789.eE_", s_[pos_]) != nullptr) ++pos_;
    std::string text = s_.substr(start, pos_ - start);
    if (syntax_ == Syntax::kToml) text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    if (auto i = parse_int(text)) return *i;
    if (auto f = parse_float(text)) return *f;
    bad("not a value: '" + s_.substr(start) + "'");
  }

  const std::string& s_;
  Syntax syntax_;
  size_t pos_ = 0;
};

json parse_literal(const std::string& s, LiteralParser::Syntax syntax) { return LiteralParser(s, syntax).parse(); }

std::string python_literal(const json& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  return v.dump();
}

// A CSV default as a value: "8", "-1", "1.0", "True", "None", "[]", "['model', 'loss']", "1F1B".
json csv_default(const std::string& d, const std::string& type) {
  if (d == "None") return nullptr;
  if (starts_with(type, "str") || starts_with(type, "Literal[")) return d;
  if (d.empty()) return nullptr;
  if (d == "True" || d == "true") return true;
  if (d == "False" || d == "false") return false;
  if (auto i = parse_int(d)) return *i;
  if (auto f = parse_float(d)) return *f;
  if (starts_with(d, "[")) {
    try {
      return parse_literal(d, LiteralParser::Syntax::kPython);
    } catch (const std::invalid_argument&) {
    }
  }
  return d;
}

// The names of a Literal['a', 'b'] type.
std::vector<std::string> literal_choices(const std::string& type) {
  std::vector<std::string> out;
  static const std::regex item("'([^']*)'");
  for (auto it = std::sregex_iterator(type.begin(), type.end(), item); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

bool string_list(const json& v) {
  return v.is_array() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); });
}

}  // namespace

// ---- TorchTitan -----------------------------------------------------------------------------------

namespace {

// A TorchTitan job whatever its form (TOML file or HEAD command line): typed values by section.
struct TitanJob {
  std::string version;                  // the CSV's: v0.1.0, v0.2.2 or HEAD
  std::map<std::string, json> values;   // "section|key" -> value
  std::set<std::string> tables;         // TOML tables given
  std::string variant = "selective";    // HEAD: the activation_checkpoint subcommand
  std::vector<std::string> comments;
};

// Whether a value fits a CSV type ("int", "str | None", "list[str]", "Literal['a', 'b']", ...).
CheckResult check_titan_type(const FrameworkData::TitanField& f, const json& v) {
  std::string t = f.type;
  if (ends_with(t, " | None")) t = t.substr(0, t.size() - 7);
  const std::string what = f.section + "." + f.key + " = " + v.dump();
  bool ok = false;
  if (t == "int") ok = v.is_number_integer();
  else if (t == "float" || t == "float | int") ok = v.is_number();
  else if (t == "bool") ok = v.is_boolean();
  else if (t == "str") ok = v.is_string();
  else if (t == "list[str]") ok = string_list(v);
  else if (t == "list[str] | str") ok = v.is_string() || string_list(v);
  else if (t == "list[list[str]]") ok = v.is_array() && std::all_of(v.begin(), v.end(), string_list);
  else if (starts_with(t, "Literal[")) {
    const std::vector<std::string> choices = literal_choices(t);
    if (v.is_string() && !contains(choices, v.get<std::string>()))
      return fail("choices", what + ": not one of " + join(choices, ", "));
    ok = v.is_string();
  } else {
    return fail("type", what + ": " + f.section + "." + f.key + " (" + f.type + ") is not a plain value");
  }
  return ok ? CheckResult::pass() : fail("type", what + ": expected " + f.type);
}

CheckResult parse_titan_toml(const FrameworkData& data, const std::string& text, TitanJob* job) {
  static const std::regex key_re("([A-Za-z0-9_-]+)\\s*=\\s*(.*)");
  std::string table;
  int n = 0;
  for (const std::string& raw : lines_of(text)) {
    const std::string line = trim(raw), at = "line " + std::to_string(++n) + ": ";
    std::smatch m;
    if (line.empty()) continue;
    if (line[0] == '#') {
      job->comments.push_back(line);
    } else if (line[0] == '[') {
      const size_t close = line.find(']');
      const std::string rest = close == std::string::npos ? "" : trim(line.substr(close + 1));
      if (starts_with(line, "[[") || close == std::string::npos || (!rest.empty() && rest[0] != '#'))
        return fail("format", at + "not a table header: " + line);
      table = trim(line.substr(1, close - 1));
      if (table == "float8" && job->version != "v0.1.0")
        return fail("tt-float8", at + "[float8] is a v0.1.0 table; TorchTitan " + job->version +
                                     " configures float8 in [quantize.linear.float8]");
      if (!data.titan_table(job->version, table))
        return fail("key", at + "[" + table + "] is not a table of TorchTitan " + job->version);
      if (!job->tables.insert(table).second) return fail("format", at + "[" + table + "] appears twice");
    } else if (std::regex_match(line, m, key_re)) {
      const std::string section = table.empty() ? "(top)" : table, key = m[1].str();
      const FrameworkData::TitanField* f = data.titan_field(job->version, section, key);
      if (!f || f->kind != "field")
        return fail("key", at + key + " is not a field of [" + section + "] at TorchTitan " + job->version);
      json v;
      try {
        v = parse_literal(m[2].str(), LiteralParser::Syntax::kToml);
      } catch (const std::invalid_argument& e) {
        return fail("format", at + e.what());
      }
      CheckResult r = check_titan_type(*f, v);
      if (!r.ok) return r;
      if (!job->values.emplace(section + "|" + key, v).second) return fail("format", at + key + " is set twice");
    } else {
      return fail("format", at + "not a comment, a table or key = value: " + line);
    }
  }
  return CheckResult::pass();
}

// A command-line value of a HEAD field (tyro): bools are flags, lists one comma-separated word.
CheckResult titan_cli_value(const FrameworkData::TitanField& f, const std::vector<std::string>& words, json* out) {
  std::string t = f.type;
  const bool optional = ends_with(t, " | None");
  if (optional) t = t.substr(0, t.size() - 7);
  const std::string flag = words[0];
  if (t == "bool") {
    if (words.size() != 1) return fail("arity", flag + " is a flag (tyro) and takes no value: " + join(words, " "));
    *out = true;
    return CheckResult::pass();
  }
  if (words.size() != 2) return fail("arity", flag + " takes one value: " + join(words, " "));
  const std::string& v = words[1];
  if (optional && v == "None") *out = nullptr;
  else if (t == "int" && parse_int(v)) *out = *parse_int(v);
  else if ((t == "float" || t == "float | int") && parse_float(v)) *out = *parse_float(v);
  else if (t == "str" || starts_with(t, "Literal[")) *out = v;
  else if (t == "list[str]") *out = split(v, ',');
  else return fail("type", flag + " " + v + ": expected " + f.type);
  return check_titan_type(f, *out);
}

CheckResult parse_titan_cli(const FrameworkData& data, const std::string& text, TitanJob* job) {
  BashFragment b;
  std::string error;
  if (!parse_bash(text, "TORCHTITAN_ARGS", &b, &error)) return fail("format", error);
  job->comments = b.comments;
  if (!b.env.empty()) return fail("format", "a TorchTitan export sets no environment");
  bool variant_given = false, ac_fields = false;
  for (const auto& w : b.lines) {
    if (starts_with(w[0], "activation_checkpoint:")) {
      job->variant = w[0].substr(22);
      if (w.size() != 1 || !data.titan_variants().count(job->variant))
        return fail("tt-variant", join(w, " ") + ": the variants are " + join({data.titan_variants().begin(),
                                                                               data.titan_variants().end()}, ", "));
      if (variant_given || ac_fields)
        return fail("tt-variant", "the activation_checkpoint subcommand must come once, before its fields");
      variant_given = true;
      continue;
    }
    if (!starts_with(w[0], "--")) return fail("format", "not an option or a subcommand: " + join(w, " "));
    std::string name = w[0].substr(2);
    std::replace(name.begin(), name.end(), '-', '_');
    const size_t dot = name.rfind('.');
    const std::string section = dot == std::string::npos ? "(top)" : name.substr(0, dot);
    std::string key = name.substr(dot == std::string::npos ? 0 : dot + 1);
    std::string csv_section = section;
    if (section == "activation_checkpoint") {
      ac_fields = true;
      if (job->variant != "selective") csv_section += " {variant " + job->variant + "}";
    }
    const FrameworkData::TitanField* f = data.titan_field("HEAD", csv_section, key);
    bool negated = false;
    if (!f && starts_with(key, "no_")) {
      f = data.titan_field("HEAD", csv_section, key.substr(3));
      negated = f && f->type == "bool";
      if (!negated) f = nullptr;
      else key = key.substr(3);
    }
    if (!f || f->kind != "field")
      return fail("key", w[0] + " is not a field of TorchTitan main" +
                             (section == "activation_checkpoint" ? " (variant " + job->variant + ")" : std::string()));
    if (!f->cli_override) return fail("tt-cli", w[0] + " cannot be set from the command line (cli_override no)");
    json v;
    CheckResult r = titan_cli_value(*f, w, &v);
    if (!r.ok) return r;
    if (negated) v = false;
    if (!job->values.emplace(section + "|" + key, v).second) return fail("duplicate", w[0] + " is given twice");
  }
  return CheckResult::pass();
}

class TitanCheck {
 public:
  TitanCheck(const FrameworkData& data, const TitanJob& job, const json& config) : data_(data), j_(job), c_(config) {}

  CheckResult run() {
    return first_failure({[&] { return degrees(); }, [&] { return experts(); }, [&] { return batch(); },
                          [&] { return stages(); }, [&] { return float8(); }, [&] { return checkpointing(); },
                          [&] { return async_tp(); }, [&] { return consistency(); }});
  }

 private:
  bool head() const { return j_.version == "HEAD"; }
  // The value given, else the CSV default, else null.
  json get(const std::string& section, const std::string& key) const {
    auto it = j_.values.find(section + "|" + key);
    if (it != j_.values.end()) return it->second;
    std::string csv_section = section;
    if (head() && section == "activation_checkpoint" && j_.variant != "selective")
      csv_section += " {variant " + j_.variant + "}";
    const FrameworkData::TitanField* f = data_.titan_field(j_.version, csv_section, key);
    return f ? csv_default(f->default_value, f->type) : json();
  }
  int64_t geti(const std::string& section, const std::string& key, int64_t fallback) const {
    const json v = get(section, key);
    return v.is_number_integer() ? v.get<int64_t>() : fallback;
  }
  bool getb(const std::string& section, const std::string& key) const {
    const json v = get(section, key);
    return v.is_boolean() && v.get<bool>();
  }
  std::string gets(const std::string& section, const std::string& key) const {
    const json v = get(section, key);
    return v.is_string() ? v.get<std::string>() : "";
  }
  bool given(const std::string& section, const std::string& key) const {
    return j_.values.count(section + "|" + key) > 0;
  }

  // The mesh: degrees, world size, DDP (section 2 of torchtitan_rules.md).
  CheckResult degrees() {
    const std::string p = "parallelism";
    rep_ = geti(p, "data_parallel_replicate_degree", 1);
    shard_ = geti(p, "data_parallel_shard_degree", -1);
    tp_ = geti(p, "tensor_parallel_degree", 1);
    pp_ = geti(p, "pipeline_parallel_degree", 1);
    cp_ = geti(p, "context_parallel_degree", 1);
    ep_ = geti(p, "expert_parallel_degree", 1);
    etp_ = geti(p, "expert_tensor_parallel_degree", 1);
    for (int64_t d : {rep_, tp_, pp_, cp_, ep_, etp_})
      if (d < 1) return fail("tt-degree", "parallel degrees other than data_parallel_shard_degree must be >= 1");
    if (shard_ < 1 && shard_ != -1) return fail("tt-degree", "data_parallel_shard_degree must be >= 1 or -1");
    world_ = world_of(j_.comments);
    if (world_ <= 0) return fail("header", "no \"for N GPUs\" in the header comment");
    const int64_t others = rep_ * tp_ * pp_ * cp_;
    if (shard_ == -1 && world_ % others == 0) shard_ = world_ / others;
    if (shard_ == -1 || rep_ * shard_ * tp_ * pp_ * cp_ != world_)
      return fail("tt-world", "replicate x shard x tp x pp x cp does not make the world size " + str(world_));
    dp_ = rep_ * shard_;
    if (rep_ > 1 && shard_ == 1 && (tp_ > 1 || cp_ > 1 || pp_ > 1 || ep_ > 1))
      return fail("tt-ddp", "DDP (data_parallel_replicate_degree " + str(rep_) + ") with other parallelism");
    return CheckResult::pass();
  }

  // Expert parallelism: borrowed from dp_shard x cp x tp.
  CheckResult experts() const {
    if (j_.version == "v0.2.2") {
      if (ep_ > 1 && etp_ != 1 && etp_ != tp_)
        return fail("tt-ep", "expert_tensor_parallel_degree " + str(etp_) + " must be 1 or tp " + str(tp_));
      if ((shard_ * cp_ * tp_) % (etp_ * ep_) != 0)
        return fail("tt-ep", "dp_shard x cp x tp = " + str(shard_ * cp_ * tp_) + " is not divisible by etp x ep");
      if (gets("parallelism", "expert_parallel_comm_backend") == "deepep" && (ep_ < 2 || etp_ != 1))
        return fail("tt-ep", "the deepep backend needs ep > 1 and etp 1");
    }
    if (head() && (shard_ * cp_ * tp_) % ep_ != 0)
      return fail("tt-ep", "ep " + str(ep_) + " does not divide dp_shard x cp x tp = " + str(shard_ * cp_ * tp_));
    return CheckResult::pass();
  }

  // Section 3: sequences (v0.1.0, v0.2.2) or token budgets (HEAD).
  CheckResult batch() const {
    if (head()) return tokens();
    const int64_t local = geti("training", "local_batch_size", 0), global = geti("training", "global_batch_size", -1);
    if (local < 1) return fail("tt-batch", "local_batch_size must be >= 1");
    if (global != -1 && (global < local * dp_ || global % (local * dp_) != 0))
      return fail("tt-batch", "global_batch_size " + str(global) + " is not a multiple of local_batch_size " +
                                  str(local) + " x dp " + str(dp_));
    const int64_t micro = geti("parallelism", "pipeline_parallel_microbatch_size", 1);
    if (pp_ > 1 && (micro < 1 || local % micro != 0))
      return fail("tt-pp-microbatch", "pipeline_parallel_microbatch_size " + str(micro) +
                                          " does not divide local_batch_size " + str(local));
    const int64_t seq = geti("training", "seq_len", 0);
    if (j_.version == "v0.2.2" && seq % (2 * tp_ * cp_) != 0)
      return fail("tt-seq-len", "seq_len " + str(seq) + " is not divisible by 2 x tp x cp = " + str(2 * tp_ * cp_));
    return CheckResult::pass();
  }

  CheckResult tokens() const {
    const int64_t mb = geti("training", "num_tokens_per_microbatch_per_dp_rank", 0);
    const bool sp = getb("parallelism", "enable_sequence_parallel");
    const int64_t unit = (sp ? tp_ : 1) * (cp_ > 1 ? 2 * cp_ : 1);
    if (mb <= 0 || mb % unit != 0)
      return fail("tt-tokens", "num_tokens_per_microbatch_per_dp_rank " + str(mb) + " is not a positive multiple of " +
                                   str(unit));
    const int64_t micro = geti("parallelism", "num_pp_microbatches", 1);
    if (micro <= 0) return fail("tt-tokens", "num_pp_microbatches must be > 0");
    const int64_t step = geti("training", "num_tokens_per_train_step", -1), per = mb * (pp_ > 1 ? micro : 1) * dp_;
    if (step != -1 && (step < per || step % per != 0))
      return fail("tt-tokens", "num_tokens_per_train_step " + str(step) + " is not a multiple of " + str(per));
    return CheckResult::pass();
  }

  // Section 4: pipeline_parallel_layers_per_stage and the schedule; sets stages_ (0: unknown).
  CheckResult stages() {
    if (head() && pp_ > 1 && !getb("training", "disable_cuda_graphs"))
      return fail("tt-cuda-graphs", "pp > 1 needs training.disable_cuda_graphs at TorchTitan main");
    const std::string schedule = gets("parallelism", "pipeline_parallel_schedule");
    static const std::vector<std::string> single = {"1F1B", "GPipe"};
    static const std::vector<std::string> multi = {"Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble",
                                                   "ZBVZeroBubble", "DualPipeV"};
    if (!contains(single, schedule) && !contains(multi, schedule))
      return fail("tt-schedule", "unknown pipeline_parallel_schedule " + schedule);
    multi_ = contains(multi, schedule);
    if (pp_ < 2) return stages_ = 1, CheckResult::pass();
    const json per_stage = get("parallelism", "pipeline_parallel_layers_per_stage");
    const auto n = cfg_int(c_, "num_layers");
    if (per_stage.is_null()) return stages_ = pp_ * (multi_ ? 2 : 1), CheckResult::pass();
    const int64_t l = per_stage.get<int64_t>();
    if (l < 1) return fail("tt-pp-stages", "pipeline_parallel_layers_per_stage must be >= 1");
    if (!n) return CheckResult::pass();  // the model's depth is not in the export
    int64_t count = 0;
    if (j_.version == "v0.1.0") {
      const int64_t eff = *n + 2;
      if (eff % pp_ != 0 || (eff / pp_) % l != 0)
        return fail("tt-pp-stages", str(eff) + " layers (with embedding and output) do not fit pp " + str(pp_) +
                                        " ranks of stages of " + str(l) + " exactly (v0.1.0)");
      count = eff / l;
    } else {
      const int64_t first = geti("parallelism", "pipeline_parallel_first_stage_less_layers", 1);
      const int64_t last = geti("parallelism", "pipeline_parallel_last_stage_less_layers", 1);
      const int64_t eff = *n + first + last;
      count = (eff + l - 1) / l;
      if (count % pp_ != 0)
        return fail("tt-pp-stages", "ceil(" + str(eff) + " / " + str(l) + ") = " + str(count) +
                                        " stages is not a multiple of pp " + str(pp_));
      if (count > eff || first > eff / count || last > eff / count)
        return fail("tt-pp-stages", "the split generator refuses " + str(count) + " stages of " + str(eff) + " layers");
    }
    const int64_t per_rank = count / pp_;
    if (multi_ ? per_rank < 2 : per_rank != 1)
      return fail("tt-pp-stages", str(per_rank) + " stages per rank with the " + schedule + " schedule (" +
                                      (multi_ ? "needs >= 2" : "needs exactly 1") + ")");
    stages_ = count;
    return CheckResult::pass();
  }

  // Section 5: converter names and the float8 options per version.
  CheckResult float8() const {
    if (head()) return CheckResult::pass();  // no converters on the command line at HEAD
    const std::vector<std::string> names =
        j_.version == "v0.1.0" ? std::vector<std::string>{"float8", "mx"}
                               : std::vector<std::string>{"quantize.linear.float8", "quantize.grouped_mm.float8",
                                                          "quantize.linear.mx", "quantize.grouped_mm.mx"};
    const json converters = get("model", "converters");
    for (const json& c : converters.is_array() ? converters : json::array())
      if (!contains(names, c.get<std::string>()))
        return fail("tt-float8", "model.converters \"" + c.get<std::string>() + "\" is not a converter of TorchTitan " +
                                     j_.version + " (" + join(names, ", ") + ")");
    const std::string table = j_.version == "v0.1.0" ? "float8" : "quantize.linear.float8";
    if (!get(table, "recipe_name").is_null() &&
        (getb(table, "enable_fsdp_float8_all_gather") || getb(table, "force_recompute_fp8_weight_in_bwd")))
      return fail("tt-float8", "a float8 recipe_name with enable_fsdp_float8_all_gather or "
                               "force_recompute_fp8_weight_in_bwd");
    return CheckResult::pass();
  }

  // Section 7: activation checkpointing.
  CheckResult checkpointing() const {
    const std::string mode = head() ? j_.variant : gets("activation_checkpoint", "mode");
    const bool compiled = j_.version == "v0.1.0" ? getb("training", "compile") : getb("compile", "enable");
    if ((mode == "memory_budget" || mode == "memory-budget") && !compiled)
      return fail("tt-memory-budget", "the memory budget activation checkpointing needs compile");
    if (!head() && mode == "selective") {
      const std::string option = gets("activation_checkpoint", "selective_ac_option");
      const auto every = parse_int(option);
      if (option != "op" && (!every || *every < 1))
        return fail("tt-ac", "selective_ac_option \"" + option + "\" is neither \"op\" nor a positive integer");
    }
    return CheckResult::pass();
  }

  // Async tensor parallelism needs the model compiled.
  CheckResult async_tp() const {
    const bool async = head() ? getb("compile", "enable_async_tensor_parallel")
                              : getb("parallelism", "enable_async_tensor_parallel");
    if (!async) return CheckResult::pass();
    if (j_.version == "v0.1.0") {
      if (!getb("training", "compile")) return fail("tt-async-tp", "async TP needs training.compile");
      return CheckResult::pass();
    }
    const json components = get("compile", "components");
    if (!getb("compile", "enable") || !components.is_array() || !contains(components.get<std::vector<std::string>>(), "model"))
      return fail("tt-async-tp", "async TP needs compile.enable with \"model\" in compile.components");
    return CheckResult::pass();
  }

  CheckResult consistency() const {
    if (!c_.is_object()) return CheckResult::pass();
    return first_failure({[&] { return consistency_mesh(); }, [&] { return consistency_zero(); },
                          [&] { return consistency_batch(); }, [&] { return consistency_pipeline(); },
                          [&] { return consistency_recompute(); }});
  }

  CheckResult consistency_mesh() const {
    return first_failure({[&] { return agree("the world size", world_, cfg_int(c_, "gpus")); },
                          [&] { return agree("tp", tp_, cfg_int(c_, "tp")); },
                          [&] { return agree("pp", pp_, cfg_int(c_, "pp")); },
                          [&] { return agree("cp", cp_, cfg_int(c_, "cp")); },
                          [&] { return agree("dp (replicate x shard)", dp_, cfg_int(c_, "dp")); },
                          [&] {
                            if (j_.version == "v0.1.0" && cfg_int(c_, "ep").value_or(1) > 1)
                              return fail("consistency", "TorchTitan v0.1.0 has no expert parallelism");
                            return agree("ep", ep_, cfg_int(c_, "ep"));
                          },
                          [&] {
                            // TorchTitan's etp defaults to 1; the configuration's 0 means tp.
                            const int64_t etp = cfg_int(c_, "etp").value_or(0), want = etp > 0 ? etp : tp_;
                            if (ep_ < 2 || j_.version == "v0.1.0") return CheckResult::pass();
                            if (head() && want != 1) return fail("consistency", "etp " + str(want) + " at TorchTitan main (only 1)");
                            return head() ? CheckResult::pass() : agree("etp", etp_, want);
                          },
                          [&] {
                            auto sp = cfg_bool(c_, "sp");
                            if (!sp || tp_ < 2) return CheckResult::pass();
                            const bool exported = head() ? getb("parallelism", "enable_sequence_parallel") : true;
                            if (exported == *sp) return CheckResult::pass();
                            return fail("consistency", std::string("sequence parallelism is ") + (exported ? "on" : "off") +
                                                           " in the export but sp is " + (*sp ? "true" : "false"));
                          }});
  }

  // zero 0 = DDP, 2 = FSDP keeping the gathered weights, 3 = FSDP; 1 does not exist in TorchTitan.
  // cotune shards over dp x cp ranks; TorchTitan's FSDP group is dp_shard x cp, except at HEAD with
  // the default spmd_types backend, where it is dp_shard alone (torchtitan_rules.md section 2).
  CheckResult consistency_zero() const {
    auto zero = cfg_int(c_, "zero");
    if (!zero) return CheckResult::pass();
    const int64_t group = cfg_int(c_, "dp").value_or(dp_) * cfg_int(c_, "cp").value_or(cp_);
    const bool cp_shards = !head() || gets("parallelism", "spmd_backend") == "partial_dtensor";
    const int64_t fsdp = shard_ * (cp_shards ? cp_ : 1);
    std::string reshard = gets("parallelism", "fsdp_reshard_after_forward");
    // "default" frees the gathered weights after the forward only without a pipeline.
    if (reshard.empty() || reshard == "default") reshard = pp_ > 1 ? "never" : "always";
    const std::string have = "replicate " + str(rep_) + ", shard " + str(shard_) + ", FSDP over " + str(fsdp) +
                             " ranks, fsdp_reshard_after_forward " + reshard;
    if (*zero == 1 && group > 1)
      return fail("consistency", "zero 1 (optimizer-only sharding over dp x cp = " + str(group) +
                                     " ranks) does not exist in TorchTitan; the export has " + have);
    if (*zero <= 1 && (rep_ != dp_ || shard_ != 1 || fsdp != 1))
      return fail("consistency", "zero " + str(*zero) + " keeps whole weights on every rank, but the export has " + have);
    if (*zero >= 2 && (rep_ != 1 || shard_ != dp_ || fsdp != group || (fsdp > 1 && (reshard == "never") != (*zero == 2))))
      return fail("consistency", "zero " + str(*zero) + " shards over dp x cp = " + str(group) + " ranks" +
                                     (*zero == 2 ? " keeping the gathered weights" : "") + ", but the export has " + have);
    return CheckResult::pass();
  }

  CheckResult consistency_batch() const {
    const auto micro = cfg_int(c_, "micro_batch"), global = cfg_int(c_, "global_batch"), seq = cfg_int(c_, "seq_len");
    if (head()) {
      const int64_t mb = geti("training", "num_tokens_per_microbatch_per_dp_rank", 0);
      const int64_t pp_micro = pp_ > 1 ? geti("parallelism", "num_pp_microbatches", 1) : 1;
      int64_t step = geti("training", "num_tokens_per_train_step", -1);
      if (step == -1) step = mb * pp_micro * dp_;
      return first_failure({[&] { return seq && micro ? agree("tokens per micro-batch", mb, *micro * *seq) : CheckResult::pass(); },
                            [&] { return seq && global ? agree("tokens per step", step, *global * *seq) : CheckResult::pass(); },
                            [&] { return agree("max_context_length", geti("training", "max_context_length", 0), seq); }});
    }
    const int64_t local = geti("training", "local_batch_size", 0);
    int64_t g = geti("training", "global_batch_size", -1);
    if (g == -1) g = local * dp_;
    // The sequences of one forward: the local batch, or with a pipeline one of its micro-batches.
    const int64_t forward = pp_ > 1 ? geti("parallelism", "pipeline_parallel_microbatch_size", 1) : local;
    return first_failure({[&] { return agree("the micro-batch (sequences per forward)", forward, micro); },
                          [&] { return agree("the global batch", g, global); },
                          [&] { return agree("seq_len", geti("training", "seq_len", 0), seq); }});
  }

  CheckResult consistency_pipeline() const {
    if (cfg_int(c_, "first_stage_layers").value_or(0) > 0 || cfg_int(c_, "last_stage_layers").value_or(0) > 0)
      return fail("consistency", "uneven first/last stages cannot be expressed in TorchTitan");
    const auto vpp = cfg_int(c_, "vpp");
    if (!vpp || pp_ < 2) return CheckResult::pass();
    if ((*vpp > 1) != multi_)
      return fail("consistency", "vpp " + str(*vpp) + " with the " + gets("parallelism", "pipeline_parallel_schedule") +
                                     " schedule");
    if (stages_ > 0 && stages_ != pp_ * *vpp)
      return fail("consistency", "the export makes " + str(stages_) + " pipeline stages, not pp x vpp = " + str(pp_ * *vpp));
    return CheckResult::pass();
  }

  CheckResult consistency_recompute() const {
    auto recompute = cfg_str(c_, "recompute");
    if (!recompute) return CheckResult::pass();
    const std::string mode = head() ? j_.variant : gets("activation_checkpoint", "mode");
    if (mode != *recompute)
      return fail("consistency", "recompute " + *recompute + " but activation checkpointing is " + mode);
    return CheckResult::pass();
  }

  const FrameworkData& data_;
  const TitanJob& j_;
  const json& c_;
  int64_t rep_ = 1, shard_ = 1, tp_ = 1, pp_ = 1, cp_ = 1, ep_ = 1, etp_ = 1, dp_ = 1, world_ = 0, stages_ = 0;
  bool multi_ = false;
};

CheckResult check_torchtitan(const FrameworkData& data, const std::string& version, const std::string& text,
                             const json& config) {
  TitanJob job;
  job.version = version == "main" ? "HEAD" : version;
  CheckResult r = job.version == "HEAD" ? parse_titan_cli(data, text, &job) : parse_titan_toml(data, text, &job);
  if (!r.ok) return r;
  r = check_header(job.comments, "TorchTitan", version, data.commit("torchtitan", job.version));
  if (!r.ok) return r;
  return TitanCheck(data, job, config).run();
}

}  // namespace

// ---- Megatron-Bridge (NeMo) -----------------------------------------------------------------------

namespace {

// The Python types of the section 2 fields: "int", "bool", "none" (only None: the real value is not
// a literal), "str:a|b" (choices), "strs" (list of str), "ints", "layout" (str or list of lists),
// "str-or-strs", "preset"; "?" allows None. Fields missing here accept any literal.
const std::map<std::string, std::string>& nemo_types() {
  static const std::map<std::string, std::string> types = {
      {"cfg.model.tensor_model_parallel_size", "int"},
      {"cfg.model.pipeline_model_parallel_size", "int"},
      {"cfg.model.virtual_pipeline_model_parallel_size", "int?"},
      {"cfg.model.pipeline_dtype", "none?"},
      {"cfg.model.microbatch_group_size_per_vp_stage", "int?"},
      {"cfg.model.sequence_parallel", "bool"},
      {"cfg.model.context_parallel_size", "int"},
      {"cfg.model.hierarchical_context_parallel_sizes", "ints?"},
      {"cfg.model.expert_model_parallel_size", "int"},
      {"cfg.model.expert_tensor_parallel_size", "int?"},
      {"cfg.model.tp_comm_overlap", "bool"},
      {"cfg.model.num_layers_in_first_pipeline_stage", "int?"},
      {"cfg.model.num_layers_in_last_pipeline_stage", "int?"},
      {"cfg.model.pipeline_model_parallel_layout", "layout?"},
      {"cfg.model.account_for_embedding_in_pipeline_split", "bool"},
      {"cfg.model.account_for_loss_in_pipeline_split", "bool"},
      {"cfg.model.recompute_granularity", "str?:full|selective"},
      {"cfg.model.recompute_method", "str?:uniform|block"},
      {"cfg.model.recompute_num_layers", "int?"},
      {"cfg.model.recompute_modules", "strs?"},
      {"cfg.model.cp_comm_type", "str-or-strs?"},
      {"cfg.model.moe_token_dispatcher_type", "str:allgather|alltoall|flex"},
      {"cfg.model.moe_flex_dispatcher_backend", "str:deepep|hybridep|ncclep"},
      {"cfg.model.overlap_moe_expert_parallel_comm", "bool"},
      {"cfg.model.seq_length", "int"},
      {"cfg.train.micro_batch_size", "int?"},
      {"cfg.train.global_batch_size", "int?"},
      {"cfg.train.rampup_batch_size", "ints?"},
      {"cfg.train.decrease_batch_size_if_needed", "bool"},
      {"cfg.ddp.use_distributed_optimizer", "bool"},
      {"cfg.ddp.overlap_grad_reduce", "bool"},
      {"cfg.ddp.overlap_param_gather", "bool"},
      {"cfg.ddp.num_distributed_optimizer_instances", "int"},
      {"cfg.ddp.use_megatron_fsdp", "bool"},
      {"cfg.ddp.data_parallel_sharding_strategy", "str:no_shard|optim|optim_grads|optim_grads_params"},
      {"cfg.optimizer.use_distributed_optimizer", "bool"},
      {"cfg.optimizer.overlap_param_gather_with_optimizer_step", "bool"},
      {"cfg.mixed_precision", "preset?"},
      {"cfg.comm_overlap", "none?"},
      {"cfg.dataset.seq_length", "int"},
  };
  return types;
}

// What _pretrain_common sets before a recipe body runs (nemo_recipe_fields.md section 1).
const std::map<std::string, json>& nemo_recipe_defaults() {
  static const std::map<std::string, json> d = {{"cfg.ddp.use_distributed_optimizer", true},
                                                {"cfg.ddp.overlap_grad_reduce", true},
                                                {"cfg.ddp.overlap_param_gather", true},
                                                {"cfg.ddp.data_parallel_sharding_strategy", "optim_grads_params"}};
  return d;
}

CheckResult check_nemo_type(const std::string& path, const json& v, const std::set<std::string>& presets) {
  auto it = nemo_types().find(path);
  if (it == nemo_types().end()) return CheckResult::pass();
  std::string base = it->second;
  std::vector<std::string> choices;
  if (base.find(':') != std::string::npos) {
    choices = split(base.substr(base.find(':') + 1), '|');
    base = base.substr(0, base.find(':'));
  }
  const bool optional = ends_with(base, "?");
  if (optional) base.pop_back();
  if (optional && v.is_null()) return CheckResult::pass();
  const auto ints = [](const json& x) {
    return x.is_array() && std::all_of(x.begin(), x.end(), [](const json& i) { return i.is_number_integer(); });
  };
  const bool ok = base == "int"    ? v.is_number_integer()
                  : base == "bool" ? v.is_boolean()
                  : base == "none" ? v.is_null()
                  : base == "str"  ? v.is_string()
                  : base == "strs" ? string_list(v)
                  : base == "ints" ? ints(v)
                  : base == "layout"      ? v.is_string() || (v.is_array() && std::all_of(v.begin(), v.end(), string_list))
                  : base == "str-or-strs" ? v.is_string() || string_list(v)
                  : base == "preset"      ? v.is_string()
                                          : true;
  const std::string what = path + " = " + python_literal(v);
  if (!ok) return fail("type", what + ": expected " + it->second);
  if (!choices.empty() && !contains(choices, v.get<std::string>()))
    return fail("choices", what + ": not one of " + join(choices, ", "));
  if (base == "preset" && !presets.count(v.get<std::string>()))
    return fail("choices", what + ": not a mixed-precision preset (" +
                               join({presets.begin(), presets.end()}, ", ") + ")");
  return CheckResult::pass();
}

struct NemoScript {
  std::vector<std::string> comments;
  std::map<std::string, json> fields;
};

// nemo_recipe_fields.md: a preset named by string through get_mixed_precision_config returns the
// MixedPrecisionConfig, whose grad_reduce_in_fp32 the perf recipes set to False (bf16 gradients).
constexpr const char* kMixedPrecisionImport = "from megatron.bridge.training.mixed_precision import get_mixed_precision_config";
// Tensor-parallel overlap is a CommOverlapConfig object (nemo_recipe_fields.md section 2, cfg.comm_overlap).
constexpr const char* kCommOverlapImport = "from megatron.bridge.training.comm_overlap import CommOverlapConfig";

const std::map<std::string, std::string>& mixed_precision_fields() {
  static const std::map<std::string, std::string> f = {{"cfg.mixed_precision.grad_reduce_in_fp32", "bool"}};
  return f;
}

CheckResult parse_nemo(const FrameworkData& data, const std::string& text, NemoScript* out) {
  static const std::regex assign_re("    (cfg(\\.[A-Za-z_][A-Za-z0-9_]*)+) = (.+)");
  static const std::regex preset_call_re("get_mixed_precision_config\\(\"([a-z0-9_]+)\"\\)");
  static const std::regex comm_overlap_re("CommOverlapConfig\\(tp_comm_overlap=(True|False)\\)");
  enum { kBefore, kBody, kAfter } state = kBefore;
  bool imported = false, precision_object = false, comm_imported = false;
  int n = 0;
  for (const std::string& line : lines_of(text)) {
    const std::string t = trim(line), at = "line " + std::to_string(++n) + ": ";
    std::smatch m, call;
    std::string value;
    if (t.empty()) continue;
    if (t[0] == '#') {
      out->comments.push_back(t);
    } else if (state == kBefore && line == kMixedPrecisionImport) {
      imported = true;
    } else if (state == kBefore && line == kCommOverlapImport) {
      comm_imported = true;
    } else if (state == kBody && std::regex_match(line, m, assign_re) && m[1].str() == "cfg.comm_overlap" &&
               std::regex_match(value = m[3].str(), call, comm_overlap_re)) {
      if (!comm_imported) return fail("format", at + "CommOverlapConfig is called but not imported");
      if (!out->fields.emplace("cfg.comm_overlap.tp_comm_overlap", call[1].str() == "True").second)
        return fail("duplicate", at + "cfg.comm_overlap is set twice");
    } else if (state == kBody && std::regex_match(line, m, assign_re) && m[1].str() == "cfg.mixed_precision" &&
               std::regex_match(value = m[3].str(), call, preset_call_re)) {
      if (!imported) return fail("format", at + "get_mixed_precision_config is called but not imported");
      if (!data.nemo_presets().count(call[1].str()))
        return fail("choices", at + "get_mixed_precision_config(\"" + call[1].str() + "\"): not a mixed-precision preset");
      if (!out->fields.emplace("cfg.mixed_precision", call[1].str()).second)
        return fail("duplicate", at + "cfg.mixed_precision is set twice");
      precision_object = true;
    } else if (state == kBody && std::regex_match(line, m, assign_re) && mixed_precision_fields().count(m[1].str())) {
      const std::string path = m[1].str();
      if (!precision_object)
        return fail("format", at + path + " needs cfg.mixed_precision to be a MixedPrecisionConfig (a preset string "
                                          "has no fields: get_mixed_precision_config)");
      json v;
      try {
        v = parse_literal(m[3].str(), LiteralParser::Syntax::kPython);
      } catch (const std::invalid_argument& e) {
        return fail("format", at + e.what());
      }
      if (!v.is_boolean()) return fail("type", at + path + ": expected bool");
      if (!out->fields.emplace(path, v).second) return fail("duplicate", at + path + " is set twice");
    } else if (state == kBefore && line == "def apply_cotune(cfg):") {
      state = kBody;
    } else if (state == kBody && line == "    return cfg") {
      state = kAfter;
    } else if (state == kBody && std::regex_match(line, m, assign_re)) {
      const std::string path = m[1].str();
      if (!data.nemo_fields().count(path))
        return fail("field", at + path + " is not a recipe field of Megatron-Bridge (nemo_recipe_fields.md section 2)");
      json v;
      try {
        v = parse_literal(m[3].str(), LiteralParser::Syntax::kPython);
      } catch (const std::invalid_argument& e) {
        return fail("format", at + e.what());
      }
      CheckResult r = check_nemo_type(path, v, data.nemo_presets());
      if (!r.ok) return r;
      if (!out->fields.emplace(path, v).second) return fail("duplicate", at + path + " is set twice");
    } else {
      return fail("format", at + "not a comment, the def line, a cfg assignment or the return: " + line);
    }
  }
  if (state != kAfter) return fail("format", "no complete def apply_cotune(cfg): ... return cfg");
  return CheckResult::pass();
}

// A class default as written in the md ("1", "None (= PP)", "False", "\"allgather\"").
json nemo_class_default(const std::string& d) {
  if (starts_with(d, "None")) return nullptr;
  if (starts_with(d, "\"")) return d.substr(1, d.find('"', 1) - 1);
  return csv_default(d, "");
}

class NemoCheck {
 public:
  NemoCheck(const FrameworkData& data, const NemoScript& s, const json& config) : data_(data), s_(s), c_(config) {}

  CheckResult run() {
    return first_failure({[&] { return grid(); }, [&] { return pipeline(); }, [&] { return recompute(); },
                          [&] { return batch(); }, [&] { return optimizer(); }, [&] { return consistency(); }});
  }

 private:
  static std::string m(const std::string& field) { return "cfg.model." + field; }
  bool given(const std::string& path) const { return s_.fields.count(path) > 0; }
  // The value set, else what _pretrain_common sets, else the class default.
  json get(const std::string& path) const {
    if (auto it = s_.fields.find(path); it != s_.fields.end()) return it->second;
    if (auto it = nemo_recipe_defaults().find(path); it != nemo_recipe_defaults().end()) return it->second;
    auto it = data_.nemo_fields().find(path);
    return it == data_.nemo_fields().end() ? json() : nemo_class_default(it->second);
  }
  int64_t geti(const std::string& path, int64_t fallback) const {
    const json v = get(path);
    return v.is_number_integer() ? v.get<int64_t>() : fallback;
  }
  bool getb(const std::string& path) const {
    const json v = get(path);
    return v.is_boolean() && v.get<bool>();
  }

  // M01, M02, M08b, M16b.
  CheckResult grid() {
    world_ = world_of(s_.comments);
    tp_ = geti(m("tensor_model_parallel_size"), 1);
    pp_ = geti(m("pipeline_model_parallel_size"), 1);
    cp_ = geti(m("context_parallel_size"), 1);
    ep_ = geti(m("expert_model_parallel_size"), 1);
    etp_ = geti(m("expert_tensor_parallel_size"), tp_);
    for (int64_t d : {tp_, pp_, cp_, ep_, etp_})
      if (d < 1) return fail("type", "parallel sizes must be >= 1");
    if (world_ % (tp_ * pp_ * cp_) != 0)
      return fail("M01", "world size " + str(world_) + " is not a multiple of tp*pp*cp = " + str(tp_ * pp_ * cp_));
    dp_ = world_ / (tp_ * pp_ * cp_);
    if (world_ % (etp_ * ep_ * pp_) != 0)
      return fail("M02", "world size " + str(world_) + " is not a multiple of etp*ep*pp = " + str(etp_ * ep_ * pp_));
    if (getb(m("sequence_parallel")) && tp_ == 1) return fail("M08b", "sequence_parallel with tp 1 raises");
    // comm_overlap.py:442-451: Bridge drops tp_comm_overlap=True (with a warning) without TP and
    // sequence parallelism, so a model that assumed the overlap would be wrong.
    if (getb("cfg.comm_overlap.tp_comm_overlap") && (tp_ == 1 || !getb(m("sequence_parallel"))))
      return fail("M09", "comm_overlap.tp_comm_overlap needs tp > 1 and sequence_parallel (Bridge drops it)");
    const json vpp = get(m("virtual_pipeline_model_parallel_size"));
    vpp_ = vpp.is_number_integer() ? vpp.get<int64_t>() : 1;
    if (!vpp.is_null() && (vpp_ < 1 || pp_ <= 1))
      return fail("M16b", "virtual_pipeline_model_parallel_size " + vpp.dump() + " with pp " + str(pp_));
    return CheckResult::pass();
  }

  // M18, M18b, M20.
  CheckResult pipeline() const {
    const json first = get(m("num_layers_in_first_pipeline_stage")), last = get(m("num_layers_in_last_pipeline_stage"));
    const json layout = get(m("pipeline_model_parallel_layout"));
    const bool account = getb(m("account_for_embedding_in_pipeline_split")) || getb(m("account_for_loss_in_pipeline_split"));
    const bool uneven = !first.is_null() || !last.is_null();
    if (!layout.is_null() && (uneven || account))
      return fail("M20", "pipeline_model_parallel_layout with first/last stage or account_for fields");
    if (uneven && account) return fail("M18b", "first/last stage layers with account_for_*_in_pipeline_split");
    for (const json& v : {first, last}) {
      if (v.is_null()) continue;
      if (v.get<int64_t>() <= 0) return fail("M18", "first/last stage layer counts must be > 0");
      if (v.get<int64_t>() % vpp_ != 0)
        return fail("M18", "first/last stage layers " + v.dump() + " not divisible by vpp " + str(vpp_));
    }
    if (!layout.is_string()) return CheckResult::pass();
    std::vector<std::string> stages;
    try {
      stages = expand_pipeline_layout(layout.get<std::string>());
    } catch (const std::invalid_argument& e) {
      return fail("M20", std::string("pipeline_model_parallel_layout: ") + e.what());
    }
    const std::string all = join(stages, "");
    if (stages.size() % static_cast<size_t>(pp_) != 0 || std::count(all.begin(), all.end(), 'E') != 1 ||
        std::count(all.begin(), all.end(), 'L') != 1 || all.front() != 'E' || all.back() != 'L')
      return fail("M20", "pipeline_model_parallel_layout " + layout.dump() + ": stages a multiple of pp " + str(pp_) +
                             ", E first and L last, once each");
    const auto layers = cfg_int(c_, "num_layers");
    if (layers && std::count(all.begin(), all.end(), 't') != *layers)
      return fail("M20", "the layout's decoder layers do not add up to " + str(*layers));
    return CheckResult::pass();
  }

  // M54.
  CheckResult recompute() const {
    const json granularity = get(m("recompute_granularity"));
    const bool method = !get(m("recompute_method")).is_null(), layers = !get(m("recompute_num_layers")).is_null();
    if (granularity == "full" && (!method || !layers))
      return fail("M54", "full recompute needs recompute_method and recompute_num_layers");
    if (granularity != "full" && (method || layers))
      return fail("M54", "recompute_method/recompute_num_layers without full recomputation");
    const json modules = get(m("recompute_modules"));
    if (modules.is_null()) return CheckResult::pass();
    if (granularity != "selective") return fail("M54", "recompute_modules without selective recomputation");
    for (const json& name : modules)
      if (!valid_recompute_module(name.get<std::string>(), true))
        return fail("M54", "recompute_modules: " + name.get<std::string>() + " is not a module Megatron-Core knows");
    return CheckResult::pass();
  }

  // M33, M37 and the dataset's sequence length.
  CheckResult batch() const {
    const std::string micro_path = "cfg.train.micro_batch_size", global_path = "cfg.train.global_batch_size";
    const int64_t micro = geti(micro_path, 0), global = geti(global_path, 0);
    if (given(micro_path) && micro <= 0) return fail("M32", "micro_batch_size must be > 0");
    if (given(micro_path) && given(global_path) && (global < micro * dp_ || global % (micro * dp_) != 0))
      return fail("M33", "global_batch_size " + str(global) + " is not a multiple of micro_batch_size " + str(micro) +
                             " x dp " + str(dp_));
    for (const std::string& path : {m("seq_length"), std::string("cfg.dataset.seq_length")})
      if (given(path) && cp_ > 1 && geti(path, 0) % (2 * cp_) != 0)
        return fail("M37", path + " " + str(geti(path, 0)) + " is not divisible by 2 x cp = " + str(2 * cp_));
    if (given(m("seq_length")) && given("cfg.dataset.seq_length") &&
        geti(m("seq_length"), 0) != geti("cfg.dataset.seq_length", 0))
      return fail("nemo-seq-length", "cfg.model.seq_length and cfg.dataset.seq_length differ");
    return CheckResult::pass();
  }

  // Section 3: the distributed optimizer pair (Bridge turns both on when either is), M26.
  CheckResult optimizer() const {
    const std::string ddp = "cfg.ddp.use_distributed_optimizer", opt = "cfg.optimizer.use_distributed_optimizer";
    if (given(ddp) && given(opt) && get(ddp) != get(opt))
      return fail("nemo-dist-opt", "ddp and optimizer use_distributed_optimizer differ; Bridge turns both on");
    const bool dist = getb(ddp) || getb(opt), fsdp = getb("cfg.ddp.use_megatron_fsdp");
    if (getb("cfg.ddp.overlap_param_gather") && (!(dist || fsdp) || !getb("cfg.ddp.overlap_grad_reduce")))
      return fail("M26", "overlap_param_gather (on in the recipes) needs the distributed optimizer or Megatron-FSDP "
                         "and overlap_grad_reduce");
    return CheckResult::pass();
  }

  CheckResult consistency() const {
    if (!c_.is_object()) return CheckResult::pass();
    return first_failure({[&] { return consistency_layout(); }, [&] { return consistency_batch(); },
                          [&] { return consistency_memory(); }});
  }

  // A field the recipe also sets must be written, or the recipe's value would apply.
  CheckResult written(const std::string& path) const {
    return given(path) ? CheckResult::pass()
                       : fail("consistency", path + " is not set: the recipe's own value would apply");
  }

  CheckResult consistency_layout() const {
    const auto vpp = cfg_int(c_, "vpp");
    return first_failure(
        {[&] { return agree("the world size", world_, cfg_int(c_, "gpus")); },
         [&] { return written(m("tensor_model_parallel_size")); }, [&] { return agree("tp", tp_, cfg_int(c_, "tp")); },
         [&] { return written(m("pipeline_model_parallel_size")); }, [&] { return agree("pp", pp_, cfg_int(c_, "pp")); },
         [&] { return written(m("context_parallel_size")); }, [&] { return agree("cp", cp_, cfg_int(c_, "cp")); },
         [&] {
           // A dense model's recipe leaves EP at 1; an MoE recipe sets its own.
           const bool moe = cfg_int(c_, "num_experts").value_or(0) > 0 || cfg_int(c_, "ep").value_or(1) > 1;
           return moe ? written(m("expert_model_parallel_size")) : CheckResult::pass();
         },
         [&] { return agree("ep", ep_, cfg_int(c_, "ep")); },
         [&] { return agree("dp (world / tp pp cp)", dp_, cfg_int(c_, "dp")); },
         [&] { return written(m("virtual_pipeline_model_parallel_size")); },
         [&] {
           const json v = get(m("virtual_pipeline_model_parallel_size"));
           if (!vpp || (*vpp == 1 ? v.is_null() : v == *vpp)) return CheckResult::pass();
           return fail("consistency", "virtual_pipeline_model_parallel_size " + python_literal(v) + " for vpp " + str(*vpp));
         },
         [&] { return written(m("sequence_parallel")); },
         [&] {
           auto sp = cfg_bool(c_, "sp");
           if (!sp || *sp == getb(m("sequence_parallel"))) return CheckResult::pass();
           return fail("consistency", "sequence_parallel differs from sp");
         },
         [&] {
           const int64_t etp = cfg_int(c_, "etp").value_or(0);
           return ep_ > 1 ? agree("etp", etp_, etp > 0 ? etp : tp_) : CheckResult::pass();
         },
         [&] {
           const int64_t first = cfg_int(c_, "first_stage_layers").value_or(0);
           if (first <= 0 || pp_ < 2 || !given(m("num_layers_in_first_pipeline_stage"))) return CheckResult::pass();
           return agree("num_layers_in_first_pipeline_stage", geti(m("num_layers_in_first_pipeline_stage"), 0), first);
         }});
  }

  CheckResult consistency_batch() const {
    const auto seq = cfg_int(c_, "seq_len");
    return first_failure({[&] { return written("cfg.train.micro_batch_size"); },
                          [&] { return agree("micro_batch_size", geti("cfg.train.micro_batch_size", 0), cfg_int(c_, "micro_batch")); },
                          [&] { return written("cfg.train.global_batch_size"); },
                          [&] { return agree("global_batch_size", geti("cfg.train.global_batch_size", 0), cfg_int(c_, "global_batch")); },
                          [&] {
                            if (!seq) return CheckResult::pass();
                            for (const std::string& path : {m("seq_length"), std::string("cfg.dataset.seq_length")}) {
                              CheckResult r = given(path) ? agree(path, geti(path, 0), seq) : CheckResult::pass();
                              if (!r.ok) return r;
                            }
                            if (given(m("seq_length")) || given("cfg.dataset.seq_length")) return CheckResult::pass();
                            return fail("consistency", "the sequence length is not set");
                          }});
  }

  CheckResult consistency_memory() const {
    CheckResult r = CheckResult::pass();
    if (auto zero = cfg_int(c_, "zero")) {
      const bool ddp_dist = getb("cfg.ddp.use_distributed_optimizer");
      const bool dist = ddp_dist || getb("cfg.optimizer.use_distributed_optimizer");
      const bool fsdp = getb("cfg.ddp.use_megatron_fsdp");
      const json strategy = get("cfg.ddp.data_parallel_sharding_strategy");
      // zero 0: both switches off, since either one on turns the other on.
      const bool ok = *zero == 0   ? given("cfg.ddp.use_distributed_optimizer") &&
                                       given("cfg.optimizer.use_distributed_optimizer") && !dist && !fsdp
                      : *zero == 1 ? dist && !fsdp
                      : *zero == 2 ? fsdp && strategy == "optim_grads"
                                   : fsdp && strategy == "optim_grads_params";
      if (!ok)
        return fail("consistency", "zero " + str(*zero) + " is not what the export sets (distributed optimizer " +
                                       (dist ? "on" : "off") + ", Megatron-FSDP " + (fsdp ? strategy.dump() : "off") + ")");
    }
    auto recompute = cfg_str(c_, "recompute");
    if (!recompute) return r;
    if (!given(m("recompute_granularity"))) return written(m("recompute_granularity"));
    const json granularity = get(m("recompute_granularity"));
    const std::string have = granularity.is_null() ? "none" : granularity.get<std::string>();
    if (have != *recompute) return fail("consistency", "recompute " + *recompute + " but recompute_granularity is " + have);
    auto modules = cfg_str(c_, "recompute_modules");
    if (*recompute != "selective" || !modules || modules->empty()) return r;
    std::vector<std::string> want = split(*modules, ','), got = {"core_attn"};
    if (get(m("recompute_modules")).is_array()) got = get(m("recompute_modules")).get<std::vector<std::string>>();
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    if (want != got) return fail("consistency", "recompute_modules " + *modules + " but the export has " + join(got, ","));
    return r;
  }

  const FrameworkData& data_;
  const NemoScript& s_;
  const json& c_;
  int64_t world_ = 0, tp_ = 1, pp_ = 1, cp_ = 1, ep_ = 1, etp_ = 1, dp_ = 1, vpp_ = 1;
};

CheckResult check_nemo(const FrameworkData& data, const std::string& text, const json& config) {
  NemoScript s;
  CheckResult r = parse_nemo(data, text, &s);
  if (!r.ok) return r;
  r = check_header(s.comments, "Megatron-Bridge", "main", data.commit("nemo", "main"));
  if (!r.ok) return r;
  return NemoCheck(data, s, config).run();
}

}  // namespace

// ---- DeepSpeed ------------------------------------------------------------------------------------

namespace {

// Whether a JSON value fits a CSV type ("int", "bool | None", "object | bool", "Path | None", a
// config class name = an object).
bool deepspeed_type_ok(const std::string& type, const json& v) {
  for (const std::string& alt : split(type, '|')) {
    const std::string t = trim(alt);
    if ((t == "None" && v.is_null()) || (t == "int" && v.is_number_integer()) || (t == "float" && v.is_number()) ||
        (t == "bool" && v.is_boolean()) || ((t == "str" || t == "Path" || t == "torch.dtype") && v.is_string()) ||
        (t == "tuple" && v.is_array()) || ((t == "object" || starts_with(t, "dict[")) && v.is_object()) ||
        (!t.empty() && std::isupper(static_cast<unsigned char>(t[0])) && t != "None" && t != "Path" && v.is_object()))
      return true;
  }
  return false;
}

// allowed_values: "0 | 1 | 2 | 3", "fp16 | bf16 | fp32", "> 0", ">= 0.0; <= 1.0", ">= 0 (0 disables)".
CheckResult deepspeed_allowed(const FrameworkData::DeepSpeedKey& k, const json& v) {
  const std::string& a = k.allowed;
  const std::string what = k.key + " = " + v.dump();
  if (a.empty() || v.is_null() || starts_with(a, "a ")) return CheckResult::pass();
  if (a[0] == '>' || a[0] == '<') {
    if (!v.is_number()) return CheckResult::pass();
    const double x = v.get<double>();
    for (const std::string& cond : split(a, ';')) {
      std::istringstream in(trim(cond));
      std::string op;
      double bound = 0;
      in >> op >> bound;
      const bool ok = op == ">" ? x > bound : op == ">=" ? x >= bound : op == "<" ? x < bound : x <= bound;
      if (!ok) return fail("choices", what + ": must be " + a);
    }
    return CheckResult::pass();
  }
  std::vector<std::string> choices;
  for (const std::string& c : split(a, '|')) choices.push_back(trim(c));
  const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (!contains(choices, s)) return fail("choices", what + ": not one of " + a);
  return CheckResult::pass();
}

// Every key a row of the CSV (objects with rows below them are walked), with its type and values.
CheckResult check_deepspeed_keys(const FrameworkData& data, const std::string& version, const json& obj,
                                 const std::string& prefix) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    // DeepSpeed ignores unknown top-level keys; cotune's export keeps there what a ds_config cannot
    // say (pipeline stages, activation checkpointing). Any other unknown key is a typo.
    if (prefix.empty() && it.key() == "cotune") continue;
    // The legacy section name "bfloat16" is read when "bf16" is absent.
    const std::string name = prefix.empty() && it.key() == "bfloat16" && !obj.contains("bf16") ? "bf16" : it.key();
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    const FrameworkData::DeepSpeedKey* k = data.deepspeed_key(path);
    if (it.value().is_object() && data.deepspeed_section(path)) {
      if (k && !deepspeed_type_ok(k->type, it.value())) return fail("type", path + ": expected " + k->type);
      CheckResult r = check_deepspeed_keys(data, version, it.value(), path);
      if (!r.ok) return r;
      continue;
    }
    if (!k) return fail("key", path + " is not a ds_config key of DeepSpeed " + version);
    if (k->head_only && version != "master") return fail("key", path + " exists only at DeepSpeed master");
    if (!deepspeed_type_ok(k->type, it.value())) return fail("type", path + " = " + it.value().dump() + ": expected " + k->type);
    CheckResult r = deepspeed_allowed(*k, it.value());
    if (!r.ok) return r;
  }
  return CheckResult::pass();
}

// A value at a dotted path, or null.
json at_path(const json& j, const std::string& path) {
  const json* cur = &j;
  for (const std::string& part : split(path, '.')) {
    if (!cur->is_object() || !cur->contains(part)) return json();
    cur = &(*cur)[part];
  }
  return *cur;
}

class DeepSpeedCheck {
 public:
  DeepSpeedCheck(const json& ds, const json& config) : ds_(ds), c_(config) {}

  CheckResult run() {
    const json zero = ds_.value("zero_optimization", json::object());
    stage_ = zero.is_boolean() ? (zero.get<bool>() ? 1 : 0) : at_path(ds_, "zero_optimization.stage").is_number_integer()
                                                                  ? at_path(ds_, "zero_optimization.stage").get<int64_t>()
                                                                  : 0;
    tp_ = cfg_int(c_, "tp").value_or(1);
    pp_ = cfg_int(c_, "pp").value_or(1);
    cp_ = cfg_int(c_, "cp").value_or(1);
    return first_failure({[&] { return layout(); }, [&] { return batch(); }, [&] { return zero_rules(); },
                          [&] { return precision(); }, [&] { return consistency(); }});
  }

 private:
  bool on(const std::string& path) const {
    const json v = at_path(ds_, path);
    return v.is_boolean() && v.get<bool>();
  }

  // train_batch_size == micro x accumulation x dp, missing values derived by floor division.
  CheckResult batch() {
    const json b = at_path(ds_, "train_batch_size"), m = at_path(ds_, "train_micro_batch_size_per_gpu");
    const json g = at_path(ds_, "gradient_accumulation_steps");
    if (b.is_null() && m.is_null()) return fail("ds-batch", "neither train_batch_size nor train_micro_batch_size_per_gpu");
    for (const json& v : {b, m, g})
      if (!v.is_null() && v.get<int64_t>() <= 0) return fail("ds-batch", "batch values must be > 0");
    auto world = cfg_int(c_, "gpus");
    if (!world) return CheckResult::pass();  // the data-parallel size is unknown without the layout
    if (*world % (tp_ * pp_ * cp_) != 0) return fail("ds-batch", "gpus not divisible by tp x pp x cp");
    const int64_t dp = *world / (tp_ * pp_ * cp_);
    const bool hb = !b.is_null(), hm = !m.is_null(), hg = !g.is_null();
    int64_t batch = hb ? b.get<int64_t>() : 0, micro = hm ? m.get<int64_t>() : 0, gas = hg ? g.get<int64_t>() : 0;
    if (hb && hm && !hg) gas = batch / micro / dp;
    if (hb && !hm && hg) micro = batch / dp / gas;
    if (!hb && hm && hg) batch = micro * gas * dp;
    if (hb && !hm && !hg) gas = 1, micro = batch / dp;
    if (!hb && hm && !hg) gas = 1, batch = micro * dp;
    if (micro <= 0 || gas <= 0 || batch != micro * gas * dp)
      return fail("ds-batch", "train_batch_size " + str(batch) + " != micro " + str(micro) + " x accumulation " +
                                  str(gas) + " x dp " + str(dp));
    micro_ = micro, batch_ = batch, dp_ = dp;
    return CheckResult::pass();
  }

  CheckResult zero_rules() const {
    if (stage_ >= 2 && pp_ > 1) return fail("ds-pipeline", "ZeRO stage " + str(stage_) + " with pipeline parallelism");
    const json ratio = at_path(ds_, "zero_optimization.offload_optimizer.ratio");
    if (ratio.is_number() && ratio.get<double>() < 1.0 && stage_ != 3)
      return fail("ds-offload", "partial optimizer offload (ratio < 1) needs stage 3");
    const json param = at_path(ds_, "zero_optimization.offload_param.device");
    if (param.is_string() && param != "none" && stage_ != 3) return fail("ds-offload", "offload_param needs stage 3");
    for (const auto& [old_key, new_key] : std::vector<std::pair<std::string, std::string>>{
             {"cpu_offload", "offload_optimizer"},
             {"cpu_offload_param", "offload_param"},
             {"stage3_gather_fp16_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save"}})
      if (!at_path(ds_, "zero_optimization." + old_key).is_null() && !at_path(ds_, "zero_optimization." + new_key).is_null())
        return fail("ds-deprecated", "zero_optimization." + old_key + " together with its replacement " + new_key);
    if (at_path(ds_, "gradient_allreduce_op") == "sum" && stage_ == 3)
      return fail("ds-allreduce-op", "gradient_allreduce_op sum with ZeRO stage 3");
    return CheckResult::pass();
  }

  CheckResult precision() const {
    const std::string bf16 = ds_.contains("bf16") || !ds_.contains("bfloat16") ? "bf16" : "bfloat16";
    if (on("fp16.enabled") && on(bf16 + ".enabled")) return fail("ds-precision", "fp16 and bf16 both enabled");
    if ((on(bf16 + ".bf16_master_weights_and_grads") || on(bf16 + ".bf16_optimizer_states") ||
         on("fp16.fp16_master_weights_and_grads")) && stage_ < 1)
      return fail("ds-precision", "master weights/optimizer states in 16 bits need ZeRO stage 1-3");
    if (on(bf16 + ".bf16_optimizer_states") && !on(bf16 + ".bf16_master_weights_and_grads"))
      return fail("ds-precision", "bf16_optimizer_states needs bf16_master_weights_and_grads");
    return CheckResult::pass();
  }

  // docs/exports.md: one model-parallel dimension at a time, no expert parallelism.
  CheckResult layout() const {
    if (!c_.is_object()) return CheckResult::pass();
    if (cfg_int(c_, "ep").value_or(1) > 1) return fail("ds-layout", "a ds_config cannot express expert parallelism");
    if (int(tp_ > 1) + int(pp_ > 1) + int(cp_ > 1) > 1)
      return fail("ds-layout", "a ds_config expresses one of AutoTP, Ulysses and the pipeline, not several");
    const json autotp = at_path(ds_, "tensor_parallel.autotp_size"), sp = at_path(ds_, "sequence_parallel_size");
    const int64_t autotp_size = autotp.is_number_integer() ? autotp.get<int64_t>() : 0;
    if (tp_ > 1 ? autotp_size != tp_ : autotp_size > 1)
      return fail("ds-layout", "tensor_parallel.autotp_size " + autotp.dump() + " for tp " + str(tp_));
    if ((cp_ > 1 || !sp.is_null()) && (sp.is_null() || sp.get<int64_t>() != cp_))
      return fail("ds-layout", "sequence_parallel_size " + sp.dump() + " for cp " + str(cp_));
    return CheckResult::pass();
  }

  CheckResult consistency() const {
    if (!c_.is_object()) return CheckResult::pass();
    CheckResult r = agree("zero_optimization.stage", stage_, cfg_int(c_, "zero"));
    if (!r.ok || dp_ == 0) return r;
    return first_failure({
                          [&] { return agree("dp", dp_, cfg_int(c_, "dp")); },
                          [&] { return agree("train_micro_batch_size_per_gpu", micro_, cfg_int(c_, "micro_batch")); },
                          [&] { return agree("train_batch_size", batch_, cfg_int(c_, "global_batch")); },
                          [&] { return what_the_script_does(); }});
  }

  // The pipeline and recomputation are the training script's (PipelineModule, checkpointing): the
  // export must say them, under its "cotune" key, or the run differs from the one modelled.
  CheckResult what_the_script_does() const {
    const json stages = at_path(ds_, "cotune.pipeline_stages");
    const int64_t exported = stages.is_number_integer() ? stages.get<int64_t>() : 1;
    CheckResult r = agree("cotune.pipeline_stages", exported, cfg_int(c_, "pp"));
    if (!r.ok) return r;
    const json ac = at_path(ds_, "cotune.activation_checkpointing");
    const std::string recompute = c_.value("recompute", std::string("none"));
    const bool says_none = !ac.is_string() || ac.get<std::string>() == "none";
    if ((recompute == "none") != says_none)
      return fail("consistency", "recompute " + recompute + " but the export's cotune.activation_checkpointing is " +
                                     (ac.is_null() ? std::string("absent") : ac.dump()));
    return CheckResult::pass();
  }

  const json& ds_;
  const json& c_;
  int64_t stage_ = 0, tp_ = 1, pp_ = 1, cp_ = 1, micro_ = 0, batch_ = 0, dp_ = 0;
};

CheckResult check_deepspeed(const FrameworkData& data, const std::string& version, const std::string& text,
                            const json& config) {
  json ds;
  try {
    ds = json::parse(text);
  } catch (const json::exception& e) {
    return fail("format", std::string("not JSON: ") + e.what());
  }
  if (!ds.is_object()) return fail("format", "a ds_config is a JSON object");
  CheckResult r = check_deepspeed_keys(data, version, ds, "");
  if (!r.ok) return r;
  return DeepSpeedCheck(ds, config).run();
}

}  // namespace

// ---- TorchRec -------------------------------------------------------------------------------------

namespace {

const std::vector<std::string> kShardingTypes = {"data_parallel",  "table_wise",        "row_wise",  "column_wise",
                                                 "table_row_wise", "table_column_wise", "grid_shard"};
const std::vector<std::string> kComputeKernels = {"dense",     "fused",           "fused_uvm",         "fused_uvm_caching",
                                                  "quant",     "quant_uvm",       "quant_uvm_caching", "key_value",
                                                  "customized_kernel", "ssd_virtual_table", "dram_virtual_table"};
// What a training sharder accepts on cuda for a sharded table (torchrec_plan.md section 4).
const std::vector<std::string> kShardedTrainingKernels = {"fused",     "fused_uvm",         "fused_uvm_caching",
                                                          "key_value", "ssd_virtual_table", "dram_virtual_table"};

struct Rect {
  int64_t row, col, rows, cols;
};

bool integers(const json& v, size_t n) {
  return v.is_array() && v.size() == n &&
         std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number_integer() && x.get<int64_t>() >= 0; });
}

// Rows [lo, hi) of a table split into `parts` blocks of ceil(rows / parts), as TorchRec does.
CheckResult check_row_blocks(const std::string& table, const std::vector<Rect>& shards, int64_t rows) {
  const int64_t parts = static_cast<int64_t>(shards.size()), block = (rows + parts - 1) / parts;
  for (int64_t i = 0; i < parts; ++i) {
    const int64_t want = std::max<int64_t>(0, std::min(block, rows - i * block));
    const Rect& s = shards[static_cast<size_t>(i)];
    if (s.rows != want || (want > 0 && s.row != i * block))
      return fail("tr-row-wise", table + ": shard " + str(i) + " has rows " + str(s.row) + "+" + str(s.rows) +
                                     "; TorchRec splits " + str(rows) + " rows in blocks of " + str(block));
  }
  return CheckResult::pass();
}

// Shards do not overlap and tile the table's bounding box from [0, 0].
CheckResult check_tiling(const std::string& table, std::vector<Rect> shards, int64_t rows, int64_t cols) {
  int64_t area = 0;
  for (const Rect& s : shards) area += s.rows * s.cols;
  shards.erase(std::remove_if(shards.begin(), shards.end(), [](const Rect& s) { return s.rows == 0 || s.cols == 0; }),
               shards.end());
  std::sort(shards.begin(), shards.end(), [](const Rect& a, const Rect& b) {
    return a.row != b.row ? a.row < b.row : a.col < b.col;
  });
  for (size_t i = 0; i < shards.size(); ++i)
    for (size_t j = i + 1; j < shards.size() && shards[j].row < shards[i].row + shards[i].rows; ++j)
      if (shards[j].col < shards[i].col + shards[i].cols && shards[i].col < shards[j].col + shards[j].cols)
        return fail("tr-overlap", table + ": shards at [" + str(shards[i].row) + ", " + str(shards[i].col) + "] and [" +
                                      str(shards[j].row) + ", " + str(shards[j].col) + "] overlap");
  if (area != rows * cols)
    return fail("tr-cover", table + ": the shards cover " + str(area) + " of " + str(rows) + " x " + str(cols) + " cells");
  return CheckResult::pass();
}

class TorchRecCheck {
 public:
  TorchRecCheck(const json& plan, const json& config) : p_(plan), c_(config) {}

  CheckResult run() {
    return first_failure({[&] { return top(); }, [&] { return tables(); }, [&] { return cache(); },
                          [&] { return consistency(); }});
  }

 private:
  CheckResult top() {
    // "cotune" carries the run settings TorchRec has no type for (batch per GPU, pipeline, qcomms) and
    // the tables' EmbeddingBagConfig fields; a launcher reads them, TorchRec never sees them.
    for (auto it = p_.begin(); it != p_.end(); ++it)
      if (!contains({"plan", "fused_params", "world_size", "local_world_size", "cotune"}, it.key()))
        return fail("tr-structure", "unknown top-level key " + it.key());
    for (const char* k : {"world_size", "local_world_size"})
      if (!p_.contains(k) || !p_[k].is_number_integer() || p_[k].get<int64_t>() < 1)
        return fail("tr-integer", std::string(k) + " must be a positive integer");
    world_ = p_["world_size"].get<int64_t>();
    local_ = p_["local_world_size"].get<int64_t>();
    if (local_ > world_) return fail("tr-structure", "local_world_size exceeds world_size");
    if (!p_.contains("plan") || !p_["plan"].is_object() || p_["plan"].empty())
      return fail("tr-structure", "plan must be an object of module plans");
    if (p_.contains("fused_params") && !p_["fused_params"].is_object())
      return fail("tr-structure", "fused_params must be an object");
    return CheckResult::pass();
  }

  CheckResult tables() {
    for (auto module = p_["plan"].begin(); module != p_["plan"].end(); ++module) {
      if (!module.value().is_object() || module.value().empty())
        return fail("tr-structure", module.key() + " must map table names to ParameterSharding");
      for (auto t = module.value().begin(); t != module.value().end(); ++t) {
        CheckResult r = table(module.key() + "/" + t.key(), t.value());
        if (!r.ok) return r;
      }
    }
    return CheckResult::pass();
  }

  CheckResult table(const std::string& name, const json& t) {
    if (!t.is_object()) return fail("tr-structure", name + " is not an object");
    for (auto it = t.begin(); it != t.end(); ++it) {
      if (it.key() == "cache_load_factor" || it.key() == "cache_params")
        return fail("tr-cache", name + ": " + it.key() + " is not part of a serialised plan (fused_params)");
      if (!contains({"sharding_type", "compute_kernel", "ranks", "shards"}, it.key()))
        return fail("tr-structure", name + ": unknown key " + it.key());
    }
    const std::string type = t.value("sharding_type", ""), kernel = t.value("compute_kernel", "");
    if (!contains(kShardingTypes, type)) return fail("tr-sharding-type", name + ": sharding_type \"" + type + "\"");
    if (!contains(kComputeKernels, kernel)) return fail("tr-kernel", name + ": compute_kernel \"" + kernel + "\"");
    if (type == "data_parallel" ? kernel != "dense" : !contains(kShardedTrainingKernels, kernel))
      return fail("tr-kernel", name + ": " + type + " with compute_kernel " + kernel +
                                   (type == "data_parallel" ? " (data_parallel needs dense)" : ""));
    kernels_.insert(type == "data_parallel" ? "dense" : kernel);
    if (type != "data_parallel") sharded_kernels_.insert(kernel);
    const json ranks = t.value("ranks", json());
    if (!ranks.is_null() && !integers(ranks, ranks.is_array() ? ranks.size() : 0))
      return fail("tr-integer", name + ": ranks must be integers");
    for (const json& r : ranks.is_array() ? ranks : json::array())
      if (r.get<int64_t>() >= world_) return fail("tr-rank", name + ": rank " + r.dump() + " outside the world");
    if (type == "data_parallel") {
      if (t.contains("shards")) return fail("tr-structure", name + ": a data_parallel table has no shards");
      if (!ranks.is_null() && ranks.size() != static_cast<size_t>(world_))
        return fail("tr-rank", name + ": a data_parallel table is on every rank");
      return CheckResult::pass();
    }
    return shards(name, type, t, ranks);
  }

  CheckResult shards(const std::string& name, const std::string& type, const json& t, const json& ranks) {
    const json list = t.value("shards", json());
    if (!list.is_array() || list.empty()) return fail("tr-structure", name + ": a sharded table needs shards");
    if (!ranks.is_array() || ranks.size() != list.size())
      return fail("tr-rank", name + ": ranks must list the rank of each shard, in order");
    std::vector<Rect> rects;
    int64_t rows = 0, cols = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const json& s = list[i];
      if (!s.is_object() || s.size() != 3 || !s.contains("placement"))
        return fail("tr-structure", name + ": a shard is {shard_offsets, shard_sizes, placement}");
      if (!integers(s.value("shard_offsets", json()), 2) || !integers(s.value("shard_sizes", json()), 2))
        return fail("tr-integer", name + ": shard offsets and sizes must be two non-negative integers: " + s.dump());
      const int64_t r = ranks[i].get<int64_t>();
      const std::string placement = "rank:" + str(r) + "/cuda:" + str(r % local_);
      if (s["placement"] != placement)
        return fail("tr-placement", name + ": placement " + s["placement"].dump() + ", expected " + placement);
      rects.push_back({s["shard_offsets"][0].get<int64_t>(), s["shard_offsets"][1].get<int64_t>(),
                       s["shard_sizes"][0].get<int64_t>(), s["shard_sizes"][1].get<int64_t>()});
      rows = std::max(rows, rects.back().row + rects.back().rows);
      cols = std::max(cols, rects.back().col + rects.back().cols);
    }
    CheckResult g = geometry(name, type, rects, ranks, rows, cols);
    return g.ok ? check_tiling(name, rects, rows, cols) : g;
  }

  // Section 3 of torchrec_plan.md: the shape each sharding type gives.
  CheckResult geometry(const std::string& name, const std::string& type, const std::vector<Rect>& rects,
                       const json& ranks, int64_t rows, int64_t cols) const {
    const auto full_width = [&] {
      return std::all_of(rects.begin(), rects.end(), [&](const Rect& r) { return r.col == 0 && r.cols == cols; });
    };
    const auto full_height = [&] {
      return std::all_of(rects.begin(), rects.end(), [&](const Rect& r) { return r.row == 0 && r.rows == rows; });
    };
    if (type == "table_wise" && rects.size() != 1) return fail("tr-geometry", name + ": table_wise is one shard");
    if (type == "row_wise" || type == "table_row_wise") {
      if (!full_width()) return fail("tr-geometry", name + ": " + type + " shards span every column");
      const int64_t parts = type == "row_wise" ? world_ : local_, base = ranks[0].get<int64_t>();
      if (static_cast<int64_t>(rects.size()) != parts || base % parts != 0)
        return fail("tr-row-wise", name + ": " + type + " splits over " + str(parts) + " ranks" +
                                       (type == "row_wise" ? "" : " of one host"));
      for (size_t i = 0; i < ranks.size(); ++i)
        if (ranks[i].get<int64_t>() != base + static_cast<int64_t>(i))
          return fail("tr-row-wise", name + ": " + type + " ranks must be consecutive from " + str(base));
      return check_row_blocks(name, rects, rows);
    }
    if ((type == "column_wise" || type == "table_column_wise") && !full_height())
      return fail("tr-geometry", name + ": " + type + " shards span every row");
    return CheckResult::pass();
  }

  // cache_load_factor: in fused_params only, and only with fused_uvm_caching tables.
  CheckResult cache() const {
    const json f = p_.value("fused_params", json::object());
    if (!f.contains("cache_load_factor")) return CheckResult::pass();
    const json v = f["cache_load_factor"];
    if (!v.is_number() || v.get<double>() <= 0 || v.get<double>() > 1)
      return fail("tr-cache", "cache_load_factor must be a number in (0, 1]");
    if (!kernels_.count("fused_uvm_caching"))
      return fail("tr-cache", "cache_load_factor without any fused_uvm_caching table");
    return CheckResult::pass();
  }

  CheckResult consistency() const {
    if (!c_.is_object()) return CheckResult::pass();
    CheckResult r = agree("world_size", world_, cfg_int(c_, "gpus"));
    if (!r.ok) return r;
    auto offload = cfg_bool(c_, "offload");
    if (!offload || sharded_kernels_.empty()) return CheckResult::pass();
    const std::string want = *offload ? "fused_uvm_caching" : "fused";
    if (sharded_kernels_ != std::set<std::string>{want})
      return fail("consistency", std::string("offload ") + (*offload ? "true" : "false") + " but the sharded tables use " +
                                     join({sharded_kernels_.begin(), sharded_kernels_.end()}, ", "));
    const json factor = at_path(p_, "fused_params.cache_load_factor");
    auto percent = c_.contains("cache_percent") && c_["cache_percent"].is_number()
                       ? std::optional<double>(c_["cache_percent"].get<double>())
                       : std::nullopt;
    if (*offload && percent && (!factor.is_number() || std::fabs(factor.get<double>() - *percent / 100) > 1e-9))
      return fail("consistency", "cache_percent " + std::to_string(*percent) + " but fused_params.cache_load_factor " +
                                     factor.dump());
    return CheckResult::pass();
  }

  const json& p_;
  const json& c_;
  int64_t world_ = 0, local_ = 1;
  std::set<std::string> kernels_, sharded_kernels_;
};

CheckResult check_torchrec(const std::string& text, const json& config) {
  json plan;
  try {
    plan = json::parse(text);
  } catch (const json::exception& e) {
    return fail("format", std::string("not JSON: ") + e.what());
  }
  if (!plan.is_object()) return fail("format", "the plan file is a JSON object");
  // Dumped and read back, the plan must be the same, integers still integers.
  const json again = json::parse(plan.dump());
  if (again != plan) return fail("tr-roundtrip", "the plan changes when dumped and parsed again");
  return TorchRecCheck(again, config).run();
}

}  // namespace

// ---- Entry point ----------------------------------------------------------------------------------

CheckResult check_export(const FrameworkData& data, const std::string& framework, const std::string& version,
                         const std::string& text, const json& config) {
  const std::map<std::string, std::vector<std::string>> versions = {{"megatron", {"main", "core_v0.19.0"}},
                                                                    {"torchtitan", {"main", "v0.2.2", "v0.1.0"}},
                                                                    {"nemo", {"main"}},
                                                                    {"deepspeed", {"master", "v0.19.5"}},
                                                                    {"torchrec", {"main"}}};
  auto known = versions.find(framework);
  if (known == versions.end()) return fail("target", "unknown framework " + framework);
  const std::string v = version == "HEAD" ? known->second.front() : version;
  if (!contains(known->second, v)) return fail("target", "unknown version " + framework + "@" + version);
  try {
    if (framework == "megatron") return check_megatron(data, v, text, config);
    if (framework == "torchtitan") return check_torchtitan(data, v, text, config);
    if (framework == "nemo") return check_nemo(data, text, config);
    if (framework == "deepspeed") return check_deepspeed(data, v, text, config);
    return check_torchrec(text, config);
  } catch (const std::exception& e) {
    // A value of an unexpected JSON type, for instance: still a broken export.
    return fail("format", std::string("the checker could not read the export: ") + e.what());
  }
}

}  // namespace cotune::testing
