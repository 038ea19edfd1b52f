"""One BLAS/OpenMP/torch thread inside a Spark task: Spark already runs a task per core.

Also :func:`preload`, with which the Python worker daemon fairspark's local sessions
use (``python -m fairspark._daemon``, see :func:`fairspark.session.build_session`),
PySpark's own daemon that forks one Python worker per concurrent task, imports the
numeric libraries once with one thread each. Spark ends a Python worker after a minute
without tasks; a fresh worker forked from this daemon starts with numpy, pandas,
pyarrow, scipy, scikit-learn, torch and the task modules already imported
(copy-on-write), instead of paying seconds of imports per worker before its first
training or split. The daemon itself pays them once per session (it starts with the
session's first Python task).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["AUDITS_ENV", "PRELOAD", "PRELOAD_ENV", "CpuTimedPool", "driver_threads",
           "os_threads", "pin_threads", "preload", "single_thread"]

_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

#: the environment variable naming a run's enabled audits (comma-separated), set by the
#: CLI before its local session starts: the worker daemon (:mod:`fairspark._daemon`)
#: then imports only what their Spark tasks need; unset, every registered audit's
AUDITS_ENV = "FAIRSPARK_WORKER_AUDITS"

#: the environment variable naming the modules the worker daemon imports (comma-
#: separated), set by the CLI from the enabled audits beside :data:`AUDITS_ENV`: the
#: daemon then imports them without loading the audit registry (about 0.9 s of
#: imports, scipy among them, on the path of a run's first Python task)
PRELOAD_ENV = "FAIRSPARK_WORKER_PRELOAD"

#: libraries the worker daemon imports before it forks workers, before the modules of
#: the audits' Spark tasks (``AuditSpec.worker_modules``; a fresh worker of an mdfa job
#: would otherwise spend seconds importing torch before its first split)
PRELOAD = (
    "numpy",
    "pandas",
    "pyarrow",
    "scipy.stats",
    "sklearn.linear_model",
    "sklearn.svm",
    "sklearn.ensemble",
    "sklearn.neighbors",
    "sklearn.neural_network",
    "sklearn.tree",
    "threadpoolctl",
    "torch",
)


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
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            torch.set_num_threads(1)


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Context manager form of :func:`pin_threads` that restores the pools on exit.

    BLAS/OpenMP pools through threadpoolctl, and torch's intra-op pool when torch is
    loaded (a reused Python worker may have loaded it in an earlier task).
    """
    for var in _VARS:
        os.environ.setdefault(var, "1")
    torch = sys.modules.get("torch")
    torch_before = None
    if torch is not None:
        with contextlib.suppress(Exception):
            torch_before = torch.get_num_threads()
            torch.set_num_threads(1)
    try:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover
            yield
            return
        with threadpool_limits(limits=1):
            yield
    finally:
        if torch_before is not None and torch_before != 1:
            with contextlib.suppress(Exception):
                torch.set_num_threads(torch_before)


def os_threads() -> int:
    """Threads of this process as the OS sees them (1 where /proc is not available)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # pragma: no cover - not Linux
        return 1


def preload(modules: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import ``modules`` with one thread each; return those that could not be imported.

    The worker daemon (:mod:`fairspark._daemon`) adds every audit's ``worker_modules``.
    """
    import importlib

    pin_threads()
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a missing optional library only costs time
            missing.append(name)
    pin_threads()  # pools the imports created
    return missing


def driver_threads() -> int:
    """Threads the driver gives its own numeric work (the mdfa view's nets): 2, or 1 on
    a one-core machine. Each thread runs single-threaded kernels, so the results do not
    depend on it."""
    return max(1, min(2, os.cpu_count() or 1))


class CpuTimedPool(Executor):
    """An executor that runs its jobs in ``pool`` and adds each job's CPU seconds (the
    thread's, :func:`time.thread_time`) to :attr:`cpu_s`, so that work spread over
    threads is still accounted for in one figure."""

    def __init__(self, pool: Executor) -> None:
        self.pool = pool
        self.cpu_s = 0.0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        def timed() -> Any:
            c0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    self.cpu_s += time.thread_time() - c0

        return self.pool.submit(timed)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """The wrapped pool is its owner's to shut down: nothing to do here."""
