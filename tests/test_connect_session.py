"""The session helpers on the session kind of this run (classic, or Connect on pyspark's
local server): the worker probe and ``summary.json``'s Spark facts take the route of
:func:`fairspark.session.is_connect`."""

from __future__ import annotations

import pytest

from fairspark._run_summary import _spark_facts
from fairspark.session import check_python_workers, is_connect, redact_remote, remote_address

pytestmark = pytest.mark.both_kinds


def test_the_worker_probe_runs_on_either_kind(spark, session_kind):
    assert is_connect(spark) == (session_kind == "connect")
    check_python_workers(spark)  # raises WorkerPythonError when the workers lack fairspark
    check_python_workers(spark)  # and leaves the session usable (classic: the log level back)
    assert spark.range(10).count() == 10


def test_the_spark_facts_are_what_the_session_exposes(spark, session_kind):
    facts = _spark_facts(spark, remote="sc://h:1/;token=abc" if session_kind == "connect"
                         else None)
    assert facts["session"] == session_kind
    assert facts["master"] == "local[2]"
    assert facts["app_id"] and facts["app_id"].startswith("local-")
    if session_kind == "connect":
        assert facts["remote"] == "sc://h:1/;token=***"
        assert facts["driver_max_heap_bytes"] is None
    else:
        assert facts["driver_max_heap_bytes"] > 0


def test_connect_urls_are_read_as_pyspark_reads_them():
    assert remote_address("sc://example.org") == ("example.org", 15002)
    assert remote_address("sc://example.org:443/;use_ssl=true;token=t") == ("example.org", 443)
    for bad in ("http://example.org:1", "sc://", "sc://h/path", "sc://h:x"):
        with pytest.raises(ValueError, match="not a Spark Connect URL"):
            remote_address(bad)
    assert redact_remote("sc://h/;token=abc;user_id=u") == "sc://h/;token=***;user_id=u"
