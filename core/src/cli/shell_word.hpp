// Text printed for people to paste into a shell: one word, whatever it holds.
#ifndef COTUNE_CLI_SHELL_WORD_HPP_
#define COTUNE_CLI_SHELL_WORD_HPP_

#include <string>

namespace cotune::cli {

// `text` as one POSIX shell word: left bare when it is made of safe characters only, else in single
// quotes (a quote inside as '\''). Control characters are written as $'\xNN' pieces, so that a
// terminal never interprets them and the pasted word is still the same bytes.
inline std::string shell_word(const std::string& text) {
  auto safe = [](unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
           ch == '_' || ch == '-' || ch == '/' || ch == ':' || ch == '@' || ch == '=' || ch == '+' || ch == ',';
  };
  bool plain = !text.empty();
  for (unsigned char ch : text) plain = plain && safe(ch);
  if (plain) return text;
  static const char* const hex = "0123456789abcdef";
  std::string out = "'";
  for (unsigned char ch : text) {
    if (ch == '\'') {
      out += "'\\''";
    } else if (ch < 0x20 || ch == 0x7f) {
      out += std::string("'$'\\x") + hex[ch >> 4] + hex[ch & 15] + "''";
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "'";
}

}  // namespace cotune::cli

#endif  // COTUNE_CLI_SHELL_WORD_HPP_
