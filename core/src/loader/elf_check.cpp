#include "loader/elf_check.hpp"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <vector>

namespace cotune::core {
namespace {

#if defined(__x86_64__)
constexpr int kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr int kHostMachine = EM_AARCH64;
#else
constexpr int kHostMachine = -1;  // unknown: leave the architecture check to the dynamic loader
#endif

std::string machine_name(int m) {
  switch (m) {
    case EM_X86_64: return "x86-64";
    case EM_AARCH64: return "aarch64";
    case EM_386: return "i386";
    case EM_ARM: return "arm";
    case EM_RISCV: return "riscv";
    case EM_PPC64: return "ppc64";
    default: return "machine " + std::to_string(m);
  }
}

}  // namespace

std::string elf_problem(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "cannot open the file";
  const auto size = static_cast<unsigned long long>(in.tellg());
  in.seekg(0);
  Elf64_Ehdr eh{};
  if (size < sizeof(eh) || !in.read(reinterpret_cast<char*>(&eh), sizeof(eh)))
    return "not a shared library (too short for an ELF header)";
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return "not a shared library (no ELF magic)";
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return "not a 64-bit ELF file";
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return "not a little-endian ELF file";
  if (eh.e_type != ET_DYN) return "an ELF file but not a shared library";
  if (kHostMachine >= 0 && eh.e_machine != kHostMachine)
    return "built for " + machine_name(eh.e_machine) + ", this host is " + machine_name(kHostMachine);
  // Every table and loadable segment must lie inside the file.
  // Compared as "offset <= size && length <= size - offset": offsets near 2^64 must not wrap around.
  auto beyond = [size](unsigned long long offset, unsigned long long length) {
    return offset > size || length > size - offset;
  };
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      beyond(eh.e_phoff, static_cast<unsigned long long>(eh.e_phnum) * eh.e_phentsize))
    return "truncated (program headers beyond the end of the file)";
  if (eh.e_shoff != 0 && beyond(eh.e_shoff, static_cast<unsigned long long>(eh.e_shnum) * eh.e_shentsize))
    return "truncated (section headers beyond the end of the file)";
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  in.seekg(static_cast<std::streamoff>(eh.e_phoff));
  if (!in.read(reinterpret_cast<char*>(ph.data()), static_cast<std::streamsize>(ph.size() * sizeof(Elf64_Phdr))))
    return "truncated (cannot read the program headers)";
  for (const Elf64_Phdr& p : ph)
    if ((p.p_type == PT_LOAD || p.p_type == PT_DYNAMIC) && beyond(p.p_offset, p.p_filesz))
      return p.p_offset > size ? "truncated (a segment starts beyond the end of the file)"
                               : "truncated (a segment ends " + std::to_string(p.p_filesz - (size - p.p_offset)) +
                                     " bytes beyond the end of the file)";
  return "";
}

}  // namespace cotune::core
