"""The batch-size-optimizer client's exceptions (defined in zeus_cpp.exception)."""

from zeus_cpp.exception import (
    ZeusBSOBadOperationError,
    ZeusBSOConfigError,
    ZeusBSOOperationOrderError,
    ZeusBSORuntimError,
    ZeusBSOTrainFailError,
)

__all__ = [
    "ZeusBSOBadOperationError",
    "ZeusBSOConfigError",
    "ZeusBSOOperationOrderError",
    "ZeusBSORuntimError",
    "ZeusBSOTrainFailError",
]


class ZeusBSOTrialWarning(UserWarning):
    """zeus_cpp's: what became of a trial the server had not decided when its run ended (kept for
    resumption, resumed, or marked failed), and why."""


__all__.append("ZeusBSOTrialWarning")
