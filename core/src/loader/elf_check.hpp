// A check of a shared object's ELF headers before it is handed to the dynamic loader. dlopen() of a
// truncated file can crash the process (SIGBUS when a mapped segment lies beyond the end of the
// file), and its messages for foreign files are cryptic; this check refuses such files first.
#ifndef COTUNE_LOADER_ELF_CHECK_HPP_
#define COTUNE_LOADER_ELF_CHECK_HPP_

#include <string>

namespace cotune::core {

// "" when `path` looks like a loadable shared object for this machine, else why not.
std::string elf_problem(const std::string& path);

}  // namespace cotune::core

#endif  // COTUNE_LOADER_ELF_CHECK_HPP_
