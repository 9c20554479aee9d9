// Reads every visible GPU's energy over one second, compares it with its power readings, then
// sets the lowest power limit, reads it back and restores the original. Exits 0 when everything
// checked out. Runs on real GPUs (needs root or CAP_SYS_ADMIN for the limit) and on simulated
// ones (ZEUS_SIMULATED_GPUS=2:h200).
#include <chrono>
#include <cstdio>
#include <thread>

#include "zeus/common/error.hpp"
#include "zeus/device/discovery.hpp"

int main() {
  try {
    const zeus::device::Gpus& gpus = zeus::device::get_gpus();
    if (gpus.empty()) {
      std::puts("no GPU visible (set ZEUS_SIMULATED_GPUS=<count>[:<model>] to simulate some)");
      return 4;
    }
    int failures = 0;
    for (int i = 0; i < static_cast<int>(gpus.size()); ++i) {
      zeus::device::Gpu& gpu = gpus.at(i);
      std::printf("GPU %d (physical %d): %s %s\n", i, gpus.physical_index(i), gpu.name().c_str(),
                  gpu.uuid().c_str());
      if (gpu.supports_energy_counter()) {
        const auto start = std::chrono::steady_clock::now();
        const std::uint64_t first_mj = gpu.total_energy_mj();
        std::this_thread::sleep_for(std::chrono::seconds(1));
        const std::uint64_t second_mj = gpu.total_energy_mj();
        const double elapsed_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("  energy over %.3f s: %.3f J (%.1f W); instant %.1f W, average %.1f W\n",
                    elapsed_s, (second_mj - first_mj) / 1000.0,
                    (second_mj - first_mj) / 1000.0 / elapsed_s, gpu.instant_power_mw() / 1000.0,
                    gpu.average_power_mw() / 1000.0);
      } else {
        std::printf("  no energy counter; instant power %.1f W\n", gpu.instant_power_mw() / 1000.0);
      }
      const zeus::device::PowerLimitConstraints range = gpu.power_limit_constraints_mw();
      const std::uint32_t original_mw = gpu.power_limit_mw();
      std::printf("  power limit %u mW, range [%u, %u] mW\n", original_mw, range.min_mw,
                  range.max_mw);
      try {
        gpu.set_power_limit_mw(range.min_mw);
        const std::uint32_t applied_mw = gpu.power_limit_mw();
        gpu.set_power_limit_mw(original_mw);
        const std::uint32_t restored_mw = gpu.power_limit_mw();
        const bool ok = applied_mw == range.min_mw && restored_mw == original_mw;
        std::printf("  set %u mW -> read %u mW; restored -> read %u mW: %s\n", range.min_mw,
                    applied_mw, restored_mw, ok ? "ok" : "MISMATCH");
        failures += ok ? 0 : 1;
      } catch (const zeus::Error& error) {
        std::printf("  power limit not changed: %s\n", error.what());
        failures += error.kind() == zeus::ErrorKind::kNoPermission ? 0 : 1;
      }
    }
    return failures == 0 ? 0 : 1;
  } catch (const zeus::Error& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
}
