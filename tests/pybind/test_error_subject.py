"""The GPU/CPU exception family follows the subject a C++ error carries, not its message."""
import pytest

from zeus_cpp import _zeus
from zeus_cpp import exception as exc


def test_cpu_subject_gives_the_cpu_family_whatever_the_message() -> None:
    with pytest.raises(exc.ZeusRAPLNotSupportedError):
        _zeus._raise_error("not_supported", "GPU 0: a message that names a GPU", subject="cpu")


def test_gpu_subject_gives_the_gpu_family_whatever_the_message() -> None:
    with pytest.raises(exc.ZeusGPUNotSupportedError):
        _zeus._raise_error("not_supported", "CPU package 0: a message", subject="gpu")


def test_no_subject_and_no_device_gives_the_gpu_family() -> None:
    with pytest.raises(exc.ZeusGPUNotFoundError):
        _zeus._raise_error("not_found", "no such thing", subject="none")


def test_no_subject_gives_the_gpu_family_even_when_the_message_names_a_cpu() -> None:
    # The family comes from the subject alone: the monitor marks its CPU errors itself.
    with pytest.raises(exc.ZeusGPUInvalidArgError):
        _zeus._raise_error("invalid_argument", "CPU package 3 is invalid", subject="none")


def test_cpu_subject_of_an_invalid_cpu_index_gives_the_cpu_family() -> None:
    with pytest.raises(exc.ZeusCPUNotFoundError):
        _zeus._raise_error("invalid_argument", "CPU package 3 is invalid", subject="cpu")


def test_unknown_subject_is_a_value_error_naming_the_parameter() -> None:
    with pytest.raises(ValueError, match="subject"):
        _zeus._raise_error("not_found", "x", subject="tpu")
