// zeus::Error -> the Python classes of zeus_cpp.exception, through one table.
#include <array>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

#include "bindings.hpp"
#include "zeus/bso/wire.hpp"
#include "zeus/monitor/carbon.hpp"
#include "zeus/monitor/price.hpp"
#include "zeus/runtime/batch_size_optimizer.hpp"

namespace zeus::python {
namespace {

// THE table (docs/python.md reproduces it): the class each ErrorKind becomes, for an error about
// a GPU and for one about a CPU package or its DRAM.
struct KindClasses {
  ErrorKind kind;
  std::string_view gpu;
  std::string_view cpu;
};

constexpr std::array kKindTable{
    KindClasses{ErrorKind::kInvalidArgument, "ZeusGPUInvalidArgError", "ZeusCPUNotFoundError"},
    KindClasses{ErrorKind::kNotSupported, "ZeusGPUNotSupportedError", "ZeusRAPLNotSupportedError"},
    KindClasses{ErrorKind::kNoPermission, "ZeusGPUNoPermissionError", "ZeusCPUNoPermissionError"},
    KindClasses{ErrorKind::kNotFound, "ZeusGPUNotFoundError", "ZeusCPUNotFoundError"},
    KindClasses{ErrorKind::kLibraryNotFound, "ZeusGPULibraryNotFoundError", "ZeusCPUInitError"},
    KindClasses{ErrorKind::kFunctionNotFound, "ZeusGPUFunctionNotFoundError", "ZeusCPUInitError"},
    KindClasses{ErrorKind::kUninitialized, "ZeusGPUInitError", "ZeusCPUInitError"},
    KindClasses{ErrorKind::kAlreadyInitialized, "ZeusGPUAlreadyInitializedError",
                "ZeusCPUInitError"},
    KindClasses{ErrorKind::kInsufficientSize, "ZeusGPUInsufficientSizeError", "ZeusBaseCPUError"},
    KindClasses{ErrorKind::kInsufficientPower, "ZeusGPUInsufficientPowerError", "ZeusBaseCPUError"},
    KindClasses{ErrorKind::kDriverNotLoaded, "ZeusGPUDriverNotLoadedError", "ZeusCPUInitError"},
    KindClasses{ErrorKind::kTimeout, "ZeusGPUTimeoutError", "ZeusBaseCPUError"},
    KindClasses{ErrorKind::kIrqIssue, "ZeusGPUIRQError", "ZeusBaseCPUError"},
    KindClasses{ErrorKind::kCorruptedInfoRom, "ZeusGPUCorruptedInfoROMError", "ZeusBaseCPUError"},
    KindClasses{ErrorKind::kGpuLost, "ZeusGPULostError", "ZeusBaseCPUError"},
    KindClasses{ErrorKind::kResetRequired, "ZeusGPUResetRequiredError", "ZeusBaseCPUError"},
    KindClasses{ErrorKind::kOperatingSystem, "ZeusGPUOperatingSystemError", "ZeusBaseCPUError"},
    KindClasses{ErrorKind::kLibRmVersionMismatch, "ZeusGPULibRMVersionMismatchError",
                "ZeusBaseCPUError"},
    KindClasses{ErrorKind::kMemory, "ZeusGPUMemoryError", "ZeusBaseCPUError"},
    KindClasses{ErrorKind::kInitError, "ZeusGPUInitError", "ZeusCPUInitError"},
    KindClasses{ErrorKind::kIo, "ZeusGPUOperatingSystemError", "ZeusRAPLFileInitError"},
    KindClasses{ErrorKind::kUnknown, "ZeusGPUUnknownError", "ZeusBaseCPUError"},
};

// The classes of zeus_cpp.exception, looked up once at import. Handles are kept (one reference
// each) for the life of the process: they must not be released after the interpreter is gone.
std::unordered_map<std::string_view, py::handle>& classes() {
  static auto* map = new std::unordered_map<std::string_view, py::handle>();
  return *map;
}

std::string_view class_name_for(const Error& error, ErrorFamily family) {
  for (const KindClasses& entry : kKindTable) {
    if (entry.kind == error.kind()) {
      return family == ErrorFamily::kCpu ? entry.cpu : entry.gpu;
    }
  }
  return family == ErrorFamily::kCpu ? "ZeusBaseCPUError" : "ZeusGPUUnknownError";
}

// The family is the device the error is about (Error::subject()), which the layer that throws
// sets: a CPU package or its DRAM gives the CPU family, a GPU the GPU family.
ErrorFamily family_of(const Error& error) {
  switch (error.subject()) {
    case ErrorSubject::kCpu:
      return ErrorFamily::kCpu;
    case ErrorSubject::kGpu:
      return ErrorFamily::kGpu;
    case ErrorSubject::kNone:
      break;
  }
  // Errors about no device in particular (an argument, a file) take the GPU family, the
  // reference's default (its ZeusBaseGPUError hierarchy).
  return ErrorFamily::kGpu;
}

// The subject `_raise_error` gives its error: `subject` when named ("gpu", "cpu", "none"), else
// the device its message starts with, as a device backend would have marked it.
ErrorSubject subject_for_test(const std::string& subject, const std::string& message) {
  if (subject == "gpu") {
    return ErrorSubject::kGpu;
  }
  if (subject == "cpu") {
    return ErrorSubject::kCpu;
  }
  if (subject == "none") {
    return ErrorSubject::kNone;
  }
  if (!subject.empty()) {
    throw py::value_error("subject: expected 'gpu', 'cpu' or 'none', not '" + subject + "'");
  }
  const std::string_view what = message;
  return what.substr(0, 3) == "CPU" ? ErrorSubject::kCpu : ErrorSubject::kGpu;
}

void set_error(std::string_view name, const char* message) {
  PyErr_SetString(exception_class(name).ptr(), message);
}

}  // namespace

py::object exception_class(std::string_view name) {
  const auto found = classes().find(name);
  if (found == classes().end()) {
    throw std::invalid_argument("zeus_cpp: no exception class named " + std::string(name));
  }
  return py::reinterpret_borrow<py::object>(found->second);
}

void throw_python_error(std::string_view name, const std::string& message) {
  PyErr_SetString(exception_class(name).ptr(), message.c_str());
  throw py::error_already_set();
}

void set_python_error(const Error& error) {
  if (dynamic_cast<const bso::TrainFailedError*>(&error) != nullptr) {
    set_error("ZeusBSOTrainFailError", error.what());
  } else if (dynamic_cast<const bso::ServerError*>(&error) != nullptr) {
    set_error("ZeusBSORuntimError", error.what());
  } else if (dynamic_cast<const bso::ValidationError*>(&error) != nullptr) {
    set_error("ZeusBSOConfigError", error.what());
  } else if (dynamic_cast<const monitor::CarbonIntensityError*>(&error) != nullptr) {
    set_error(error.kind() == ErrorKind::kNotFound ? "ZeusCarbonIntensityNotFoundError"
                                                   : "ZeusCarbonIntensityHTTPError",
              error.what());
  } else if (dynamic_cast<const monitor::ElectricityPriceError*>(&error) != nullptr) {
    set_error(error.kind() == ErrorKind::kUnavailable ? "ZeusElectricityPriceHTTPError"
                                                      : "ZeusElectricityPriceNotFoundError",
              error.what());
  } else {
    set_error(class_name_for(error, family_of(error)), error.what());
  }
}

void throw_translated(const Error& error, ErrorFamily family) {
  throw_python_error(class_name_for(error, family), error.what());
}

void bind_errors(py::module_& module) {
  const py::module_ exceptions = py::module_::import("zeus_cpp.exception");
  auto& map = classes();
  auto add = [&](std::string_view name) {
    if (map.count(name) == 0) {
      py::object cls = exceptions.attr(py::str(name.data(), name.size()));
      map.emplace(name, cls.release());
    }
  };
  for (const KindClasses& entry : kKindTable) {
    add(entry.gpu);
    add(entry.cpu);
  }
  for (const std::string_view name :
       {"ZeusBaseError", "ZeusBaseGPUError", "ZeusBaseCPUError", "ZeusBaseSoCError",
        "ZeusGPUHeterogeneousError", "ZeusdError", "ZeusdConnectionError", "ZeusdAuthError",
        "ZeusdCapabilityError", "ZeusCPUInitError", "ZeusRAPLPermissionError", "ZeusSoCInitError",
        "ZeusBSOConfigError", "ZeusBSORuntimError", "ZeusBSOTrainFailError",
        "ZeusBSOOperationOrderError", "ZeusBSOBadOperationError", "ZeusCarbonIntensityHTTPError",
        "ZeusCarbonIntensityNotFoundError"}) {
    add(name);
  }
  add("ZeusElectricityPriceHTTPError");
  add("ZeusElectricityPriceNotFoundError");

  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      if (pointer) {
        std::rethrow_exception(pointer);
      }
    } catch (const Error& error) {
      set_python_error(error);
    }
  });

  // The table, for tests and docs: [(kind name, GPU class, CPU class), ...].
  py::list table;
  for (const KindClasses& entry : kKindTable) {
    table.append(py::make_tuple(std::string(error_kind_name(entry.kind)), std::string(entry.gpu),
                                std::string(entry.cpu)));
  }
  module.attr("_ERROR_TABLE") = table;

  // Raises the translation of an Error of kind `kind` (a name of the table) with `message` about
  // `subject`, as C++ code would: lets tests check the translator end to end.
  module.def(
      "_raise_error",
      [](const std::string& kind, const std::string& message, const std::string& subject) {
        for (const KindClasses& entry : kKindTable) {
          if (error_kind_name(entry.kind) == kind) {
            throw Error(entry.kind, message, subject_for_test(subject, message));
          }
        }
        throw py::value_error("kind: unknown error kind '" + kind + "'");
      },
      py::arg("kind"), py::arg("message"), py::arg("subject") = "");
}

}  // namespace zeus::python
