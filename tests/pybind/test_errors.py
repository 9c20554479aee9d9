"""The exception classes, their hierarchy, and the C++ -> Python translation table."""

from __future__ import annotations

import pytest

import zeus_cpp.exception as exc
from zeus_cpp import _zeus

GPU_CLASSES = [
    "ZeusGPUInitError", "ZeusGPUInvalidArgError", "ZeusGPUNotSupportedError",
    "ZeusGPUNoPermissionError", "ZeusGPUAlreadyInitializedError", "ZeusGPUNotFoundError",
    "ZeusGPUInsufficientSizeError", "ZeusGPUInsufficientPowerError",
    "ZeusGPUDriverNotLoadedError", "ZeusGPUTimeoutError", "ZeusGPUIRQError",
    "ZeusGPULibraryNotFoundError", "ZeusGPUFunctionNotFoundError",
    "ZeusGPUCorruptedInfoROMError", "ZeusGPULostError", "ZeusGPUResetRequiredError",
    "ZeusGPUOperatingSystemError", "ZeusGPULibRMVersionMismatchError", "ZeusGPUMemoryError",
    "ZeusGPUUnknownError", "ZeusGPUHeterogeneousError",
]
CPU_CLASSES = [
    "ZeusCPUInitError", "ZeusCPUNoPermissionError", "ZeusCPUNotFoundError",
    "ZeusRAPLNotSupportedError", "ZeusRAPLFileInitError", "ZeusRAPLPermissionError",
]
BSO_CLASSES = [
    "ZeusBSORuntimError", "ZeusBSOTrainFailError", "ZeusBSOConfigError",
    "ZeusBSOOperationOrderError", "ZeusBSOBadOperationError",
]
ZEUSD_CLASSES = ["ZeusdConnectionError", "ZeusdAuthError", "ZeusdCapabilityError"]


def test_base_hierarchy() -> None:
    assert issubclass(exc.ZeusBaseError, Exception)
    for name in ("ZeusBaseGPUError", "ZeusBaseCPUError", "ZeusBaseSoCError"):
        assert issubclass(getattr(exc, name), exc.ZeusBaseError)
    assert issubclass(exc.ZeusdError, exc.ZeusBaseGPUError)


@pytest.mark.parametrize("name", GPU_CLASSES)
def test_gpu_classes(name: str) -> None:
    assert issubclass(getattr(exc, name), exc.ZeusBaseGPUError)


@pytest.mark.parametrize("name", CPU_CLASSES)
def test_cpu_classes(name: str) -> None:
    assert issubclass(getattr(exc, name), exc.ZeusBaseCPUError)


@pytest.mark.parametrize("name", BSO_CLASSES)
def test_bso_classes(name: str) -> None:
    assert issubclass(getattr(exc, name), exc.ZeusBaseError)


@pytest.mark.parametrize("name", ZEUSD_CLASSES)
def test_zeusd_classes(name: str) -> None:
    assert issubclass(getattr(exc, name), exc.ZeusdError)


def test_invalid_arg_is_a_value_error() -> None:
    assert issubclass(exc.ZeusGPUInvalidArgError, ValueError)


def test_message_attribute() -> None:
    error = exc.ZeusGPUInitError("no NVML")
    assert error.message == "no NVML"
    assert str(error) == "no NVML"


def test_reexports() -> None:
    import zeus_cpp.device.exception as device_exc
    from zeus_cpp.device.gpu import ZeusGPUNotSupportedError
    from zeus_cpp.device.cpu import ZeusCPUInitError

    assert device_exc.ZeusBaseGPUError is exc.ZeusBaseGPUError
    assert ZeusGPUNotSupportedError is exc.ZeusGPUNotSupportedError
    assert ZeusCPUInitError is exc.ZeusCPUInitError
    assert exc.ZeusBSORuntimeError is exc.ZeusBSORuntimError


def test_table_covers_every_kind_with_existing_classes() -> None:
    kinds = [row[0] for row in _zeus._ERROR_TABLE]
    assert len(kinds) == len(set(kinds))
    assert "invalid_argument" in kinds and "not_supported" in kinds
    for _, gpu_class, cpu_class in _zeus._ERROR_TABLE:
        assert issubclass(getattr(exc, gpu_class), exc.ZeusBaseGPUError)
        assert issubclass(getattr(exc, cpu_class), exc.ZeusBaseCPUError)


@pytest.mark.parametrize("kind, gpu_class, cpu_class", _zeus._ERROR_TABLE)
def test_translation_gpu_family(kind: str, gpu_class: str, cpu_class: str) -> None:
    with pytest.raises(getattr(exc, gpu_class)) as info:
        _zeus._raise_error(kind, f"GPU 0: {kind}")
    assert type(info.value).__name__ == gpu_class
    assert str(info.value) == f"GPU 0: {kind}"


@pytest.mark.parametrize("kind, gpu_class, cpu_class", _zeus._ERROR_TABLE)
def test_translation_cpu_family(kind: str, gpu_class: str, cpu_class: str) -> None:
    with pytest.raises(getattr(exc, cpu_class)) as info:
        _zeus._raise_error(kind, f"CPU package 0: {kind}")
    assert type(info.value).__name__ == cpu_class


def test_unknown_kind_is_a_value_error_naming_the_parameter() -> None:
    with pytest.raises(ValueError, match="kind"):
        _zeus._raise_error("no_such_kind", "x")


def test_table_matches_the_docs() -> None:
    from conftest import REPO

    docs = (REPO / "docs" / "python.md").read_text()
    for kind, gpu_class, cpu_class in _zeus._ERROR_TABLE:
        row = [line for line in docs.splitlines() if line.startswith(f"| `{kind}`")]
        assert row, f"docs/python.md has no table row for {kind}"
        assert gpu_class in row[0] and cpu_class in row[0], row[0]
