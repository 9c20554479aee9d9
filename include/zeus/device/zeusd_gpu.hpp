// Privileged GPU calls through the zeusd daemon (docs/zeusd.md, "Using zeusd from jobs").
//
// When ZEUSD_SOCK_PATH (wins) or ZEUSD_HOST_PORT is set, discovery wraps every local GPU in a
// ZeusdGpu: reads (energy, power, limits, clocks lists, names) stay on the local vendor library;
// the setters (power limit, persistence mode, locked clocks) are sent to the daemon as
// `POST /gpu/set_*?gpu_ids=<daemon index>&...&block=true` (`block=false` from the overloads
// that take `block`), with `Authorization: Bearer
// $ZEUSD_TOKEN` when a token is set. The daemon's capabilities (GET /discover, and /auth/whoami
// when it requires auth) are checked on the first setter call: a daemon without `gpu-control`
// (or a token without that scope) makes only the setters fail, with the reason; reads keep
// working (the reference instead loses every GPU).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "zeus/device/forwarding_gpu.hpp"
#include "zeus/device/gpu.hpp"
#include "zeus/device/zeusd_config.hpp"

namespace zeus::device {

// The connection to the daemon that the ZeusdGpus of one discovery share (internal:
// device/zeusd_connection.hpp).
class ZeusdConnection;

// A Gpu whose setters go to zeusd; everything else goes to `inner`.
class ZeusdGpu final : public ForwardingGpu {
 public:
  // `daemon_index`: the GPU's index as the daemon numbers it (the vendor library's index over
  // all GPUs, i.e. the physical index). With `match_by_pci` (AMD, as the reference does) the
  // index is instead looked up in /discover by PCI bus id on first use.
  ZeusdGpu(std::shared_ptr<Gpu> inner, int daemon_index, std::shared_ptr<ZeusdConnection> daemon,
           bool match_by_pci = false);

  // Through the daemon, with `block=true`: the daemon answers once the GPU is changed.
  // set_power_limit_mw sends nothing when the local reading already equals the value (as the
  // reference does); reset_power_limit sets the local default limit.
  void set_power_limit_mw(std::uint32_t power_limit_mw) override;
  void reset_power_limit() override;
  void set_persistence_mode(bool enabled) override;
  void set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override;
  void reset_gpu_locked_clocks() override;
  void set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz) override;
  void reset_memory_locked_clocks() override;
  // AMD: the daemon's single reset_locked_clocks; otherwise GPU then memory clocks.
  void reset_locked_clocks() override;

  // Non-blocking setters, as the reference's zeusd GPUs have them: the same requests with
  // `block=false` when `block` is false. The daemon validates the request first (a bad value
  // is still an error here) and answers as soon as the write is queued, so the GPU may not be
  // changed yet when these return, and a failure of the write itself is only in the daemon's
  // log.
  bool supports_nonblocking_setters() const { return true; }
  void set_power_limit_mw(std::uint32_t power_limit_mw, bool block);
  void reset_power_limit(bool block);
  void set_persistence_mode(bool enabled, bool block);
  void set_gpu_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz, bool block);
  void reset_gpu_locked_clocks(bool block);
  void set_memory_locked_clocks_mhz(std::uint32_t min_mhz, std::uint32_t max_mhz, bool block);
  void reset_memory_locked_clocks(bool block);
  void reset_locked_clocks(bool block);

 private:
  // Checks the capability and sends `route?gpu_ids=<index><extra>&block=<block>`.
  void send(const std::string& operation, const std::string& route, const std::string& extra,
            bool block);
  int daemon_index();
  // The range rule of the daemon and NVML (device/clock_range.hpp) on the local clock lists, so
  // that a range that cannot be locked fails before a request is sent.
  void check_clock_range(bool memory, std::uint32_t min_mhz, std::uint32_t max_mhz);

  std::shared_ptr<ZeusdConnection> daemon_;
  std::mutex index_mutex_;
  std::optional<int> daemon_index_;
  bool match_by_pci_;
};

}  // namespace zeus::device
