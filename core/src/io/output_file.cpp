#include <cotune/core/io/output_file.hpp>

#include <filesystem>
#include <system_error>

namespace cotune::core {

bool writes_in_place(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status s = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(s)) return false;
  return !std::filesystem::is_regular_file(s) && !std::filesystem::is_directory(s);
}

}  // namespace cotune::core
