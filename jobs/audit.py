"""spark-submit entry point: ``spark-submit jobs/audit.py --config conf/x.yaml [--run-date D]``.

Thin on purpose: all logic lives in :mod:`fairspark`. Without ``--config`` the
bundled Adult demo runs. ``--remote sc://host:port`` (or ``spark.remote`` in the config)
runs it as a client of a Spark Connect server instead (``docs/connect.md``).
"""

from __future__ import annotations

import sys

from fairspark.cli import main

if __name__ == "__main__":
    sys.exit(main(None, under_submit=True, stop_session=True))  # argv: sys.argv[1:]
