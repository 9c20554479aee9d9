"""The batch-size-optimizer client (the server is `zeus bso serve`)."""

from zeus_cpp.optimizer.batch_size.client import BatchSizeOptimizer
from zeus_cpp.optimizer.batch_size.common import JobSpec

__all__ = ["BatchSizeOptimizer", "JobSpec"]
