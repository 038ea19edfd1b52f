"""How many mdfa splits the interval and the verdict need.

Runs the splits of one sample once at the largest J and reads every smaller J from the
first J splits: split ``i`` depends on its own seed only, and with ``null_draws`` 20 it
evaluates null draw ``i mod min(20, J)``, which for every J in {10, 20, 40, 100} is the
draw the first J splits of a 100-split run evaluate, so the prefix *is* the J-split
audit (same seeds, same null draws). Per J it prints the reported gamma_max and its 95%
interval half-width, the verdict's p-value and "evidence", and on the planted synthetic
designs the reported gamma(+1), whether its interval covers the planted value and the
verdict's power over generator seeds. Algorithm 1 is off (it does not enter gamma or the
verdict); everything else is at the defaults (L2 chosen once per view)::

    python studies/mdfa_splits_curve.py --out /tmp/mdfa_curve --seeds 10 --max-splits 40 \
        --full-seeds 1 --full-splits 100
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

JS = (10, 20, 40, 100)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _run(spark, x, s, y, *, splits: int, seed: int, desc_names) -> pd.DataFrame:
    from fairspark.audits.base import derive_seed
    from fairspark.mdfa import MDFAParams, MDFASample, run_splits
    from fairspark.mdfa.certify import choose_l2

    smp = MDFASample(x=x, s=s, y=y, desc=x, feature_names=list(desc_names),
                     desc_names=list(desc_names)).with_null_model(
        seed=derive_seed(seed, "null"))
    p = MDFAParams(splits=splits, worst_violation=False)
    seeds = [derive_seed(seed, "split", i) for i in range(splits)]
    p = choose_l2(smp, seed=seeds[0], params=p)
    return run_splits(spark, smp, seeds=seeds, params=p)


def _row(t: pd.DataFrame, j: int, planted: float | None) -> dict:
    from fairspark.mdfa.null import corrected_gamma, null_reference

    head = t.iloc[:j]
    cm, ref = corrected_gamma(head, observed="gamma_max"), null_reference(head, level=0.01)
    out = {"J": j, "gamma_max": cm.value, "half_max": cm.upper - cm.value,
           "p": ref.p_value, "evidence": bool(ref.evidence)}
    if planted is not None:
        cp = corrected_gamma(head, observed="gamma_pos")
        out.update(gamma=cp.value, half=cp.upper - cp.value,
                   covered=bool(cp.lower <= planted <= cp.upper))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="/tmp/mdfa_curve")
    ap.add_argument("--seeds", type=int, default=10, help="generator seeds per design")
    ap.add_argument("--max-splits", type=int, default=40)
    ap.add_argument("--full-seeds", type=int, default=1,
                    help="the first seeds (and COMPAS) run --full-splits instead")
    ap.add_argument("--full-splits", type=int, default=100)
    ap.add_argument("--designs", default="0.5:0.2,0.8:0.0")
    ap.add_argument("--summarise", action="store_true", help="only read the saved tables")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from fairspark.mdfa import make_synthetic

    designs = [tuple(float(v) for v in d.split(":")) for d in args.designs.split(",")]
    jobs = [("compas_race", None, 0, args.full_splits)]
    for g in range(args.seeds):
        for nu, mu in designs:
            n = args.full_splits if g < args.full_seeds else args.max_splits
            jobs.append((f"nu{nu}_mu{mu}", (nu, mu), g, n))
    print(f"load average {_load()}", flush=True)
    if not args.summarise:
        from mdfa_validation import _compas_arrays, _spark

        spark = _spark()
        for name, design, g, n in jobs:
            f = out / f"{name}_seed{g}_J{n}.parquet"
            if f.exists():
                continue
            t0 = time.time()
            if design is None:
                x, s, y = _compas_arrays("race")
                cols = ["priors", "felony", "misd", "age", "juv_fel", "juv_misd"]
            else:
                d = make_synthetic(n=5000, nu=design[0], mu=design[1], seed=g)
                x, s, y, cols = d.x, d.s, d.y, ["x1", "x2"]
            _run(spark, x, s, y, splits=n, seed=1000 + g, desc_names=cols).to_parquet(f)
            print(f"{f.name}: {time.time() - t0:.0f} s, load {_load()}", flush=True)
        spark.stop()
    rows = []
    for name, design, g, n in jobs:
        f = out / f"{name}_seed{g}_J{n}.parquet"
        if not f.exists():
            continue
        t = pd.read_parquet(f)
        planted = (make_synthetic(n=5000, nu=design[0], mu=design[1], seed=g).gamma
                   if design is not None else None)
        for j in JS:
            if j <= len(t):
                rows.append({"data": name, "seed": g, **_row(t, j, planted)})
    r = pd.DataFrame(rows)
    print("\n| data | J | seeds | gamma_max (reported) | 95% half-width (gamma_max) | "
          "half-width / J=20's | p-value (median) | evidence | gamma(+1) half-width | "
          "gamma(+1) covers planted |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (name, j), grp in r.groupby(["data", "J"], sort=False):
        base = r[(r.data == name) & (r.J == 20) & r.seed.isin(grp.seed)]
        rel = (grp.set_index("seed").half_max / base.set_index("seed").half_max).mean()
        cov = (f"{int(grp.covered.sum())} of {len(grp)}" if "covered" in grp
               and grp.covered.notna().all() else "–")
        hw = f"{grp.half.mean():.4f}" if "half" in grp and grp.half.notna().all() else "–"
        print(f"| {name} | {j} | {len(grp)} | {grp.gamma_max.mean():.4f} | "
              f"{grp.half_max.mean():.4f} | {rel:.3f} | {grp.p.median():.2g} | "
              f"{int(grp.evidence.sum())} of {len(grp)} | {hw} | {cov} |")
    print(f"\nload average {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
