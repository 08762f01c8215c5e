// Runs a fuzz target (LLVMFuzzerTestOneInput) without libFuzzer, as a ctest test: every file of
// the given corpus and regression directories, then a fixed number of seeded mutations of them
// (bit flips, byte changes, inserts, deletions, truncations, splices of two files). Deterministic
// for a given seed and corpus. When an input crashes the target, it is written to
// fuzz-crash-<pid>.bin in the working directory first, so that it can be kept as a regression file.
//
//   fuzz_driver [--mutations N] [--seed S] [--max-seconds T] DIR_OR_FILE...
//
// --max-seconds bounds the mutation phase on a slow machine (it stops early and says so; it is not
// an assertion). libFuzzer (scripts/fuzz) searches for much longer, guided by coverage.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;
using Bytes = std::string;

constexpr size_t kMaxInput = 1 << 16;

// The input being run, for the crash handler.
const char* g_current = nullptr;
size_t g_current_size = 0;
char g_crash_path[64];

void on_crash(int sig) {
  const int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0 && g_current != nullptr) {
    ssize_t ignored = ::write(fd, g_current, g_current_size);
    (void)ignored;
    ::close(fd);
    const char msg[] = "\nfuzz_driver: the crashing input was written to ";
    ignored = ::write(2, msg, sizeof(msg) - 1);
    ignored = ::write(2, g_crash_path, std::strlen(g_crash_path));
    ignored = ::write(2, "\n", 1);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void run(const Bytes& input) {
  g_current = input.data();
  g_current_size = input.size();
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

Bytes read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Regular files under `path` (or `path` itself), sorted; names starting with '.' are skipped.
void collect(const fs::path& path, std::vector<fs::path>& out) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    out.push_back(path);
    return;
  }
  if (!fs::is_directory(path, ec)) return;  // a missing regressions directory is fine
  std::vector<fs::path> found;
  for (const auto& e : fs::recursive_directory_iterator(path, ec))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') found.push_back(e.path());
  std::sort(found.begin(), found.end());
  out.insert(out.end(), found.begin(), found.end());
}

class Mutator {
 public:
  Mutator(uint64_t seed, const std::vector<Bytes>& corpus) : rng_(seed), corpus_(corpus) {}

  Bytes next() {
    Bytes b = corpus_.empty() ? Bytes() : corpus_[below(corpus_.size())];
    const size_t steps = 1 + below(4);
    for (size_t i = 0; i < steps; ++i) mutate(b);
    if (b.size() > kMaxInput) b.resize(kMaxInput);
    return b;
  }

 private:
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
  char random_byte() {
    static const unsigned char interesting[] = {0, 1, 0x7f, 0x80, 0xff, '"', ',', '\n', '{', '}', '[', ']', ':', '-', '0', '9', 'e'};
    return static_cast<char>(below(2) ? static_cast<unsigned char>(rng_()) : interesting[below(sizeof(interesting))]);
  }

  void mutate(Bytes& b) {
    switch (below(b.empty() ? 2 : 8)) {
      case 0:  // insert random bytes
        b.insert(below(b.size() + 1), Bytes(1 + below(8), '\0'));
        for (size_t i = 0, at = below(b.size()); i < 8 && at + i < b.size(); ++i) b[at + i] = random_byte();
        break;
      case 1:  // splice: a piece of another corpus file
        if (!corpus_.empty()) {
          const Bytes& other = corpus_[below(corpus_.size())];
          const size_t from = below(other.size() + 1), len = below(other.size() - from + 1);
          b.insert(below(b.size() + 1), other.substr(from, len));
        }
        break;
      case 2: b[below(b.size())] ^= static_cast<char>(1u << below(8)); break;  // flip a bit
      case 3: b[below(b.size())] = random_byte(); break;
      case 4: {  // delete a range
        const size_t at = below(b.size());
        b.erase(at, 1 + below(std::min<size_t>(b.size() - at, 32)));
        break;
      }
      case 5: b.resize(below(b.size())); break;  // truncate
      case 6: {  // duplicate a range
        const size_t at = below(b.size());
        b.insert(below(b.size() + 1), b.substr(at, 1 + below(32)));
        break;
      }
      default: {  // overwrite a number-looking run of digits
        const size_t at = below(b.size());
        const std::string n = std::to_string(static_cast<int64_t>(rng_()) >> below(64));
        b.replace(at, std::min(n.size(), b.size() - at), n);
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  const std::vector<Bytes>& corpus_;
};

}  // namespace

int main(int argc, char** argv) {
  uint64_t mutations = 2000, seed = 1;
  double max_seconds = 60;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mutations" && i + 1 < argc) mutations = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--max-seconds" && i + 1 < argc) max_seconds = std::strtod(argv[++i], nullptr);
    else if (a.rfind("--", 0) == 0) {
      std::cerr << "usage: " << argv[0] << " [--mutations N] [--seed S] [--max-seconds T] DIR_OR_FILE...\n";
      return 2;
    } else collect(a, files);
  }
  std::snprintf(g_crash_path, sizeof(g_crash_path), "fuzz-crash-%d.bin", static_cast<int>(::getpid()));
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, on_crash);

  std::vector<Bytes> corpus;
  for (const fs::path& f : files) {
    corpus.push_back(read_file(f));
    std::cerr << "run " << f.string() << "\n";
    run(corpus.back());
  }
  const auto start = std::chrono::steady_clock::now();
  Mutator mutator(seed, corpus);
  uint64_t done = 0;
  for (; done < mutations; ++done) {
    if (done % 64 == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > max_seconds) {
      std::cerr << "stopping after " << max_seconds << " s\n";
      break;
    }
    run(mutator.next());
  }
  std::cout << files.size() << " files and " << done << " mutations (seed " << seed << ") ran without a crash\n";
  return 0;
}
