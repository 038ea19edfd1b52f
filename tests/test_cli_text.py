"""What the terminal says: ``--help`` and the few closing lines of a run."""

from __future__ import annotations

from types import SimpleNamespace

from fairspark import cli
from fairspark.run_summary import RunSummary
from fairspark.status import ExitCode


def test_audit_help_has_a_description_an_example_outputs_exit_codes_and_docs():
    text = cli.build_parser()._subparsers._group_actions[0].choices["audit"].format_help()
    for part in ("Audit a scored table", "example:", "fairspark audit --config",
                 "metrics.parquet", "summary.json", "report.html", "_status/run_date",
                 "exit codes:", "docs/operations.md"):
        assert part in text, part
    # every exit code of the ExitCode set is explained
    for code in (0, 1, 2, 3, 4):
        assert f"\n  {code}  " in text, code


def _result(code, limits, audits=None):
    audits = audits or {"group": {"status": "ok"}, "hfm": {"status": "ok"}}
    run = RunSummary.from_json({"audits": audits, "limits": limits or None})
    return SimpleNamespace(exit_code=code, output_dir="/o/run_date=2026-11-29",
                           run_summary=run)


def test_closing_lines_are_few_and_carry_the_summary_counts():
    detail = "; ".join(f"|DI| <= {i} (race / g{i})" for i in range(12))
    limits = {"checks": 28, "violated": 12, "inconclusive": 2, "passed": 14,
              "would_gate": True, "detail": detail}
    lines = cli.closing_lines(_result(ExitCode.OK, limits))
    assert lines[0] == ("fairspark: exit 0 (ok); limits: 12 of 28 checks violated, "
                        "2 inconclusive, 14 passed")
    assert lines[1].startswith("  not gating: limits.fail_on_violation is off")
    assert lines[2] == "  audits: group ok, hfm ok"
    assert lines[3] == "  first violated: |DI| <= 0 (race / g0) (+11 more: report.html, Limits)"
    assert lines[4:] == ["  outputs: /o/run_date=2026-11-29/", "    metrics.parquet",
                         "    summary.json", "    report.html"]
    assert max(map(len, lines)) < 120


def test_closing_lines_of_a_gating_run_and_a_failed_audit():
    limits = {"checks": 1, "violated": 1, "inconclusive": 0, "passed": 0,
              "would_gate": True, "detail": "|SPD| <= 0.1 (sex)"}
    audits = {"group": {"status": "ok"}, "mdfa": {"status": "failed", "detail": "no rows"}}
    lines = cli.closing_lines(_result(ExitCode.VIOLATION, limits, audits))
    assert lines[0] == ("fairspark: exit 3 (a limit gates this run); limits: 1 of 1 checks "
                        "violated, 0 inconclusive, 0 passed")
    assert lines[1] == "  audits: group ok, mdfa failed (no rows)"
    assert lines[2] == "  first violated: |SPD| <= 0.1 (sex)"
    lines = cli.closing_lines(_result(ExitCode.OK, {}))
    assert lines[0] == "fairspark: exit 0 (ok)" and not any("violated" in x for x in lines)


def test_a_missing_input_is_one_line_without_java_frames(tmp_path):
    """The real console command (its own local session and Spark's log settings): a
    missing input path ends with exit 2 and one error line naming the path; Spark's
    own stack trace (FileStreamSink's warning) and the local-run notices are not shown."""
    import subprocess
    import sys

    import yaml

    missing = tmp_path / "nowhere.parquet"
    cfg = {"dataset": "x", "input": {"path": str(missing)},
           "columns": {"sensitive": [{"column": "sex", "privileged": "M"}],
                       "label": {"column": "y"}, "prediction": {"column": "p"}},
           "audits": {"group": {}}, "output": {"path": str(tmp_path / "out")},
           "spark": {"conf": {"spark.driver.memory": "1g", "spark.ui.enabled": "false"}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [sys.executable, "-m", "fairspark.cli", "audit", "--config", str(tmp_path / "c.yaml"),
         "--run-date", "2026-11-29"], capture_output=True, text=True, timeout=600,
        cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert not [ln for ln in lines if ln.startswith(("\tat ", "java.", "Caused by"))], lines
    errors = [ln for ln in lines if " ERROR " in ln]
    assert len(errors) == 1 and str(missing) in errors[0], lines
    assert not [ln for ln in lines if "WARN" in ln and ("Utils" in ln or "NativeCode" in ln)]
    assert lines[-1] == errors[0], lines  # the run ends on its error
    # besides the stage table's lines (start-up, session start, ..., read)
    assert len([ln for ln in lines if " fairspark INFO stage " not in ln]) <= 5, lines
