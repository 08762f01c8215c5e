// Fuzz target: the ELF pre-check the loader runs before dlopen() (core/src/loader/elf_check.cpp).
// The input is the file: random bytes, truncated libraries, headers with other classes, byte
// orders, types, machines, and table offsets and counts that overflow. The check must answer
// without crashing, and anything it accepts must have its program headers inside the file.
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz/fuzz_check.hpp"
#include "loader/elf_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An in-memory file with a path, so the check reads it exactly as it reads a library.
  static const int fd = ::memfd_create("cotune-fuzz-elf", 0);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  const std::string problem = cotune::core::elf_problem("/proc/self/fd/" + std::to_string(fd));
  if (problem.empty()) {
    Elf64_Ehdr eh;
    FUZZ_CHECK(size >= sizeof(eh));
    std::memcpy(&eh, data, sizeof(eh));
    FUZZ_CHECK(eh.e_type == ET_DYN && eh.e_phentsize == sizeof(Elf64_Phdr));
    // The program headers and every loadable segment lie inside the file (no wrap-around).
    FUZZ_CHECK(eh.e_phoff <= size && eh.e_phnum <= (size - eh.e_phoff) / sizeof(Elf64_Phdr));
    for (size_t i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      std::memcpy(&ph, data + eh.e_phoff + i * sizeof(ph), sizeof(ph));
      if (ph.p_type == PT_LOAD || ph.p_type == PT_DYNAMIC)
        FUZZ_CHECK(ph.p_offset <= size && ph.p_filesz <= size - ph.p_offset);
    }
  }
  return 0;
}
