#include <cotune/support/command_template.hpp>
#include <cotune/support/likely_meant.hpp>

#include <algorithm>

#include <cotune/cotune.hpp>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace cotune::support {
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, message);
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// Choice names reach argv and the environment verbatim: only ^[A-Za-z0-9_.+-]+$, and no leading
// '-' so that a value can never read as an option.
bool is_safe_word(std::string_view s) {
  if (s.empty() || s[0] == '-') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '+' || c == '-'))
      return false;
  return true;
}

bool is_integral(double v) { return std::isfinite(v) && std::floor(v) == v; }

std::string format_int(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  return buf;
}

// The shortest decimal text that reads back as the same double.
std::string format_float(double v) {
  char buf[40];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string format_value(const cotune_param& p, std::string_view name, double v) {
  const std::string where = "parameter '" + std::string(name) + "'";
  switch (p.type) {
    case COTUNE_PARAM_INT: {
      if (!is_integral(v)) invalid(where + ": value " + format_float(v) + " is not an integer");
      if (p.values != nullptr && p.num_values > 0) {
        for (size_t i = 0; i < p.num_values; ++i)
          if (p.values[i] == v) return format_int(v);
        invalid(where + ": value " + format_int(v) + " is not one of its allowed values");
      }
      if (v < p.low || v > p.high)
        invalid(where + ": value " + format_int(v) + " is outside [" + format_float(p.low) + ", " +
                format_float(p.high) + "]");
      return format_int(v);
    }
    case COTUNE_PARAM_FLOAT:
      if (!std::isfinite(v) || v < p.low || v > p.high)
        invalid(where + ": value " + format_float(v) + " is outside [" + format_float(p.low) + ", " +
                format_float(p.high) + "]");
      return format_float(v);
    case COTUNE_PARAM_CATEGORICAL: {
      if (!is_integral(v) || v < 0 || v >= static_cast<double>(p.num_choices) || p.choices == nullptr)
        invalid(where + ": choice index " + format_float(v) + " is not in [0, " +
                std::to_string(p.num_choices) + ")");
      std::string choice(cotune::view(p.choices[static_cast<size_t>(v)]));
      if (!is_safe_word(choice))
        invalid(where + ": choice '" + choice +
                "' cannot be passed to a command (allowed: letters, digits and _ . + -, not starting with -)");
      return choice;
    }
    case COTUNE_PARAM_BOOL:
      if (v == 0) return "false";
      if (v == 1) return "true";
      invalid(where + ": boolean value " + format_float(v) + " is neither 0 nor 1");
    default:
      invalid(where + ": unknown parameter type " + std::to_string(p.type));
  }
}

}  // namespace

FormattedParams format_params(const cotune_trial& trial) {
  if (trial.num_params > 0 && (trial.params == nullptr || trial.config == nullptr))
    invalid("trial has " + std::to_string(trial.num_params) + " parameters but no params or config array");
  FormattedParams out;
  for (size_t i = 0; i < trial.num_params; ++i) {
    const cotune_param* p = trial.params[i];
    if (p == nullptr) invalid("trial parameter " + std::to_string(i) + " is NULL");
    std::string name(cotune::view(p->name));
    if (!is_identifier(name))
      invalid("parameter name '" + name + "' cannot be substituted (expected [A-Za-z_][A-Za-z0-9_]*)");
    for (const char* reserved : kReservedPlaceholders)
      if (name == reserved) invalid("parameter name '" + name + "' clashes with the placeholder {" + name + "}");
    out.emplace_back(name, format_value(*p, name, trial.config[i]));
  }
  return out;
}

std::string checked_trial_id(std::string_view id) {
  bool ok = !id.empty() && id[0] != '-' && id.find("..") == std::string_view::npos;
  for (char c : id)
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
                c == '+' || c == ':' || c == '/');
  if (!ok)
    invalid("trial id '" + std::string(id) +
            "' is not usable (expected letters, digits and _ . - + : /, no '..', not starting with -)");
  return std::string(id);
}

std::string param_env_name(std::string_view name) {
  std::string env = "COTUNE_PARAM_";
  for (char c : name) env += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

CommandTemplate::CommandTemplate(const std::vector<std::string>& argv, std::string_view what)
    : what_(what) {
  if (argv.empty()) invalid(what_ + ": expected a non-empty array of strings (the program and its arguments)");
  for (size_t a = 0; a < argv.size(); ++a) {
    const std::string& arg = argv[a];
    const std::string where = what_ + "[" + std::to_string(a) + "] \"" + arg + "\"";
    std::vector<Piece> pieces;
    std::string literal;
    for (size_t i = 0; i < arg.size(); ++i) {
      char c = arg[i];
      if ((c == '{' || c == '}') && i + 1 < arg.size() && arg[i + 1] == c) {  // {{ and }} escape
        literal += c;
        ++i;
      } else if (c == '{') {
        size_t end = arg.find('}', i);
        if (end == std::string::npos) invalid(where + ": '{' without a closing '}' (write {{ for a literal brace)");
        std::string name = arg.substr(i + 1, end - i - 1);
        if (!is_identifier(name)) invalid(where + ": placeholder {" + name + "} is not a parameter name");
        if (!literal.empty()) pieces.push_back({false, std::move(literal)});
        literal.clear();
        pieces.push_back({true, name});
        i = end;
      } else if (c == '}') {
        invalid(where + ": '}' without an opening '{' (write }} for a literal brace)");
      } else {
        literal += c;
      }
    }
    if (!literal.empty() || pieces.empty()) pieces.push_back({false, std::move(literal)});
    // The program is the study file's to name: a placeholder there would run whatever a parameter
    // value names on PATH ("full", say).
    if (a == 0 && std::any_of(pieces.begin(), pieces.end(), [](const Piece& p) { return p.placeholder; }))
      invalid(where + ": the program (the first element) cannot hold a placeholder; name it literally");
    args_.push_back(std::move(pieces));
  }
  if (args_[0].size() == 1 && !args_[0][0].placeholder && args_[0][0].text.empty())
    invalid(what_ + "[0]: the program is empty");
}

std::vector<std::string> CommandTemplate::expand(const std::map<std::string, std::string>& values) const {
  std::vector<std::string> out;
  for (size_t a = 0; a < args_.size(); ++a) {
    std::string arg;
    for (const Piece& p : args_[a]) {
      if (!p.placeholder) {
        arg += p.text;
        continue;
      }
      auto it = values.find(p.text);
      if (it == values.end())
        invalid(what_ + "[" + std::to_string(a) + "]: placeholder {" + p.text +
                "} names no parameter of the space (nor trial_id, workdir, trial_file, result_file)");
      arg += it->second;
    }
    out.push_back(std::move(arg));
  }
  return out;
}

void CommandTemplate::check_placeholders(const cotune_param* const* params, size_t num_params) const {
  std::vector<std::string> names;
  for (size_t i = 0; i < num_params; ++i)
    if (params != nullptr && params[i] != nullptr) names.emplace_back(params[i]->name.data, params[i]->name.len);
  const size_t space_names = names.size();
  for (const char* r : kReservedPlaceholders) names.emplace_back(r);
  for (size_t a = 0; a < args_.size(); ++a)
    for (const Piece& p : args_[a]) {
      if (!p.placeholder || std::find(names.begin(), names.end(), p.text) != names.end()) continue;
      const std::string meant = likely_meant(p.text, names);
      std::string list;
      for (size_t i = 0; i < space_names; ++i) list += (list.empty() ? "" : ", ") + names[i];
      invalid(what_ + "[" + std::to_string(a) + "]: placeholder {" + p.text + "} names no parameter of the space" +
              (meant.empty() ? "" : " (did you mean {" + meant + "}?)") + "; its parameters: " +
              (list.empty() ? "none" : list) + "; and every trial's trial_id, workdir, trial_file, result_file");
    }
}

std::string CommandTemplate::literal_program() const {
  if (args_.empty() || args_[0].size() != 1 || args_[0][0].placeholder) return "";
  return args_[0][0].text;
}

}  // namespace cotune::support
