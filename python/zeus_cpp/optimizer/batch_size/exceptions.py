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
