// The part of NVML's C ABI that zeus uses, declared here so that the build never needs NVIDIA's
// headers. Values follow NVML's public nvml.h (types, return codes, field ids).
#pragma once

#include <cstdint>

namespace zeus::device::nvml {

using Return = int;                   // nvmlReturn_t
using Device = struct OpaqueDevice*;  // nvmlDevice_t

inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorAlreadyInitialized = 5;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorInsufficientPower = 8;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorIrqIssue = 11;
inline constexpr Return kErrorLibraryNotFound = 12;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorCorruptedInfoRom = 14;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorResetRequired = 16;
inline constexpr Return kErrorOperatingSystem = 17;
inline constexpr Return kErrorLibRmVersionMismatch = 18;
inline constexpr Return kErrorInUse = 19;
inline constexpr Return kErrorMemory = 20;
inline constexpr Return kErrorNoData = 21;
inline constexpr Return kErrorVgpuEccNotSupported = 22;
inline constexpr Return kErrorInsufficientResources = 23;
inline constexpr Return kErrorFreqNotSupported = 24;
inline constexpr Return kErrorArgumentVersionMismatch = 25;
inline constexpr Return kErrorDeprecated = 26;
inline constexpr Return kErrorNotReady = 27;
inline constexpr Return kErrorGpuNotFound = 28;
inline constexpr Return kErrorInvalidState = 29;
inline constexpr Return kErrorUnknown = 999;

inline constexpr unsigned kFieldPowerAverage = 185;  // NVML_FI_DEV_POWER_AVERAGE
inline constexpr unsigned kFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT
inline constexpr unsigned kPowerScopeGpu = 0;        // NVML_POWER_SCOPE_GPU
inline constexpr unsigned kPowerScopeModule = 1;     // NVML_POWER_SCOPE_MODULE
inline constexpr unsigned kPowerScopeMemory = 2;     // NVML_POWER_SCOPE_MEMORY
inline constexpr unsigned kTemperatureGpu = 0;       // NVML_TEMPERATURE_GPU

// nvmlDeviceArchitecture_t
inline constexpr unsigned kArchKepler = 2;
inline constexpr unsigned kArchMaxwell = 3;
inline constexpr unsigned kArchPascal = 4;
inline constexpr unsigned kArchVolta = 5;
inline constexpr unsigned kArchTuring = 6;
inline constexpr unsigned kArchAmpere = 7;
inline constexpr unsigned kArchAda = 8;
inline constexpr unsigned kArchHopper = 9;
inline constexpr unsigned kArchBlackwell = 10;

// nvmlValueType_t
inline constexpr int kValueDouble = 0;
inline constexpr int kValueUnsignedInt = 1;
inline constexpr int kValueUnsignedLong = 2;
inline constexpr int kValueUnsignedLongLong = 3;
inline constexpr int kValueSignedLongLong = 4;
inline constexpr int kValueSignedInt = 5;
inline constexpr int kValueUnsignedShort = 6;

union Value {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  int siVal;
  unsigned short usVal;
};

struct FieldValue {  // nvmlFieldValue_t
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  Return nvmlReturn;
  Value value;
};

struct PciInfo {  // nvmlPciInfo_t (as filled by nvmlDeviceGetPciInfo_v3)
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};

inline constexpr unsigned kDeviceNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned kDeviceUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
inline constexpr unsigned kVersionBufferSize = 80;     // NVML_SYSTEM_*_VERSION_BUFFER_SIZE

}  // namespace zeus::device::nvml
