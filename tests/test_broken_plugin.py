"""An audit plugin that cannot be loaded breaks neither ``import fairspark`` nor a run.

A distribution written into a temporary folder registers ``broken`` through the
``fairspark.audits`` entry-point group; its module raises when imported. In a fresh
process with it on the path, ``import fairspark`` reads no entry point, and a CLI run
reports the plugin failed, naming it, while the group audit completes (exit 4).
Also: the toy plugin of ``tests/toy_audit`` imports only the public face.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOOM = "the plugin's own import error"


def _broken_plugin(folder: Path) -> Path:
    """A distribution whose entry point ``broken`` names a module that raises."""
    pkg = folder / "broken_audit_plugin"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "spec.py").write_text(f"raise RuntimeError({BOOM!r})\n")
    info = folder / "broken_audit_plugin-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-audit-plugin\n"
                                   "Version: 0.0\n")
    (info / "entry_points.txt").write_text(
        "[fairspark.audits]\nbroken = broken_audit_plugin.spec:SPEC\n")
    return folder


def _python(code: str, *args: str, cwd: Path, plugin: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(plugin)])}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def test_import_fairspark_reads_no_entry_point(tmp_path):
    plugin = _broken_plugin(tmp_path / "plugin")
    code = ("import sys, fairspark; "
            "print(sorted(m for m in sys.modules if m.startswith(('fairspark.registry', "
            "'broken_audit_plugin', 'fairspark.group', 'fairspark.report')))); "
            "from fairspark.registry import broken, specs; "
            "print(list(specs())); print(broken()[0].message())")
    done = _python(code, cwd=tmp_path, plugin=plugin)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded, names, message = done.stdout.strip().splitlines()[-3:]
    assert loaded == "[]"  # nothing of the registry, the audits or the plugin
    assert names == str(["group", "hfm", "mdfa", "correlation"])  # the others load
    assert "'broken'" in message and "broken_audit_plugin.spec:SPEC" in message
    assert f"RuntimeError: {BOOM}" in message


def test_a_run_reports_the_broken_plugin_and_the_other_audits_complete(tmp_path):
    plugin = _broken_plugin(tmp_path / "plugin")
    rng = np.random.default_rng(5)
    n = 300
    sex = rng.choice(["M", "F"], n)
    pdf = pd.DataFrame({"x1": rng.normal(size=n), "sex": sex,
                        "y": (rng.random(n) < 0.5).astype(int),
                        "p": (rng.random(n) < np.where(sex == "M", 0.6, 0.4)).astype(int)})
    pdf.to_parquet(tmp_path / "in.parquet")
    cfg = {"dataset": "broken-plugin", "input": {"path": str(tmp_path / "in.parquet")},
           "columns": {"sensitive": [{"column": "sex", "privileged": "M"}],
                       "label": {"column": "y", "positive": 1},
                       "prediction": {"column": "p", "positive": 1}},
           # its section is accepted unread: the run reports the plugin, not the config
           "audits": {"group": {}, "broken": {"anything": 1}},
           "output": {"path": str(tmp_path / "out")},
           "spark": {"master": "local[1]", "conf": {"spark.sql.shuffle.partitions": 2}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    code = ("import sys; from fairspark import cli; "
            "print(cli.main(['audit', '--config', sys.argv[1], '--run-date', '2026-01-02', "
            "'-q'], stop_session=False))")
    done = _python(code, str(tmp_path / "c.yaml"), cwd=tmp_path, plugin=plugin)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "4", done.stderr[-3000:]  # one failed
    out = tmp_path / "out" / "run_date=2026-01-02"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["audits"]["group"]["status"] == "ok"
    detail = summary["audits"]["broken"]["detail"]
    assert summary["audits"]["broken"]["status"] == "failed"
    assert "audit plugin 'broken'" in detail and BOOM in detail
    m = pd.read_parquet(out / "metrics.parquet")
    spd = m[(m.audit == "group") & (m.metric == "statistical_parity_difference")
            & (m.group == "unprivileged")]
    rate = pdf.groupby("sex")["p"].mean()  # the group audit's number, from the table
    assert abs(float(spd.value.iloc[0]) - (rate["F"] - rate["M"])) < 1e-9
    assert set(m[m.audit == "broken"].status) == {"failed"}
    assert "audit plugin &#39;broken&#39;" in (out / "report.html").read_text() or \
        "audit plugin 'broken'" in (out / "report.html").read_text()


def test_the_toy_plugin_imports_only_the_public_face():
    """A plugin author needs ``fairspark.audits`` (and the column names), nothing private."""
    used = set()
    for path in (ROOT / "tests" / "toy_audit").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fairspark"):
                used |= {node.module} if node.module != "fairspark" else {
                    f"fairspark.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                used |= {a.name for a in node.names if a.name.startswith("fairspark")}
    assert used == {"fairspark.audits", "fairspark.columns"}
