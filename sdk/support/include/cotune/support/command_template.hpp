// A job's command as an argv template ("--tp", "{tp}", "--out={workdir}/x"): no shell ever sees it.
// Placeholders are filled with a trial's parameter values after each value has been checked
// against its parameter's domain and formatted (INT as an integer, FLOAT as a number, CATEGORICAL
// as the choice name, BOOL as true/false), so no value can inject an argument or a shell word.
#ifndef COTUNE_SUPPORT_COMMAND_TEMPLATE_HPP_
#define COTUNE_SUPPORT_COMMAND_TEMPLATE_HPP_

#include <cotune/cotune.h>

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cotune::support {

// One trial's parameter values, validated and formatted, in the space's parameter order.
using FormattedParams = std::vector<std::pair<std::string, std::string>>;

// Checks every value of `trial` against its parameter's domain and formats it. Throws
// cotune::Error(INVALID_ARGUMENT) naming the parameter and what was expected.
FormattedParams format_params(const cotune_trial& trial);

// Checks that a trial id is safe to use as a file name part and an argument ("study/17").
std::string checked_trial_id(std::string_view id);

// The environment variable of a parameter: COTUNE_PARAM_<NAME IN UPPER CASE>.
std::string param_env_name(std::string_view name);

// Placeholders every trial provides besides its parameters.
inline constexpr const char* kReservedPlaceholders[] = {"trial_id", "workdir", "trial_file",
                                                       "result_file"};

class CommandTemplate {
 public:
  CommandTemplate() = default;
  // Parses each argument; `what` names the option in error messages ("command"). Throws
  // cotune::Error(INVALID_ARGUMENT) on an empty command or a malformed placeholder.
  CommandTemplate(const std::vector<std::string>& argv, std::string_view what);

  // The argv with every placeholder replaced from `values`. Throws naming a placeholder that has
  // no value (a parameter the space does not have).
  std::vector<std::string> expand(const std::map<std::string, std::string>& values) const;

  // The program (argv[0]) when it has no placeholder, else "".
  std::string literal_program() const;

  // Checks that every placeholder names one of `params` or a reserved placeholder, as expand()
  // will need (an executor's check_study). Throws cotune::Error(INVALID_ARGUMENT) naming the
  // argument, the placeholder, the parameter it most likely means and the names there are.
  void check_placeholders(const cotune_param* const* params, size_t num_params) const;

 private:
  struct Piece {
    bool placeholder = false;
    std::string text;  // literal text, or the placeholder's name
  };
  std::vector<std::vector<Piece>> args_;
  std::string what_;
};

}  // namespace cotune::support

#endif  // COTUNE_SUPPORT_COMMAND_TEMPLATE_HPP_
