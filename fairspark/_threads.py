"""One BLAS/OpenMP/torch thread inside a Spark task: Spark already runs a task per core."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["pin_threads", "single_thread"]

_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def pin_threads() -> None:
    """Limit this process's numeric libraries to one thread (for the rest of its life).

    Sets the environment variables (read by libraries loaded later) and, through
    threadpoolctl, the already loaded BLAS/OpenMP pools; torch too when it is loaded.
    """
    for var in _VARS:
        os.environ[var] = "1"
    with contextlib.suppress(ImportError):  # threadpoolctl ships with scikit-learn
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            torch.set_num_threads(1)


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Context manager form of :func:`pin_threads` that restores the pools on exit."""
    for var in _VARS:
        os.environ.setdefault(var, "1")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        yield
        return
    with threadpool_limits(limits=1):
        yield
