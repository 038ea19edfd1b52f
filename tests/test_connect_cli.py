"""``fairspark audit --remote sc://host:port``: the nightly job against a Spark Connect server.

Real processes only: a Spark Connect server started with pyspark's own
``sbin/start-connect-server.sh`` (SPARK_HOME = the pyspark package, a free port, its pid
and log files in a temporary folder, stopped at the end), and ``fairspark audit`` runs
as the user starts them. pyspark allows one session kind per process, and this pytest
process holds a classic session, so every Connect client here is a child process.
pyspark's in-process local server (``remote("local[2]")``) asks an auth token of other
processes, hence the standalone server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import COMPAS_CSV, write_parquet

ROOT = Path(__file__).resolve().parents[1]
RUN_DATE = "2026-12-05"
INSTALL = "pip install 'fairspark[connect]'"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("SPARK_REMOTE", None)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    """``sc://127.0.0.1:PORT`` of a Spark Connect server (``local[2]``) whose Python
    workers import this fairspark (``PYTHONPATH``); stopped when the module ends."""
    import pyspark

    home = Path(pyspark.__file__).parent
    folder = tmp_path_factory.mktemp("connect-server")
    port = _free_port()
    env = _env(SPARK_HOME=str(home), SPARK_PID_DIR=str(folder), SPARK_LOG_DIR=str(folder),
               SPARK_IDENT_STRING=f"fairspark-test-{port}", PYSPARK_PYTHON=sys.executable)
    start = [str(home / "sbin" / "start-connect-server.sh"), "--master", "local[2]",
             "--conf", f"spark.connect.grpc.binding.port={port}",
             "--conf", f"spark.executorEnv.PYTHONPATH={env['PYTHONPATH']}",
             "--conf", "spark.sql.shuffle.partitions=4",
             "--conf", "spark.ui.enabled=false",
             "--conf", "spark.driver.memory=2g"]
    subprocess.run(start, env=env, check=True, capture_output=True, timeout=120)
    pid_files = list(folder.glob("*.pid"))
    try:
        deadline = time.monotonic() + 240  # a loaded machine starts a JVM slowly
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                break
            except OSError:
                logs = "".join(p.read_text(errors="replace") for p in folder.glob("*.out"))
                if time.monotonic() > deadline or "Exception in thread" in logs:
                    pytest.fail(f"the Connect server did not start on {port}:\n{logs[-3000:]}")
                time.sleep(1)
        yield f"sc://127.0.0.1:{port}"
    finally:
        subprocess.run([str(home / "sbin" / "stop-connect-server.sh")], env=env,
                       capture_output=True, timeout=120)
        for pid_file in pid_files:  # the script's stop waits; a server left running is killed
            pid = int(pid_file.read_text().strip() or 0) if pid_file.exists() else 0
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture(scope="module")
def compas(tmp_path_factory):
    """ProPublica COMPAS (``tests/data``, the standard filter) as Parquet: a real table
    whose decision is "low risk" (decile score below 5), and the audit's config."""
    base = tmp_path_factory.mktemp("compas-connect")
    df = pd.read_csv(COMPAS_CSV)
    df = df[(df.days_b_screening_arrest.between(-30, 30)) & (df.is_recid != -1)
            & (df.c_charge_degree != "O") & (df.score_text != "N/A")]
    df = df[["id", "sex", "age", "race", "priors_count", "c_charge_degree", "decile_score",
             "two_year_recid"]].reset_index(drop=True)
    df["id"] = df["id"].astype(str)
    df["high"] = (df["decile_score"] >= 5).astype(int)
    inp = write_parquet(df, base / "in", n_files=2)
    cfg = {
        "dataset": "compas", "run_date": RUN_DATE, "input": {"path": inp},
        "columns": {
            "features": ["age", "priors_count", "c_charge_degree"],
            "sensitive": [{"column": "race", "privileged": "Caucasian"},
                          {"column": "sex", "privileged": "Male"}],
            "label": {"column": "two_year_recid", "positive": 0},
            "prediction": {"column": "high", "positive": 0},
            "row_key": "id",
        },
        "audits": {"group": {}},
        "output": {"path": str(base / "out"), "report": True},
    }
    path = base / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return df, path, base


def _audit(*args: str, cwd: Path, env: dict[str, str] | None = None,
           timeout: int = 600) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "fairspark.cli", "audit", *args]
    return subprocess.run(argv, cwd=cwd, env=env or _env(), capture_output=True, text=True,
                          timeout=timeout)


def _assert_group_outputs(out: Path, df: pd.DataFrame, session: str) -> None:
    """The published date holds the group audit's rows, each group's selection rate
    the share of low-risk decisions counted here in pandas."""
    assert (out / "_SUCCESS").exists()
    assert (out / "report.html").exists()
    rows = pd.read_parquet(out / "metrics.parquet")
    rates = rows[(rows["metric"] == "selection_rate") & (rows["attribute"] == "race")]
    rates = rates.set_index("group")["value"]
    low = df["high"] == 0
    want = low.groupby(df["race"]).mean()
    # the privileged value's row is named "privileged", every other value's by itself
    for race, rate in want.items():
        assert rates["privileged" if race == "Caucasian" else race] == pytest.approx(
            rate, abs=1e-12), race
    assert rates["unprivileged"] == pytest.approx(low[df["race"] != "Caucasian"].mean(),
                                                  abs=1e-12)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_code"] == 0
    assert summary["spark"]["session"] == session
    # the stage table starts with the process's start-up, then the session's start
    assert list(summary["stage_timings"])[:2] == ["start-up", "session start"]
    assert summary["stage_timings"]["session start"] > 0


@pytest.mark.parametrize("kind", ["classic", "connect", "connect-local"])
def test_the_group_audit_of_a_real_table_runs_on_either_session_kind(
        kind, compas, tmp_path, request):
    """``connect``: the standalone server; ``connect-local``: ``--remote local[1]``, pyspark's
    own local server started by the CLI's process with the settings of a local master."""
    df, config, base = compas
    out = tmp_path / "out"
    if kind.startswith("connect"):
        url = "local[1]" if kind == "connect-local" else request.getfixturevalue(
            "connect_server")
        args = ["--remote", url]
    else:
        args = ["--master", "local[1]"]
    proc = _audit("--config", str(config), "--output", str(out), *args, cwd=base)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "stage session start" in proc.stderr
    _assert_group_outputs(out / f"run_date={RUN_DATE}", df, kind.split("-")[0])
    summary = json.loads((out / f"run_date={RUN_DATE}" / "summary.json").read_text())
    if kind == "connect":
        assert summary["spark"]["remote"] == url and summary["spark"]["master"] == "local[2]"
    else:  # started here: sized from the machine, as a local master's session
        assert summary["spark"]["master"] == "local[1]"
        assert summary["spark"]["driver_memory_set_by"] == "machine"


_SESSION_SCRIPT = """
import json, logging, sys
logging.basicConfig(level=logging.WARNING, format="%(message)s")
from fairspark.session import build_session, check_python_workers, is_connect
from fairspark._run_summary import _spark_facts
url = sys.argv[1]
spark = build_session(remote=url, conf={"spark.sql.shuffle.partitions": 7,
                                        "spark.executor.memory": "3g"})
check_python_workers(spark)
from pyspark.sql import functions as F
n = spark.range(0, 1000, numPartitions=3).groupBy((F.col("id") % 10).alias("k")).count()
n = n.agg(F.sum("count")).first()[0]
print(json.dumps({"connect": is_connect(spark),
                  "shuffle": spark.conf.get("spark.sql.shuffle.partitions"),
                  "tz": spark.conf.get("spark.sql.session.timeZone"),
                  "rows": n,
                  "facts": _spark_facts(spark, remote=url + "/;token=s3cret")}))
"""


def test_a_remote_session_gets_the_settings_the_server_allows_and_names_the_others(
        connect_server, tmp_path):
    proc = subprocess.run([sys.executable, "-c", _SESSION_SCRIPT, connect_server],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["connect"] is True
    assert got["shuffle"] == "7"        # a runtime SQL setting is set on the session
    assert got["tz"] == "UTC"           # and fairspark's defaults where Connect allows them
    assert got["rows"] == 1000
    # a static setting cannot be set by a client: named, not dropped silently
    assert "spark.executor.memory" in proc.stderr and "not set" in proc.stderr
    facts = got["facts"]
    assert facts["session"] == "connect" and facts["master"] == "local[2]"
    assert facts["remote"] == connect_server + "/;token=***"    # the token is not recorded
    assert facts["server_host"] == "127.0.0.1" and facts["driver_max_heap_bytes"] is None
    assert "s3cret" not in proc.stdout + proc.stderr


def _assert_exit_2_before_any_output(proc, out: Path, *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr[-4000:]
    for fragment in fragments:
        assert fragment in proc.stderr, (fragment, proc.stderr[-4000:])
    assert "Traceback" not in proc.stderr
    assert not out.exists(), sorted(p.name for p in out.rglob("*"))  # no status file either


def test_an_unreachable_server_is_exit_2_naming_the_key_and_the_url(compas, tmp_path):
    _, config, base = compas
    url = f"sc://127.0.0.1:{_free_port()}/;token=s3cret"   # nothing listens there
    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = _audit("--config", str(config), "--output", str(out), "--remote", url, cwd=base)
    _assert_exit_2_before_any_output(proc, out, "spark.remote", url.replace("s3cret", "***"))
    assert "s3cret" not in proc.stderr
    assert time.monotonic() - t0 < 120   # not the client's minutes of retries


def test_a_config_naming_an_unreachable_server_is_exit_2(compas, tmp_path):
    _, config, base = compas
    raw = yaml.safe_load(config.read_text())
    raw["spark"] = {"remote": f"sc://127.0.0.1:{_free_port()}"}
    raw["output"]["path"] = str(tmp_path / "out")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    proc = _audit("--config", str(path), cwd=base)
    _assert_exit_2_before_any_output(proc, tmp_path / "out", "spark.remote",
                                     raw["spark"]["remote"])


@pytest.mark.parametrize("url", ["http://127.0.0.1:15002", "127.0.0.1:15002",
                                 "sc://host:port", "sc://host/a/path"])
def test_a_url_that_is_not_a_connect_url_is_exit_2(url, compas, tmp_path):
    _, config, base = compas
    out = tmp_path / "out"
    proc = _audit("--config", str(config), "--output", str(out), "--remote", url, cwd=base,
                  timeout=300)
    _assert_exit_2_before_any_output(proc, out, "spark.remote", "sc://host:port")


def test_missing_connect_client_packages_are_exit_2_naming_the_install(compas, tmp_path):
    """The client's packages hidden the way a plain ``pip install fairspark`` leaves them:
    a ``grpc`` that cannot be imported, first on the path."""
    _, config, base = compas
    shadow = tmp_path / "shadow" / "grpc"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named grpc')\n")
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), env["PYTHONPATH"]])
    out = tmp_path / "out"
    proc = _audit("--config", str(config), "--output", str(out),
                  "--remote", f"sc://127.0.0.1:{_free_port()}", cwd=base, env=env, timeout=300)
    _assert_exit_2_before_any_output(proc, out, "spark.remote", INSTALL, "grpcio")
