#pragma once

#include <cstdio>
#include <cstdlib>

// A broken property in a fuzz target: print it and abort, so libFuzzer saves the input as a crash.
#define FUZZ_CHECK(cond)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "fuzz property failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)
