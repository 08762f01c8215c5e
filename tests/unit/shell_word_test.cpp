// What `cotune run` prints for pasting into a shell is one word, whatever a name or path holds.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "cli/shell_word.hpp"

using cotune::cli::shell_word;

namespace {

// What bash (the shell people paste into) makes of `word`: printf %s of it, run from a script file.
std::string through_shell(const std::string& word) {
  char path[] = "/tmp/cotune-shell-word-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return "<mkstemp failed>";
  const std::string script = "printf %s " + word + "\n";
  const bool written = ::write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size());
  ::close(fd);
  if (!written) return "<write failed>";
  FILE* p = ::popen((std::string("bash ") + path).c_str(), "r");
  if (p == nullptr) return "<popen failed>";
  std::string out;
  char buf[256];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  ::unlink(path);
  return out;
}

TEST(ShellWord, SafeTextStaysBare) {
  EXPECT_EQ(shell_word("llama3-70b-512xh100"), "llama3-70b-512xh100");
  EXPECT_EQ(shell_word("/work/store/cotune.db"), "/work/store/cotune.db");
}

TEST(ShellWord, AnythingElseIsQuotedAndReachesTheCommandUnchanged) {
  for (const std::string& text : {std::string("my study"), std::string("a'b; rm -rf ~"), std::string("$(reboot)"),
                                 std::string("x\ny"), std::string("esc\x1b[31m"), std::string("")}) {
    const std::string word = shell_word(text);
    EXPECT_EQ(word.find('\n'), std::string::npos) << word;
    EXPECT_EQ(word.find('\x1b'), std::string::npos) << word;
    if (!text.empty()) {
      EXPECT_EQ(through_shell(word), text) << word;
    }
  }
  EXPECT_EQ(shell_word(""), "''");
}

}  // namespace
