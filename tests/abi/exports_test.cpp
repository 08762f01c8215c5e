// Every plugin library exports exactly one symbol: the entry point (nm -D on each built .so).
#include <boost/filesystem.hpp>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

std::vector<std::string> exported_symbols(const std::string& lib) {
  std::vector<std::string> symbols;
  const std::string cmd = "nm -D --defined-only '" + lib + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {"<nm failed>"};
  char line[4096];
  while (std::fgets(line, sizeof line, p) != nullptr) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    const size_t space = s.rfind(' ');
    symbols.push_back(space == std::string::npos ? s : s.substr(space + 1));
  }
  pclose(p);
  return symbols;
}

TEST(Exports, OnlyTheEntryPointIsExported) {
  size_t checked = 0;
  for (const char* dir : {COTUNE_PLUGIN_DIR, COTUNE_ABI_FIXTURE_DIR}) {
    for (boost::filesystem::directory_iterator it(dir), end; it != end; ++it) {
      const std::string path = it->path().string();
      if (it->path().extension() != ".so") continue;
      const std::string name = it->path().filename().string();
      const std::vector<std::string> symbols = exported_symbols(path);
      if (name == "libcotune-predictor-abinoentry.so") {
        // Its decoy symbol is not in the version script, so it exports nothing at all.
        EXPECT_TRUE(symbols.empty()) << path;
        continue;
      }
      ASSERT_EQ(symbols.size(), 1u) << path << " exports " << symbols.size() << " symbols";
      EXPECT_EQ(symbols[0], "cotune_plugin_entry_v1") << path;
      ++checked;
    }
  }
  EXPECT_GT(checked, 10u);
}

}  // namespace
