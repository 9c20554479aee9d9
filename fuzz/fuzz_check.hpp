// The fuzz targets' assertion: stays on in every build type, and aborts (a crash libFuzzer
// reports, with the input saved) naming the condition that failed.
#pragma once

#include <cstdio>
#include <cstdlib>

#define ZEUS_FUZZ_CHECK(condition)                                                           \
  do {                                                                                       \
    if (!(condition)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (false)
