"""The exception classes of zeus_cpp, with the reference's names and hierarchy.

Every error the native core raises is one of these (or a built-in ``ValueError``/``TypeError``
for a bad argument). Which C++ error becomes which class is one table, in
``src/python/errors.cpp`` and documented in ``docs/python.md``.

Hierarchy::

    Exception
    └── ZeusBaseError
        ├── ZeusBaseGPUError
        │   ├── ZeusGPU...Error (InitError, InvalidArgError, NotSupportedError, ...)
        │   └── ZeusdError (ZeusdConnectionError, ZeusdAuthError, ZeusdCapabilityError)
        ├── ZeusBaseCPUError
        │   ├── ZeusCPUInitError, ZeusCPUNoPermissionError, ZeusCPUNotFoundError
        │   └── ZeusRAPL...Error, ZeusEMI...Error
        ├── ZeusBaseSoCError (ZeusSoCInitError)
        ├── ZeusBSO...Error (the batch-size-optimizer client's errors)
        ├── ZeusCarbonIntensityHTTPError, ZeusCarbonIntensityNotFoundError
        └── ZeusElectricityPriceHTTPError, ZeusElectricityPriceNotFoundError

``ZeusGPUInvalidArgError`` is also a ``ValueError``, so that ``except ValueError`` catches a bad
GPU index as it catches any other bad argument.
"""

from __future__ import annotations


class ZeusBaseError(Exception):
    """Base of every zeus_cpp exception."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


# ---- Device families ------------------------------------------------------------------------


class ZeusBaseGPUError(ZeusBaseError):
    """Base of the GPU errors."""


class ZeusBaseCPUError(ZeusBaseError):
    """Base of the CPU (RAPL, EMI) errors."""


class ZeusBaseSoCError(ZeusBaseError):
    """Base of the system-on-chip errors."""


# ---- GPU ------------------------------------------------------------------------------------


class ZeusGPUInitError(ZeusBaseGPUError):
    """The GPU library or a GPU could not be initialised (also: not initialised)."""


class ZeusGPUInvalidArgError(ZeusBaseGPUError, ValueError):
    """An invalid argument: a GPU index that does not exist, a power limit out of range, ..."""


class ZeusGPUNotSupportedError(ZeusBaseGPUError):
    """The GPU or its driver cannot do this."""


class ZeusGPUNoPermissionError(ZeusBaseGPUError):
    """The process may not do this (root or CAP_SYS_ADMIN, or zeusd, is needed)."""


class ZeusGPUAlreadyInitializedError(ZeusBaseGPUError):
    """The GPU library was already initialised."""


class ZeusGPUNotFoundError(ZeusBaseGPUError):
    """The GPU or resource was not found."""


class ZeusGPUInsufficientSizeError(ZeusBaseGPUError):
    """A buffer was too small."""


class ZeusGPUInsufficientPowerError(ZeusBaseGPUError):
    """The GPU's external power cables are not properly attached."""


class ZeusGPUDriverNotLoadedError(ZeusBaseGPUError):
    """The GPU driver is not loaded."""


class ZeusGPUTimeoutError(ZeusBaseGPUError):
    """The operation timed out."""


class ZeusGPUIRQError(ZeusBaseGPUError):
    """The GPU's interrupt request has a problem."""


class ZeusGPULibraryNotFoundError(ZeusBaseGPUError):
    """The vendor library (NVML, AMD SMI) was not found."""


class ZeusGPUFunctionNotFoundError(ZeusBaseGPUError):
    """A function is missing from the vendor library."""


class ZeusGPUCorruptedInfoROMError(ZeusBaseGPUError):
    """The GPU's infoROM is corrupted."""


class ZeusGPULostError(ZeusBaseGPUError):
    """The GPU fell off the bus or is otherwise inaccessible."""


class ZeusGPUResetRequiredError(ZeusBaseGPUError):
    """The GPU needs a reset."""


class ZeusGPUOperatingSystemError(ZeusBaseGPUError):
    """The operating system refused the operation (or an I/O error)."""


class ZeusGPULibRMVersionMismatchError(ZeusBaseGPUError):
    """The vendor library and the kernel driver versions do not match."""


class ZeusGPUMemoryError(ZeusBaseGPUError):
    """Not enough memory."""


class ZeusGPUUnknownError(ZeusBaseGPUError):
    """Any other GPU error."""


class ZeusGPUHeterogeneousError(ZeusBaseGPUError):
    """The GPUs are not all the same model, but that was required."""


# ---- zeusd (the privileged daemon) ----------------------------------------------------------


class ZeusdError(ZeusBaseGPUError):
    """The zeusd daemon refused or failed a request."""


class ZeusdConnectionError(ZeusdError):
    """zeusd could not be reached or did not answer its discovery request."""


class ZeusdAuthError(ZeusdError):
    """zeusd rejected the token."""


class ZeusdCapabilityError(ZeusdError):
    """The token does not grant the scope, or the daemon does not serve the API group."""


# ---- CPU ------------------------------------------------------------------------------------


class ZeusCPUInitError(ZeusBaseCPUError):
    """No CPU energy interface could be initialised."""


class ZeusCPUNoPermissionError(ZeusBaseCPUError, RuntimeError):
    """The CPU energy counters exist but this process may not read them.

    Also a RuntimeError: where the reference's ZeusMonitor turns this error into a RuntimeError
    (CPU packages asked for, RAPL root-only), ours raises this one, which ``except RuntimeError``
    catches too. The message gives the cause and the fixes (zeusd, permissions, root).
    """


class ZeusCPUNotFoundError(ZeusBaseCPUError):
    """The CPU package was not found."""


class ZeusRAPLNotSupportedError(ZeusBaseCPUError):
    """RAPL is not supported on this machine (or not for this zone)."""


class ZeusRAPLFileInitError(ZeusBaseCPUError):
    """A RAPL file could not be read."""


class ZeusRAPLPermissionError(ZeusBaseCPUError):
    """A RAPL file may not be read by this process."""


class ZeusEMINotSupportedError(ZeusBaseCPUError):
    """The Windows Energy Meter Interface is not supported (never raised on Linux)."""


class ZeusEMIInitError(ZeusBaseCPUError):
    """The Windows Energy Meter Interface could not be initialised (never raised on Linux)."""


# ---- SoC ------------------------------------------------------------------------------------


class ZeusSoCInitError(ZeusBaseSoCError):
    """No system-on-chip energy interface is available (no Jetson power rails found)."""


# ---- Batch size optimizer client ------------------------------------------------------------


class ZeusBSOConfigError(ZeusBaseError):
    """The job or the machine does not fit the batch size optimizer (e.g. no GPU)."""


class ZeusBSORuntimError(ZeusBaseError):
    """The batch size optimizer server refused a request or could not be reached.

    The name keeps the reference's spelling; ``ZeusBSORuntimeError`` is the same class.
    """


ZeusBSORuntimeError = ZeusBSORuntimError


class ZeusBSOTrainFailError(ZeusBaseError):
    """The server stopped the trial without convergence; relaunch the job."""


class ZeusBSOOperationOrderError(ZeusBaseError):
    """Client methods were called out of order (e.g. on_evaluate before get_batch_size)."""


class ZeusBSOBadOperationError(ZeusBaseError):
    """An operation this process may not do (e.g. get_batch_size on a rank other than 0)."""


# ---- Carbon intensity (zeus_cpp.monitor.carbon re-exports these) ------------------------------


class ZeusCarbonIntensityHTTPError(ZeusBaseError):
    """The carbon intensity service failed (network, timeout, HTTP status, malformed answer)
    and no value was known to fall back on."""


class ZeusCarbonIntensityNotFoundError(ZeusBaseError):
    """The carbon intensity service answered without the value asked for."""


# ---- Electricity price (zeus_cpp.monitor.price re-exports these) -------------------------------


class ZeusElectricityPriceHTTPError(ZeusBaseError):
    """The electricity price service failed (network, timeout, HTTP status, malformed answer)
    and no fallback price was given."""


class ZeusElectricityPriceNotFoundError(ZeusBaseError):
    """No price was found: the service has no rate with the label asked for, or a provider's
    rate data lacks what a price needs."""


__all__ = [name for name, value in list(globals().items())
           if isinstance(value, type) and issubclass(value, ZeusBaseError)]
