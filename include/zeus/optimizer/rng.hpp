// A small, deterministic, serialisable random number generator for the policy core
// (xoshiro256**, seeded through splitmix64). Identical streams on every platform and compiler,
// unlike the standard distributions, and its whole state fits in four integers.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace zeus::optimizer {

// One step of splitmix64: advances `state` and returns the next 64 random bits. Also how Rng
// seeds itself; usable on its own for cheap deterministic noise.
std::uint64_t splitmix64(std::uint64_t& state);

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0);

  std::uint64_t next_u64();
  // Uniform in [0, 1).
  double uniform();
  // Uniform integer in [0, bound).
  std::uint64_t below(std::uint64_t bound);
  // Gaussian with the given mean and standard deviation (Box-Muller, one draw per call).
  double normal(double mean, double stddev);
  // A uniformly random permutation of 0..count-1.
  std::vector<std::size_t> permutation(std::size_t count);

  // The state as text ("xoshiro256**:<16 hex>x4") and back. restore throws
  // zeus::Error(kInvalidArgument) on malformed text.
  std::string save() const;
  static Rng restore(const std::string& state);

  bool operator==(const Rng& other) const = default;

 private:
  std::array<std::uint64_t, 4> state_{};
};

}  // namespace zeus::optimizer
