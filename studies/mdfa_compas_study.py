"""The paper's COMPAS study, run through the real audit job.

Data: ``compas-scores-two-years.csv`` (ProPublica). By default ProPublica's row filter
(``-30 <= days_b_screening_arrest <= 30``, ``is_recid != -1``, ``c_charge_degree != 'O'``,
``score_text != 'N/A'``: 6,172 of 7,214 rows); ``raw`` keeps every row, as the authors'
reference code did. Decision: the **violent** score text 'High' (``v_score_text``), as in
the paper's Table 2 (High 0.14 for African-Americans, 0.05 for the others: the raw file's
``v_score_text``; the general ``score_text`` gives 0.28 and 0.11) and the authors' code;
'High' is the unfavourable decision, so the paper's gamma is fairspark's
``gamma_unfavourable``. Features I-V as Table 1 lists them: priors_count (I),
c_charge_degree (II, F/M), age (III), juv_fel_count (IV), juv_misd_count (V).
s = +1: African-American (race) or Male (sex), as in the paper.

Every run goes through :func:`fairspark.runner.run_audit_job` on a Parquet copy (the
same path as the CLI) and prints one line per attribute with the load average and the
wall seconds. Usage::

    python studies/mdfa_compas_study.py --runs filtered:defaults:100 \\
        --out /tmp/hB_compas_study.md
    python studies/mdfa_compas_study.py --runs filtered:paper:30,raw:defaults:30

``--masses`` runs the driver-side experiment on how the s = +1 weights' total mass moves
gamma (the reference code does not rescale it; fairspark sets Pr_w[S = +1] = 1/2).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))

from fairspark.mdfa.validation import COMPAS_DECISION, COMPAS_FEATURES, load_compas

CSV = DATA / "compas" / "compas-scores-two-years.csv"
#: features I-V of the paper's Table 1, the audited decision, the columns kept
FEATURES, DECISION = COMPAS_FEATURES, COMPAS_DECISION
CATEGORICAL = ["c_charge_degree"]

#: named settings of audits.mdfa (everything else at its default)
SETTINGS = {
    "defaults": {},
    # the paper's (reference code's) balancing, selectable by name
    "paper": {"mmd_kernel": "linear", "mmd_features": "standardised", "learning_rate": 1e-3},
    "uniform": {"balancing": "uniform"},
}
#: Table 1 of the paper (features I-V): mean (sd) over 100 splits
PAPER = {"race": (0.023761, 0.004312), "sex": (-0.0001, 0.0006)}
PAPER_DELTA = 1.28


def _config(inp: Path, out: Path, mdfa: dict, *, features: list[str], categorical: list[str],
            attributes: list[str]) -> dict:
    sensitive = {
        "race": {"column": "race", "name": "race",
                 "privileged_expr": "race <> 'African-American'"},
        # privileged Female makes Male the unprivileged side, i.e. s = +1 (the paper's)
        "sex": {"column": "sex", "name": "sex", "privileged": "Female"},
    }
    return {
        "dataset": "compas_mdfa_study", "run_date": "2026-11-30", "seed": 7,
        "input": {"path": str(inp)},
        "columns": {
            "features": features, "categorical": categorical,
            "sensitive": [sensitive[a] for a in attributes],
            "label": {"column": "two_year_recid", "positive": 1},
            "favourable": "negative",
            "prediction": {"column": DECISION, "positive": "High"},
            "row_key": "id",
        },
        "audits": {"group": None, "mdfa": mdfa},
        "output": {"path": str(out), "report": False},
    }


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _f(v, nd: int = 4) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:.{nd}f}"


def run_one(spark, *, data: str, setting: str, splits: int, attributes: list[str],
            tmp: Path, worst_violation: bool, age: str = "age") -> list[dict]:
    """One audit job; one record per attribute with the numbers of the study table."""
    from fairspark.config import parse_config
    from fairspark.runner import run_audit_job

    df = load_compas(path=CSV, filtered=data == "filtered")
    tag = f"{data}_{setting}_{splits}_{age}"
    inp = tmp / f"in_{data}"
    inp.mkdir(parents=True, exist_ok=True)
    df.to_parquet(inp / "part-0.parquet", index=False)
    feats = [age if f == "age" else f for f in FEATURES]
    cats = CATEGORICAL + (["age_cat"] if age == "age_cat" else [])
    mdfa = {"splits": splits, "worst_violation": worst_violation, **SETTINGS[setting]}
    load0, t0 = _load(), time.time()
    res = run_audit_job(spark, parse_config(_config(
        inp, tmp / f"out_{tag}", mdfa, features=feats, categorical=cats,
        attributes=attributes)))
    secs = time.time() - t0
    load1 = _load()
    out = []
    for attr in attributes:
        a = res.summary["audits"]["mdfa"]["attributes"][attr]
        if a.get("status") == "failed":
            out.append({"data": data, "setting": setting, "attribute": attr,
                        "failed": a.get("reason")})
            continue
        null = a.get("null") or {}
        rec = {
            "data": data, "setting": setting, "age": age, "attribute": attr,
            "rows": len(df), "splits": a["splits"], "seconds": secs,
            "load_before": load0, "load_after": load1,
            "gamma_high": a["gamma_neg"], "gamma_max": a["gamma_max"],
            "gamma_pos": a["gamma_pos"],
            # the reported value, raw less the features-only reference, with its 95%
            # interval (absent from summaries written before commit 6d328f2)
            "corrected_high": (a.get("corrected") or {}).get("gamma_neg"),
            "verdict": "evidence" if null.get("evidence") else "no evidence",
            "p_value": null.get("p_value"), "null_mean": null.get("mean"),
            "null_bound": null.get("bound"), "observed": null.get("observed"),
            "delta": a["delta"], "delta_unweighted": a["delta_unweighted"],
            "ratio_in_subgroup": a["ratio_in_subgroup"], "mass": a["mass"],
            "balance_auc_before": a["balance_auc_before"]["mean"],
            "balance_auc": a["balance_auc"]["mean"],
            "max_abs_smd_before": a["max_abs_smd_before"]["mean"],
            "max_abs_smd_after": a["max_abs_smd_after"]["mean"],
            "outcome_gap_before": a["outcome_gap_before"]["mean"],
            "outcome_gap_after": a["outcome_gap_after"]["mean"],
            "poor_splits": a["balance"]["poor_splits"],
            "finding": a.get("finding"),
        }
        out.append(rec)
        print(json.dumps({k: rec[k] for k in ("data", "setting", "age", "attribute", "splits",
                                              "verdict", "p_value", "seconds",
                                              "load_before", "load_after")})
              + f" gamma(High) {_f(rec['gamma_high']['mean'])} "
              f"({_f(rec['gamma_high']['sd'])}), delta {_f(rec['delta']['mean'], 3)}, "
              f"delta_unweighted {_f(rec['delta_unweighted']['mean'], 3)}", flush=True)
    return out


def gamma_table(recs: list[dict]) -> list[str]:
    """The study table: gamma(High) beside Table 1, the verdict, balance."""
    lines = ["| data (rows) | setting | attribute | splits | gamma(High): mean (sd) | "
             "2.5% - 97.5% | paper (Table 1) | reported: less features-only reference "
             "[95%] | gamma_max | null reference (bound) | "
             "verdict (p) | AUC before -> after | max abs SMD before -> after | "
             "poor splits | seconds | load before / after |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        if "failed" in r:
            lines.append(f"| {r['data']} | {r['setting']} | {r['attribute']} | failed: "
                         f"{r['failed']} ||||||||||||")
            continue
        g, gm = r["gamma_high"], r["gamma_max"]
        pm, ps = PAPER[r["attribute"]]
        age = "" if r.get("age", "age") == "age" else f", {r['age']}"
        pv = "n/a" if r["p_value"] is None else f"{r['p_value']:.2g}"
        c = r.get("corrected_high")
        cor = ("n/a" if not c else
               f"{_f(c['value'])} [{_f(c['lower'])}, {_f(c['upper'])}]")
        lines.append(
            f"| {r['data']} ({r['rows']:,}) | {r['setting']}{age} | {r['attribute']} | "
            f"{r['splits']} | {_f(g['mean'])} ({_f(g['sd'])}) | "
            f"{_f(g['p2_5'])} - {_f(g['p97_5'])} | {pm:.4f} ({ps:.4f}) | {cor} | "
            f"{_f(gm['mean'])} | "
            f"{_f(r['null_mean'])} ({_f(r['null_bound'])}) | {r['verdict']} ({pv}) | "
            f"{_f(r['balance_auc_before'], 3)} -> {_f(r['balance_auc'], 3)} | "
            f"{_f(r['max_abs_smd_before'], 3)} -> {_f(r['max_abs_smd_after'], 3)} | "
            f"{r['poor_splits']} | {r['seconds']:.0f} | {r['load_before']} / {r['load_after']} |")
    return lines


def delta_table(recs: list[dict]) -> list[str]:
    """delta beside the paper's 1.28 (Algorithm 1 ran only where delta is finite)."""
    lines = ["| data | setting | attribute | splits | delta (Alg. 1 line 4, weighted): "
             "mean (sd) | delta_unweighted: mean (sd) | outcome ratio in subgroup | "
             "subgroup mass | paper |", "|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        if "failed" in r or r["delta"]["mean"] is None:
            continue
        d, du = r["delta"], r["delta_unweighted"]
        lines.append(
            f"| {r['data']} | {r['setting']} | {r['attribute']} | {r['splits']} | "
            f"{_f(d['mean'], 3)} ({_f(d['sd'], 3)}) | {_f(du['mean'], 3)} ({_f(du['sd'], 3)})"
            f"{'; ' + str(du['n_inf']) + ' infinite' if du.get('n_inf') else ''} | "
            f"{_f(r['ratio_in_subgroup']['mean'], 2)} | {_f(r['mass']['mean'], 3)} | "
            f"{PAPER_DELTA if r['attribute'] == 'race' else '-'} |")
    return lines


def masses(*, data: str, attributes: list[str], splits: int, setting: str) -> list[str]:
    """How the total mass of the s = +1 weights moves gamma(High), driver only.

    The audit's weights (``balance_split``: Pr_w[S = +1] = 1/2) against the same
    weights with the s = +1 rows rescaled to average 1 (their mass then is their share
    of the rows, as when the masses are not rescaled; the reference code's net output
    is not rescaled either). Same splits, features I-V one-hot as the job encodes
    them (min-max scaling does not matter: x is standardised per split). Reports
    gamma(High) and the share of splits whose certificate is constant (gamma exactly 0).
    """
    import torch

    from fairspark.audits.base import derive_seed
    from fairspark.mdfa import MDFAParams, MDFASample
    from fairspark.mdfa.certify import balance_split, certificate_gamma, fit_certificate

    torch.set_num_threads(1)
    df = load_compas(path=CSV, filtered=data == "filtered")
    x = np.column_stack([df.priors_count, df.c_charge_degree == "F",
                         df.c_charge_degree == "M", df.age, df.juv_fel_count,
                         df.juv_misd_count]).astype(float)
    y = np.where(df[DECISION] == "High", -1, 1)
    p = MDFAParams(splits=splits, worst_violation=False, null_draws=0, **SETTINGS[setting])
    lines = []
    for attr in attributes:
        s = (np.where(df.race == "African-American", 1, -1) if attr == "race"
             else np.where(df.sex == "Male", 1, -1))
        names = [f"x{j}" for j in range(x.shape[1])]
        smp = MDFASample(x=x, s=s, y=y, desc=x, feature_names=names, desc_names=names)
        res = {"balanced": [], "unrescaled": []}
        const = {"balanced": 0, "unrescaled": 0}
        t0 = time.time()
        for i in range(splits):
            st = balance_split(smp, seed=derive_seed(11, data, attr, i), params=p)
            for kind in res:
                wtr, wte = st.train.w.copy(), st.test.w.copy()
                if kind == "unrescaled":
                    for w, ss in ((wtr, st.train.s), (wte, st.test.s)):
                        w[ss > 0] = w[ss > 0] / w[ss > 0].mean()
                target = -st.train.s * st.train.y  # y = -1 ('High'): r = -1
                c = fit_certificate(p.auditor, st.train.z, target, wtr,
                                    seed=derive_seed(11, "cert", i))(st.test.z)
                const[kind] += int(np.all(c == c[0]))
                res[kind].append(certificate_gamma(c, s=st.test.s, y=st.test.y, w=wte,
                                                   y_value=-1))
        share = float(np.mean(s > 0))
        for kind, g in res.items():
            g = np.asarray(g)
            lines.append(f"| {data} | {setting} | {attr} | {share:.2f} | {kind} | {splits} | "
                         f"{g.mean():.4f} ({g.std(ddof=1):.4f}) | {const[kind]} of {splits} | "
                         f"{time.time() - t0:.0f} | {_load()} |")
            print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default="filtered:defaults:100",
                    help="comma-separated DATA:SETTING:SPLITS[:AGE], DATA filtered|raw, "
                         f"SETTING one of {sorted(SETTINGS)}, AGE age (default) or age_cat")
    ap.add_argument("--attributes", default="race,sex")
    ap.add_argument("--no-worst-violation", action="store_true",
                    help="Algorithm 1 off (gamma and the verdict do not depend on it)")
    ap.add_argument("--masses", metavar="DATA:SETTING:SPLITS",
                    help="driver-only experiment: balanced vs unrescaled s=+1 masses")
    ap.add_argument("--out", default="/tmp/hB_compas_study.md")
    ap.add_argument("--tmp", default="/tmp/hB_compas_study")
    args = ap.parse_args(argv)
    from fairspark._threads import pin_threads

    pin_threads()
    attrs = args.attributes.split(",")
    cmd = "python studies/mdfa_compas_study.py " + " ".join(argv or sys.argv[1:])
    lines = [f"Command: `{cmd}`; started {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
             f", load {_load()}", ""]
    out = Path(args.out)
    if args.masses:
        data, setting, n = args.masses.split(":")
        lines += ["| data | setting | attribute | share of s = +1 | s = +1 mass | splits | "
                  "gamma(High): mean (sd) | constant certificates | seconds | load |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        lines += masses(data=data, attributes=attrs, splits=int(n), setting=setting)
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return 0
    from fairspark.session import build_session

    spark = build_session(
        master="local[2]", app_name="mdfa-compas-study", log_level="ERROR",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
              "spark.driver.memory": "2g"})
    recs: list[dict] = []
    t0 = time.time()
    for run in args.runs.split(","):
        data, setting, n, *rest = run.split(":")
        recs += run_one(spark, data=data, setting=setting, splits=int(n), attributes=attrs,
                        tmp=Path(args.tmp), worst_violation=not args.no_worst_violation,
                        age=rest[0] if rest else "age")
        body = [*lines, *gamma_table(recs), "", *delta_table(recs), "",
                f"Total {time.time() - t0:.0f} s, load {_load()}."]
        out.write_text("\n".join(body) + "\n", encoding="utf-8")
        Path(str(out) + ".json").write_text(json.dumps(recs, indent=1, default=str))
    spark.stop()
    print("\n".join(body))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
