// Error types shared by every layer.
//
// Exceptions are used inside the library and translated at every boundary (CLI exit codes,
// Python exceptions, HTTP and daemon replies). Each error carries an ErrorKind whose names
// mirror the reference's exception classes (ZeusGPUNotSupportedError -> kNotSupported, ...).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace zeus {

enum class ErrorKind {
  kInvalidArgument,     // bad input from the caller (index, value, environment variable)
  kNotSupported,        // the device or driver cannot do this
  kNoPermission,        // the caller lacks the right (root, CAP_SYS_ADMIN, daemon)
  kNotFound,            // a device, file or resource does not exist
  kLibraryNotFound,     // a vendor library could not be loaded
  kFunctionNotFound,    // a required vendor symbol is missing
  kUninitialized,       // the vendor library was not initialised
  kAlreadyInitialized,  //
  kInsufficientSize,    //
  kInsufficientPower,   //
  kDriverNotLoaded,     //
  kTimeout,             //
  kIrqIssue,            //
  kCorruptedInfoRom,    //
  kGpuLost,             // the GPU fell off the bus
  kResetRequired,       //
  kOperatingSystem,     //
  kLibRmVersionMismatch,
  kMemory,
  kInitError,      // a backend or device could not be initialised
  kIo,             // reading or writing a file failed
  kConflict,       // the request contradicts the current state (e.g. a report for a closed trial)
  kAlreadyExists,  // what the caller asked to create exists already
  kUnavailable,    // a service or backend is down or failing; the caller may retry later
  kUnknown,
};

// Stable lower-case name of an error kind ("not_supported", ...), used in JSON and logs.
std::string_view error_kind_name(ErrorKind kind);

// The kind of device an error is about, when it is about one: the Python bindings raise the
// reference's GPU or CPU exception family from it (ZeusGPU...Error, ZeusCPU...Error).
enum class ErrorSubject {
  kNone,
  kGpu,
  kCpu,
};

// Base of every zeus exception.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message, ErrorSubject subject = ErrorSubject::kNone)
      : std::runtime_error(message), kind_(kind), subject_(subject) {}
  ErrorKind kind() const noexcept { return kind_; }
  ErrorSubject subject() const noexcept { return subject_; }

 private:
  ErrorKind kind_;
  ErrorSubject subject_;
};

// An error returned by a vendor library (NVML, AMD SMI): keeps the library's own return code and
// the name of the call that produced it.
class VendorError : public Error {
 public:
  VendorError(ErrorKind kind, std::string vendor, std::string call, long long vendor_code,
              const std::string& message, ErrorSubject subject = ErrorSubject::kGpu)
      : Error(kind, message, subject),
        vendor_(std::move(vendor)),
        call_(std::move(call)),
        vendor_code_(vendor_code) {}
  const std::string& vendor() const noexcept { return vendor_; }
  const std::string& call() const noexcept { return call_; }
  long long vendor_code() const noexcept { return vendor_code_; }

 private:
  std::string vendor_;
  std::string call_;
  long long vendor_code_;
};

// The advice appended to every permission error raised by a device setter.
std::string_view permission_hint();

}  // namespace zeus
