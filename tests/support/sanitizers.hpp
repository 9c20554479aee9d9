// Whether this test binary, and the programs built with it, run under a sanitizer. Their resident
// size then carries the sanitizer's shadow memory and quarantine (hundreds of MiB under
// AddressSanitizer) and their time its checks, so figures of memory and speed say nothing about
// zeus there: such assertions are made in the release build only (scripts/test.sh runs them
// there, `perf_tests`), while the behaviour around them is still checked under the sanitizers.
#pragma once

namespace zeus::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

inline constexpr const char* kMeasuredInReleaseOnly =
    "memory and timing figures are asserted in the release build (a sanitizer's shadow memory, "
    "quarantine and checks would be measured instead)";

}  // namespace zeus::testing
