"""The Python worker daemon of fairspark's local sessions (``python -m fairspark._daemon``).

PySpark's own daemon (``spark.python.daemon.module``, see
:func:`fairspark.session.build_session`) after :func:`fairspark._threads.preload` of
the numeric libraries and of every registered audit's ``worker_modules``. It sits
above the registry (only the CLI imports it, for :func:`preload_modules`): a plugin
that cannot be loaded costs its modules' preload only, never the daemon. The CLI hands
the daemon its list (:data:`~fairspark._threads.PRELOAD_ENV`), so that the daemon of a
CLI run does not load the registry before it forks the first worker.
"""

from __future__ import annotations

import os
import sys

from fairspark._threads import AUDITS_ENV, PRELOAD, PRELOAD_ENV, os_threads, preload

__all__ = ["BASE_PRELOAD", "daemon_modules", "main", "preload_modules"]


#: what the daemon imports when no enabled audit has Spark tasks of its own modules
#: (``group``, ``hfm``): the Arrow batch libraries; the heavy ones of
#: :data:`~fairspark._threads.PRELOAD` (torch, scikit-learn: about 2 s) would be paid by
#: the run's first Python job, HFM's transfer of the points
BASE_PRELOAD = ("numpy", "pandas", "pyarrow", "threadpoolctl")

def preload_modules() -> tuple[str, ...]:
    """:data:`~fairspark._threads.PRELOAD` and the ``worker_modules`` of every audit
    named in :data:`AUDITS_ENV` (of every registered audit when it is unset), in run
    order; :data:`BASE_PRELOAD` when none of those audits has worker modules
    (``PRELOAD`` alone when the registry cannot load)."""
    named = os.environ.get(AUDITS_ENV)
    try:
        from fairspark.registry import specs

        wanted = None if named is None else {a.strip() for a in named.split(",") if a.strip()}
        tasks = [m for name, spec in specs().items() if wanted is None or name in wanted
                 for m in spec.worker_modules]
    except Exception:  # noqa: BLE001 - a broken registry only costs time here
        return PRELOAD
    if named is not None and not tasks:
        return BASE_PRELOAD
    return (*PRELOAD, *dict.fromkeys(m for m in tasks if m not in PRELOAD))


def daemon_modules() -> tuple[str, ...]:
    """What the daemon imports: the modules named in :data:`PRELOAD_ENV` when the CLI
    set it (computed by :func:`preload_modules` on the driver, which has the registry
    loaded already), else :func:`preload_modules` here."""
    named = os.environ.get(PRELOAD_ENV)
    if named is not None:
        return tuple(m.strip() for m in named.split(",") if m.strip())
    return preload_modules()


def main() -> None:  # pragma: no cover - runs as Spark's worker daemon
    """PySpark's daemon after :func:`preload`, if the imports started no OS thread.

    PySpark's daemon forks its workers and must not hold threads when it forks; if an
    import started one, the preloaded daemon is not safe and plain PySpark's runs
    (the worker then imports the libraries itself).
    """
    preload(daemon_modules())
    if os_threads() != 1:
        print(
            f"fairspark: preloading started {os_threads()} threads; running the plain daemon",
            file=sys.stderr,
        )
        # nothing has been written to the JVM yet: become PySpark's own daemon
        os.execv(sys.executable, [sys.executable, "-m", "pyspark.daemon", *sys.argv[1:]])
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":  # pragma: no cover
    main()
