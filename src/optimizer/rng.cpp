#include "zeus/optimizer/rng.hpp"

#include <cmath>
#include <cstdio>
#include <numbers>

#include "zeus/common/error.hpp"

namespace zeus::optimizer {
namespace {

std::uint64_t rotl(std::uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

constexpr const char* kPrefix = "xoshiro256**:";

}  // namespace

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Rng::Rng(std::uint64_t seed) {
  for (auto& word : state_) {
    word = splitmix64(seed);
  }
}

std::uint64_t Rng::next_u64() {
  const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const std::uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

double Rng::uniform() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

std::uint64_t Rng::below(std::uint64_t bound) {
  if (bound == 0) {
    return 0;
  }
  // Rejection sampling: no modulo bias.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  std::uint64_t value = 0;
  do {
    value = next_u64();
  } while (value >= limit);
  return value % bound;
}

double Rng::normal(double mean, double stddev) {
  if (stddev == 0.0) {
    return mean;
  }
  double u1 = uniform();
  while (u1 <= 0.0) {
    u1 = uniform();
  }
  const double u2 = uniform();
  return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::vector<std::size_t> Rng::permutation(std::size_t count) {
  std::vector<std::size_t> order(count);
  for (std::size_t i = 0; i < count; ++i) {
    order[i] = i;
  }
  for (std::size_t i = count; i > 1; --i) {
    std::swap(order[i - 1], order[static_cast<std::size_t>(below(i))]);
  }
  return order;
}

std::string Rng::save() const {
  char buffer[128];
  std::snprintf(
      buffer, sizeof(buffer), "%s%016llx%016llx%016llx%016llx", kPrefix,
      static_cast<unsigned long long>(state_[0]), static_cast<unsigned long long>(state_[1]),
      static_cast<unsigned long long>(state_[2]), static_cast<unsigned long long>(state_[3]));
  return buffer;
}

Rng Rng::restore(const std::string& text) {
  const std::string prefix = kPrefix;
  if (text.size() != prefix.size() + 64 || text.compare(0, prefix.size(), prefix) != 0 ||
      text.find_first_not_of("0123456789abcdef", prefix.size()) != std::string::npos) {
    throw Error(ErrorKind::kInvalidArgument,
                "not a saved random generator state: \"" + text + "\"");
  }
  Rng rng;
  for (std::size_t i = 0; i < 4; ++i) {
    rng.state_[i] = std::stoull(text.substr(prefix.size() + 16 * i, 16), nullptr, 16);
  }
  if (rng.state_ == std::array<std::uint64_t, 4>{}) {
    throw Error(ErrorKind::kInvalidArgument, "a random generator state cannot be all zeros");
  }
  return rng;
}

}  // namespace zeus::optimizer
