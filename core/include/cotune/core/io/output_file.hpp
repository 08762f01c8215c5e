// Where a command's output file may be replaced atomically. Results are written to a new file
// beside the target and renamed over it, so that a reader never sees half of one; but renaming
// over a device, a FIFO or a socket replaces it with a regular file (run as root, `--out
// /dev/null` would leave the system without /dev/null). Those are written in place.
#ifndef COTUNE_CORE_IO_OUTPUT_FILE_HPP_
#define COTUNE_CORE_IO_OUTPUT_FILE_HPP_

#include <string>

namespace cotune::core {

// True when `path` exists and is neither a regular file nor a directory (a character or block
// device, a FIFO, a socket), following symbolic links: such an output is written into, not replaced.
bool writes_in_place(const std::string& path);

}  // namespace cotune::core

#endif  // COTUNE_CORE_IO_OUTPUT_FILE_HPP_
