"""The on-call sweep of issue 57 again, on held-out data: German credit (UCI Statlog).

No test of the suite reads German credit, so this is data the fixes were not tuned on.
The table is scored by a logistic regression fitted on its first half (scikit-learn),
then every kind of the fifth sweep is run through the console command, each run in its
own process (its own JVM), and each is checked for a silent wrong number, a lost run
and a traceback:

- hostile names and values: the sensitive column's name, a group value and the dataset
  name carry markup and event handlers; the page must hold no event attribute and no
  script element, each value must be shown as text, and the selection rates must equal
  pandas';
- metastore writes: ``output.table`` through a Hive metastore (embedded Derby), two
  dates, then the first date rerun on other predictions: the table holds each date's
  published rows once, the rerun's for the first date;
- a small driver: ``spark.driver.memory: 1g``, the table replicated 600 times (600k rows)
  with a jitter on its numeric columns, ``group`` and ``hfm``: the group audit's rows
  are published and equal pandas', HFM completes or is reported failed (exit 4);
- odd paths: glob characters and a space in ``output.path``, two nights with a limit of
  persistence 2: the second night reads the first (its trends and the limit's
  persistence) and gates (exit 3).

Reads ``../shared/data`` (not a test: the suite must not depend on that folder).

    python studies/oncall_sweep.py            # prints one line per case, exit 1 on a miss
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
GERMAN = ROOT.parent / "shared" / "data" / "german" / "fairness-comparison" / "german.csv"
NUMERIC = ["month", "credit_amount", "investment_as_income_percentage", "residence_since",
           "age", "number_of_credits", "people_liable_for"]
PAYLOAD = "female x tabindex=0 autofocus onfocus=document.body.setAttribute('data-pwned',1) y"
HOSTILE_COLUMN = 'sex" onmouseover="alert(1)'


def scored_german() -> pd.DataFrame:
    """German credit with ``sex`` from ``personal_status``, ``good`` (1 = good credit) and a
    logistic regression's decision ``pred`` (fitted on the first 500 rows)."""
    from sklearn.linear_model import LogisticRegression

    df = pd.read_csv(GERMAN)
    df["sex"] = np.where(df["personal_status"].isin(["A92", "A95"]), "female", "male")
    df["good"] = (df["credit"] == 1).astype(int)
    feats = df.drop(columns=["credit", "good", "personal_status", "sex"])
    X = pd.get_dummies(feats, dtype=float)
    X = (X - X.min()) / (X.max() - X.min()).replace(0, 1)
    model = LogisticRegression(max_iter=2000).fit(X.iloc[:500], df["good"].iloc[:500])
    df["pred"] = model.predict(X).astype(int)
    df["pred2"] = (model.predict_proba(X)[:, 1] > 0.6).astype(int)
    df["row_id"] = np.arange(len(df)).astype(str)
    return df.drop(columns=["credit", "personal_status"])


def run(cfg: dict, folder: Path, *extra: str, timeout: float = 1800) -> tuple[int, str]:
    """``fairspark audit`` on ``cfg`` in a fresh process: (exit code, stderr)."""
    path = folder / f"cfg_{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([sys.executable, "-m", "fairspark.cli", "audit", "--config",
                           str(path), "-q", *extra], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    return proc.returncode, proc.stderr


def base_config(inp: Path, out: Path, *, sensitive: str = "sex",
                prediction: str = "pred") -> dict:
    return {"dataset": "german", "run_date": "2026-12-01", "input": {"path": str(inp)},
            "columns": {"sensitive": [{"column": sensitive, "privileged": "male"}],
                        "label": {"column": "good", "positive": 1},
                        "prediction": {"column": prediction, "positive": 1},
                        "row_key": "row_id", "exclude": ["pred", "pred2"]},
            "audits": {"group": {}}, "output": {"path": str(out)},
            "spark": {"master": "local[2]", "conf": {"spark.ui.enabled": "false"}}}


def rates_match(metrics: pd.DataFrame, df: pd.DataFrame, column: str, pred: str) -> bool:
    """The group audit's selection rates against pandas' (exactly, to 1e-12)."""
    rows = metrics[(metrics.audit == "group") & (metrics.metric == "selection_rate")]
    if rows.empty:
        return False
    for r in rows.itertuples():
        g = str(r.group)
        mask = ((df[column] == "male") if g == "privileged"
                else (df[column] != "male") if g == "unprivileged" else (df[column] == g))
        if abs(r.value - df.loc[mask, pred].mean()) > 1e-12:
            return False
    return True


class _Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.handlers: list[str] = []
        self.scripts = 0
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.scripts += tag == "script"
        self.handlers += [f"{tag} {k}" for k, _ in attrs if k.lower().startswith("on")]

    def handle_data(self, data):
        self.text.append(data)


def case_hostile(df: pd.DataFrame, tmp: Path) -> tuple[bool, str]:
    hostile = df.rename(columns={"sex": HOSTILE_COLUMN})
    hostile[HOSTILE_COLUMN] = hostile[HOSTILE_COLUMN].replace({"female": PAYLOAD})
    inp = tmp / "hostile.parquet"
    hostile.to_parquet(inp, index=False)
    cfg = base_config(inp, tmp / "hostile_out", sensitive=HOSTILE_COLUMN)
    cfg["dataset"] = "german</title><script>document.title='pwned'</script>"
    cfg["audits"] = {"group": {}, "hfm": {}}
    code, err = run(cfg, tmp)
    run_dir = tmp / "hostile_out" / "run_date=2026-12-01"
    if code not in (0, 3) or not (run_dir / "report.html").exists():
        return False, f"exit {code}: {err[-800:]}"
    page = _Markup()
    page.feed((run_dir / "report.html").read_text())
    text = " ".join(page.text)
    shown = all(v in text for v in (PAYLOAD, HOSTILE_COLUMN))
    ok_rates = rates_match(pd.read_parquet(run_dir / "metrics.parquet"), hostile,
                           HOSTILE_COLUMN, "pred")
    ok = (not page.handlers and page.scripts == 0 and shown and ok_rates
          and "Traceback" not in err)
    return ok, (f"exit {code}; event attributes {len(page.handlers)}, script elements "
                f"{page.scripts}, values shown as text {shown}, selection rates = pandas "
                f"{ok_rates}")


def case_metastore(df: pd.DataFrame, tmp: Path) -> tuple[bool, str]:
    inp = tmp / "german.parquet"
    df.to_parquet(inp, index=False)
    warehouse = tmp / "warehouse"
    conf = {"spark.sql.warehouse.dir": str(warehouse), "spark.ui.enabled": "false",
            "spark.sql.catalogImplementation": "hive",
            "spark.hadoop.javax.jdo.option.ConnectionURL":
                f"jdbc:derby:;databaseName={tmp / 'metastore_db'};create=true"}
    out = tmp / "table_out"
    codes = []
    for date, pred in (("2026-12-01", "pred"), ("2026-12-02", "pred"),
                       ("2026-12-01", "pred2")):  # the rerun: other decisions
        cfg = base_config(inp, out, prediction=pred)
        cfg["output"]["table"] = "german_fairness"
        cfg["spark"]["conf"] = conf
        code, err = run(cfg, tmp, "--run-date", date)
        codes.append(code)
        if code not in (0, 3) or "Traceback" in err:
            return False, f"exit {code} on {date} ({pred}): {err[-800:]}"
    stored = pd.read_parquet(warehouse / "german_fairness")
    stored["run_date"] = stored["run_date"].astype(str)
    key = ["audit", "attribute", "group", "metric"]
    same = True
    for date in ("2026-12-01", "2026-12-02"):
        published = pd.read_parquet(out / f"run_date={date}" / "metrics.parquet")
        mine = stored[stored.run_date == date]
        same &= (len(mine) == len(published) > 0 and mine.sort_values(key)["value"].tolist()
                 == published.sort_values(key)["value"].tolist())
    rerun = pd.read_parquet(out / "run_date=2026-12-01" / "metrics.parquet")
    ok_rates = rates_match(rerun, df, "sex", "pred2")
    ok = same and ok_rates and sorted(stored.run_date.unique()) == ["2026-12-01", "2026-12-02"]
    return ok, (f"exits {codes}; the table holds each date once, as published {same}; the "
                f"rerun's selection rates (pred2) = pandas {ok_rates}")


def case_small_driver(df: pd.DataFrame, tmp: Path, copies: int) -> tuple[bool, str]:
    rng = np.random.default_rng(57)
    big = pd.concat([df] * copies, ignore_index=True)
    for c in NUMERIC:
        span = float(df[c].max() - df[c].min())
        big[c] = big[c].astype(float) + rng.normal(0.0, 0.002 * span, len(big))
    big["row_id"] = np.arange(len(big)).astype(str)
    inp = tmp / "big.parquet"
    big.to_parquet(inp, index=False, row_group_size=200_000)
    cfg = base_config(inp, tmp / "small_out")
    cfg["audits"] = {"group": {}, "hfm": {}}
    cfg["spark"]["conf"]["spark.driver.memory"] = "1g"
    code, err = run(cfg, tmp)
    run_dir = tmp / "small_out" / "run_date=2026-12-01"
    if code not in (0, 3, 4) or not (run_dir / "summary.json").exists():
        return False, f"exit {code}: {err[-800:]}"
    summary = json.loads((run_dir / "summary.json").read_text())
    hfm = summary["audits"]["hfm"]["status"]
    ok_rates = rates_match(pd.read_parquet(run_dir / "metrics.parquet"), big, "sex", "pred")
    ok = ok_rates and summary["audits"]["group"]["status"] == "ok" and "Traceback" not in err
    return ok, (f"{len(big):,} rows, exit {code}; group {summary['audits']['group']['status']}"
                f", hfm {hfm}; selection rates = pandas {ok_rates}")


def case_odd_paths(df: pd.DataFrame, tmp: Path) -> tuple[bool, str]:
    inp = tmp / "german.parquet"
    if not inp.exists():
        df.to_parquet(inp, index=False)
    out = tmp / "odd [ab]{x,y}*?"
    (tmp / "odd ax").mkdir(exist_ok=True)  # a sibling a glob would match
    cfg = base_config(inp, out)
    # a limit every night violates beyond doubt (selection rates near 0.7 on 1,000 rows)
    cfg["limits"] = {"rules": [{"metric": "selection_rate", "max": 0.2, "persistence": 2}]}
    first, err1 = run(cfg, tmp, "--run-date", "2026-12-01")
    second, err2 = run(cfg, tmp, "--run-date", "2026-12-02")
    night2 = out / "run_date=2026-12-02"
    if not (night2 / "summary.json").exists():
        return False, f"exits {first}, {second}: {err2[-800:]}"
    summary = json.loads((night2 / "summary.json").read_text())
    prev = (summary.get("previous") or {}).get("run_date")
    ok = (first == 0 and second == 3 and prev == "2026-12-01"
          and "Traceback" not in err1 + err2)
    return ok, f"exits {first}, {second} (expected 0, 3); the second read the first: {prev}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=600, help="replication of the small-driver case")
    ap.add_argument("--cases", nargs="+", default=["hostile", "metastore", "small", "paths"])
    args = ap.parse_args(argv)
    df = scored_german()
    misses = 0
    with tempfile.TemporaryDirectory(prefix="oncall_") as name:
        tmp = Path(name)
        for case in args.cases:
            t = time.perf_counter()
            ok, what = {"hostile": lambda: case_hostile(df, tmp),
                        "metastore": lambda: case_metastore(df, tmp),
                        "small": lambda: case_small_driver(df, tmp, args.copies),
                        "paths": lambda: case_odd_paths(df, tmp)}[case]()
            misses += not ok
            print(f"{'clean' if ok else 'NOT CLEAN'}: {case} ({time.perf_counter() - t:.0f} s): "
                  f"{what}", flush=True)
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
