// An invariant of a fuzz target. A broken one aborts, which both libFuzzer and the ctest driver
// report as a failure with the input that caused it (assert() would vanish under NDEBUG).
#ifndef COTUNE_TESTS_FUZZ_FUZZ_CHECK_HPP_
#define COTUNE_TESTS_FUZZ_FUZZ_CHECK_HPP_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: fuzz invariant broken: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)

#endif  // COTUNE_TESTS_FUZZ_FUZZ_CHECK_HPP_
