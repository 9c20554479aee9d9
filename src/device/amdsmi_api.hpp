// The part of AMD SMI's C ABI (libamd_smi.so, ROCm 6.x and 7.x) that zeus uses, declared here so
// that the build never needs AMD's headers, plus the internal entry point the tests drive.
//
// Handles are opaque pointers and every status is a 32-bit enum. Structures whose later layout
// changed between ROCm releases are never declared whole: callers pass a zeroed buffer that is
// much larger than any released version of the structure and read only the leading fields, whose
// offsets have not moved (see AmdSmiBuffer and the offsets below).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "zeus/common/clock.hpp"
#include "zeus/common/env.hpp"
#include "zeus/common/error.hpp"
#include "zeus/device/gpu_provider.hpp"

namespace zeus::device::amdsmi {

using Status = std::uint32_t;     // amdsmi_status_t
using SocketHandle = void*;       // amdsmi_socket_handle
using ProcessorHandle = void*;    // amdsmi_processor_handle
using ClockType = std::uint32_t;  // amdsmi_clk_type_t

// amdsmi_status_t values.
inline constexpr Status kStatusSuccess = 0;
inline constexpr Status kStatusInval = 1;
inline constexpr Status kStatusNotSupported = 2;
inline constexpr Status kStatusNotYetImplemented = 3;
inline constexpr Status kStatusFailLoadModule = 4;
inline constexpr Status kStatusFailLoadSymbol = 5;
inline constexpr Status kStatusDrmError = 6;
inline constexpr Status kStatusApiFailed = 7;
inline constexpr Status kStatusTimeout = 8;
inline constexpr Status kStatusRetry = 9;
inline constexpr Status kStatusNoPerm = 10;
inline constexpr Status kStatusInterrupt = 11;
inline constexpr Status kStatusIo = 12;
inline constexpr Status kStatusAddressFault = 13;
inline constexpr Status kStatusFileError = 14;
inline constexpr Status kStatusOutOfResources = 15;
inline constexpr Status kStatusInternalException = 16;
inline constexpr Status kStatusInputOutOfBounds = 17;
inline constexpr Status kStatusInitError = 18;
inline constexpr Status kStatusRefcountOverflow = 19;
inline constexpr Status kStatusBusy = 30;
inline constexpr Status kStatusNotFound = 31;
inline constexpr Status kStatusNotInit = 32;
inline constexpr Status kStatusNoSlot = 33;
inline constexpr Status kStatusDriverNotLoaded = 34;
inline constexpr Status kStatusNoData = 40;
inline constexpr Status kStatusInsufficientSize = 41;
inline constexpr Status kStatusUnexpectedSize = 42;
inline constexpr Status kStatusUnexpectedData = 43;
inline constexpr Status kStatusNonAmdCpu = 44;
inline constexpr Status kStatusNoEnergyDrv = 45;
inline constexpr Status kStatusNoMsrDrv = 46;
inline constexpr Status kStatusNoHsmpDrv = 47;
inline constexpr Status kStatusNoHsmpSup = 48;
inline constexpr Status kStatusNoHsmpMsgSup = 49;
inline constexpr Status kStatusHsmpTimeout = 50;
inline constexpr Status kStatusNoDrv = 51;
inline constexpr Status kStatusFileNotFound = 52;
inline constexpr Status kStatusArgPtrNull = 53;
inline constexpr Status kStatusAmdgpuRestartErr = 54;
inline constexpr Status kStatusSettingUnavailable = 55;
inline constexpr Status kStatusMapError = 0xFFFFFFFEu;
inline constexpr Status kStatusUnknownError = 0xFFFFFFFFu;

inline constexpr std::uint64_t kInitAmdGpus = 1u << 1;  // AMDSMI_INIT_AMD_GPUS

inline constexpr ClockType kClockTypeGfx = 0;  // AMDSMI_CLK_TYPE_GFX (== AMDSMI_CLK_TYPE_SYS)
inline constexpr ClockType kClockTypeMem = 4;  // AMDSMI_CLK_TYPE_MEM

inline constexpr std::uint32_t kTemperatureTypeHotspot = 1;    // AMDSMI_TEMPERATURE_TYPE_HOTSPOT
inline constexpr std::uint32_t kTemperatureMetricCurrent = 0;  // AMDSMI_TEMP_CURRENT
inline constexpr std::uint32_t kPerfLevelAuto = 0;             // AMDSMI_DEV_PERF_LEVEL_AUTO

// amdsmi_bdf_t (read as the first uint64 of an AmdSmiBuffer): function in bits 0-2, device
// 3-7, bus 8-15, domain 16-63.

// amdsmi_version_t. Up to AMD SMI 24.x (ROCm <= 6.3) it starts {year, major, minor, release};
// from 25.x (ROCm 6.4, where the year was dropped) it starts {major, minor, release}. The first
// word is therefore 24 or less for the old library and 25 or more for the new one.
inline constexpr std::uint32_t kFirstNewLayoutVersion = 25;

// Leading-field offsets (bytes) of the structures read through an AmdSmiBuffer.
// amdsmi_asic_info_t: char market_name[256] first in every release.
inline constexpr std::size_t kAsicMarketNameOffset = 0;
inline constexpr std::size_t kAsicMarketNameSize = 256;
// amdsmi_driver_info_t: char driver_version[AMDSMI_MAX_STRING_LENGTH] first (64, later 256).
inline constexpr std::size_t kDriverVersionOffset = 0;
inline constexpr std::size_t kDriverVersionSize = 64;
// amdsmi_enumeration_info_t: {drm_render, drm_card, hsa_id, hip_id, ...}, all uint32.
inline constexpr std::size_t kEnumerationHipIdOffset = 12;
// amdsmi_kfd_info_t: {uint64 kfd_id, uint32 node_id, ...}.
inline constexpr std::size_t kKfdNodeIdOffset = 8;
// amdsmi_power_cap_info_t: {power_cap, default_power_cap, dpm_cap, min_power_cap, max_power_cap}
// as uint64 in microwatts (dpm_cap in MHz).
inline constexpr std::size_t kPowerCapOffset = 0;
inline constexpr std::size_t kDefaultPowerCapOffset = 8;
inline constexpr std::size_t kMinPowerCapOffset = 24;
inline constexpr std::size_t kMaxPowerCapOffset = 32;
// amdsmi_power_info_t, watts. Old (<= 24.x): {uint32 current_socket_power, uint32
// average_socket_power, ...}. New (>= 25.x): {uint64 socket_power, uint32 current_socket_power,
// uint32 average_socket_power, ...}.
inline constexpr std::size_t kOldCurrentSocketPowerOffset = 0;
inline constexpr std::size_t kOldAverageSocketPowerOffset = 4;
inline constexpr std::size_t kNewCurrentSocketPowerOffset = 8;
inline constexpr std::size_t kNewAverageSocketPowerOffset = 12;
// Unsupported power fields read as UINT16_MAX (copied from gpu_metrics) or UINT32_MAX.
inline constexpr std::uint32_t kPowerFieldUnsupported16 = 0xFFFFu;
inline constexpr std::uint32_t kPowerFieldUnsupported32 = 0xFFFFFFFFu;
// amdsmi_frequencies_t: {bool has_deep_sleep, uint32 num_supported, uint32 current,
// uint64 frequency[AMDSMI_MAX_NUM_FREQUENCIES = 33]} with frequencies in hertz.
inline constexpr std::size_t kFrequenciesNumSupportedOffset = 4;
inline constexpr std::size_t kFrequenciesListOffset = 16;
inline constexpr std::size_t kMaxNumFrequencies = 33;

// A zeroed, 8-byte aligned buffer far larger than any released version of the structures above.
class AmdSmiBuffer {
 public:
  static constexpr std::size_t kSize = 8192;
  void* data() { return bytes_.data(); }
  template <typename T>
  T read(std::size_t offset) const {
    T value{};
    std::memcpy(&value, bytes_.data() + offset, sizeof(T));
    return value;
  }
  // A NUL-terminated string of at most `max_size` bytes starting at `offset`.
  std::string read_string(std::size_t offset, std::size_t max_size) const;

 private:
  alignas(16) std::array<unsigned char, kSize> bytes_{};
};

// "AMDSMI_STATUS_NO_PERM", ...; "AMDSMI_STATUS_<code>" for codes this build does not know.
std::string status_name(Status status);
// The zeus error kind for an AMD SMI status (the reference's mapping, see docs/amdsmi.md).
ErrorKind error_kind_for_status(Status status);

}  // namespace zeus::device::amdsmi

namespace zeus::device {

// Knobs of open_amdsmi that tests (and only tests) change.
struct AmdSmiOptions {
  // Length of the energy-counter validation window run once for all devices at open.
  double validation_window_s = 0.5;
  // Clock that times the window and sleeps through it; the steady clock when null (a
  // ManualClock's sleep is an instant advance).
  std::shared_ptr<Clock> clock;
  // Environment for the library search hints (AMDSMI_LIB_DIR, ROCM_PATH); the process
  // environment when empty.
  EnvLookup env;
};

// open_amdsmi with explicit options. open_amdsmi(path) is open_amdsmi_with_options(path, {}).
std::shared_ptr<GpuProvider> open_amdsmi_with_options(const std::string& library_path,
                                                      const AmdSmiOptions& options);

}  // namespace zeus::device
