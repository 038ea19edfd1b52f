"""Every code block of the README runs as written, on the demo data.

The README's blocks are read from the file, so an example that drifts from the code
fails here. Each shell line is either run (in a scratch folder laid out like the
repository: ``conf/``, ``jobs/`` and the demo's scored table at
``out/demo/_input/``) or listed in :data:`NOT_RUN` with the reason; a new line that is
neither fails :func:`test_every_readme_command_is_run_or_excused`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fairspark import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: README shell lines not run here, and why
NOT_RUN = {
    "bash scripts/test.sh": "the test suite itself: this test is part of it",
    "bash scripts/demo.sh": ("installs, then runs every audit on the demo (minutes); its "
                             "pieces run here: the scored table it writes and the job on it"),
    "fairspark demo": ("the whole demo (minutes); its scored table is what the tests' "
                       "demo_input fixtures write"),
    "python -m fairspark.demo_registry": (
        "registers two models in out/mlflow; tests/test_conf_examples.py calls its "
        "register_adult_models on a temporary store for conf/registry_release.yaml"),
    "fairspark audit --config conf/registry_release.yaml": (
        "needs the registry above: tests/test_conf_examples.py runs this config on a "
        "temporary store (tests/test_mlflow_registry.py checks the numbers)"),
    "pip install torch==2.13.0 && pip install .": ("installs: the suite runs in the "
                                                   "installed environment"),
}
#: the one change to a line before it runs: no YARN cluster here
SUBSTITUTE = {"--master yarn": "--master local[2]"}


def _blocks() -> list[tuple[str, str]]:
    text = README.read_text(encoding="utf-8")
    return [(m.group(1), m.group(2)) for m in
            re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)]


def _shell_lines() -> list[str]:
    out = []
    for lang, body in _blocks():
        if lang in ("bash", "sh", "shell"):
            out += [ln.strip() for ln in body.splitlines()
                    if ln.strip() and not ln.strip().startswith("#")]
    return out


def _run_lines() -> list[str]:
    return [ln for ln in _shell_lines() if ln not in NOT_RUN]


def test_every_readme_command_is_run_or_excused():
    langs = {lang for lang, _ in _blocks()}
    assert langs <= {"bash", "python", "json", "yaml"}, langs
    runnable = _run_lines()
    # every line that is not excused is one of the two ways to run the job
    for ln in runnable:
        argv = shlex.split(ln)
        assert argv[0] in ("fairspark", "spark-submit"), f"README line not tested: {ln!r}"
    assert any(shlex.split(ln)[0] == "fairspark" for ln in runnable)
    assert any(shlex.split(ln)[0] == "spark-submit" for ln in runnable)
    for ln in NOT_RUN:
        assert ln in _shell_lines(), f"NOT_RUN names a line the README no longer has: {ln!r}"
    for script in ("scripts/test.sh", "scripts/demo.sh"):
        assert (ROOT / script).is_file()
        subprocess.run(["bash", "-n", str(ROOT / script)], check=True)  # it parses


@pytest.fixture(scope="module")
def demo_input(spark, tmp_path_factory) -> str:
    """The demo's scored Adult table (and its fitted pipeline beside it)."""
    from fairspark.demo import demo_config, prepare_demo_input

    out = tmp_path_factory.mktemp("readme-demo")
    return prepare_demo_input(spark, config=demo_config(overrides={"output.path": str(out)}))


@pytest.fixture()
def workdir(tmp_path, demo_input, monkeypatch) -> Path:
    """A folder laid out like the repository root, the demo table where the README says."""
    shutil.copytree(ROOT / "conf", tmp_path / "conf")
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs")
    (tmp_path / "out" / "demo").mkdir(parents=True)
    shutil.copytree(Path(demo_input).parent, tmp_path / "out" / "demo" / "_input")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_readme_fairspark_audit_line_runs(workdir):
    (line,) = [ln for ln in _run_lines() if shlex.split(ln)[0] == "fairspark"
               and "adult_demo" in ln]
    argv = shlex.split(line)
    code = cli.main([*argv[1:], "-q"], under_submit=True)
    assert code == 0, line
    date = argv[argv.index("--run-date") + 1]
    run = workdir / "out" / "adult" / f"run_date={date}"  # conf/adult_demo.yaml's output
    assert (run / "_SUCCESS").exists()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["audits"]["group"]["status"] == "ok"
    assert summary["rows"]["audited"] > 15_000


def test_readme_champion_challenger_line_runs(workdir):
    (line,) = [ln for ln in _run_lines() if shlex.split(ln)[0] == "fairspark"
               and "champion_challenger" in ln]
    shutil.copytree(ROOT / "tests" / "data", workdir / "tests" / "data")  # COMPAS
    argv = shlex.split(line)
    code = cli.main([*argv[1:], "-q"], under_submit=True)
    assert code == 0, line
    date = argv[argv.index("--run-date") + 1]
    run = workdir / "out" / "compas_champion_challenger" / f"run_date={date}"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["audits"]["group"]["baseline"]["attributes"]["race"]
    assert summary["limits"]["checks"] > 0


def test_readme_spark_submit_line_runs(workdir):
    (line,) = [ln for ln in _run_lines() if shlex.split(ln)[0] == "spark-submit"]
    for a, b in SUBSTITUTE.items():
        line = line.replace(a, b)
    spark_submit = shutil.which("spark-submit") or str(
        Path(sys.executable).parent / "spark-submit")
    if not os.path.exists(spark_submit):
        pytest.skip("spark-submit is not installed")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    argv = [spark_submit, *shlex.split(line)[1:]]
    proc = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    date = argv[argv.index("--run-date") + 1]
    assert (workdir / "out" / "adult" / f"run_date={date}" / "_SUCCESS").exists()


def test_readme_notebook_example_runs_as_written(spark, demo_input, tmp_path, monkeypatch):
    (code,) = [body for lang, body in _blocks() if lang == "python"]
    monkeypatch.chdir(tmp_path)
    ns = {"scored_df": spark.read.parquet(demo_input)}
    exec(compile(code, "README.md (python block)", "exec"), ns)  # our own README
    result = ns["result"]
    assert result.exit_code in (0, 3)
    assert result.summary["audits"]["group"]["status"] == "ok"
    assert result.summary["audits"]["hfm"]["status"] == "ok"
    # the example excludes the score: it is not among HFM's features
    feats = result.summary["rows"]["features"]
    assert "score" not in feats["numeric"] and "score" not in feats["categorical"]
    assert "row_id" not in feats["categorical"]
    assert len(result.rows) and "<!DOCTYPE html>" in result.report_html()[:200]


def test_readme_window_example_runs(spark, workdir):
    """The README's ``window`` snippet, on the demo table written as day partitions."""
    import datetime as dt

    import yaml

    (body,) = [b for lang, b in _blocks() if lang == "yaml"]
    snippet = yaml.safe_load(body)
    pdf = spark.read.parquet(str(workdir / "out" / "demo" / "_input" /
                                 "adult_scored.parquet")).toPandas()
    days = [dt.date(2026, 11, 27) + dt.timedelta(days=i) for i in range(3)]
    base = workdir / "scored"
    for i, d in enumerate(days):
        folder = base / f"day={d.isoformat()}"
        folder.mkdir(parents=True)
        pdf.iloc[i::3].to_parquet(folder / "part-0.parquet", index=False)
    raw = yaml.safe_load((workdir / "conf" / "adult_demo.yaml").read_text())
    raw["input"] = {**snippet["input"], "path": str(base)}  # the README's, here
    raw["window"] = snippet["window"]
    (workdir / "window.yaml").write_text(yaml.safe_dump(raw))
    code = cli.main(["audit", "--config", "window.yaml", "--run-date", days[-1].isoformat(),
                     "-q"], under_submit=True)
    assert code == 0
    run = workdir / "out" / "adult" / f"run_date={days[-1].isoformat()}"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["window"]["partitions"] == [d.isoformat() for d in days]
    assert len(summary["window"]["missing"]) == snippet["window"]["days"] - 3
    assert summary["rows"]["audited"] == len(pdf.dropna(subset=["sex", "race"]))
    assert "Window: 30 days of day" in (run / "report.html").read_text()
    # the next run of the night restates one partition and reuses the others
    code = cli.main(["audit", "--config", "window.yaml", "--run-date", days[-1].isoformat(),
                     "--restate", days[0].isoformat(), "-q"], under_submit=True)
    summary = json.loads((run / "summary.json").read_text())
    assert code == 0 and list(summary["window"]["aggregated"]) == [days[0].isoformat()]
