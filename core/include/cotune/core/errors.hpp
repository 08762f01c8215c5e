// Exceptions of the host library.
#ifndef COTUNE_CORE_ERRORS_HPP_
#define COTUNE_CORE_ERRORS_HPP_

#include <stdexcept>
#include <string>

namespace cotune::core {

// Bad input from the user: a study file, a CSV, a flag, a plugin that cannot be used. The message
// names the file, the field and what was expected; the CLI prints it and exits with status 2.
class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// An error reported by a plugin across the ABI, with its cotune error code.
class PluginError : public std::runtime_error {
 public:
  PluginError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

}  // namespace cotune::core

#endif  // COTUNE_CORE_ERRORS_HPP_
