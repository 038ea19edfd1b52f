"""Algorithm 1 (worst violation) at lower cost.

Per split the balancing is computed once and shared (``run_split(state=...)``), then
Algorithm 1 runs with each variant of its random forest (``violation_trees``); the
script prints, per data set and variant, the held-out delta_unweighted (mean, sd over
splits), the outcome ratio in the subgroup, the subgroup mass, the steps T, the
agreement of the found held-out subgroup with the planted one (synthetic: F1 against
``in_g`` restricted to Y = +1), and Algorithm 1's CPU seconds per split (the split's CPU
time less the same split without Algorithm 1)::

    python studies/mdfa_wva_cost.py --splits 10 --trees 100,30,10
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--trees", default="100,30,10")
    ap.add_argument("--data", default="synthetic:0.8:0.0,compas")
    ap.add_argument("--variants", default=None,
                    help='JSON {label: {MDFAParams fields}} of Algorithm 1 variants '
                         '(instead of --trees), e.g. \'{"refit": {"violation_regrow": 1}, '
                         '"once": {"violation_regrow": 0}}\'')
    ap.add_argument("--seed", type=int, default=11, help="seed of the splits (and view net)")
    ap.add_argument("--params", default="{}",
                    help="JSON of MDFAParams fields for every variant (e.g. the old defaults)")
    args = ap.parse_args(argv)
    from mdfa_validation import _compas_arrays

    from fairspark.audits.base import derive_seed
    from fairspark.mdfa import MDFAParams, MDFASample, make_synthetic, run_split
    from fairspark.mdfa.certify import _violation_outcome, balance_split, prepare_view
    from fairspark.mdfa.violation import worst_violation

    if args.variants:
        variants = list(json.loads(args.variants).items())
    else:
        variants = [(str(t), {"violation_trees": int(t)}) for t in args.trees.split(",")]
    print(f"load average {_load()}")
    print("| data | variant | splits | delta_unweighted mean (sd) | planted delta | ratio in "
          "subgroup | mass | T (mean) | F1 with planted G | Alg. 1 CPU-s per split |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for data in args.data.split(","):
        planted, in_g = None, None
        if data.startswith("synthetic"):
            nu, mu = (float(v) for v in data.split(":")[1:])
            d = make_synthetic(n=5000, nu=nu, mu=mu, seed=0)
            x, s, y, names, planted, in_g = d.x, d.s, d.y, ["x1", "x2"], d.delta, d.in_g
            extra = {"violation_outcome": "favourable"}
        else:
            x, s, y = _compas_arrays("race")
            names = [f"x{j}" for j in range(x.shape[1])]
            extra = {}
        smp = MDFASample(x=x, s=s, y=y, desc=x, feature_names=names, desc_names=names)
        base = MDFAParams(splits=args.splits, worst_violation=False, null_draws=0,
                          **{**extra, **json.loads(args.params)})
        seeds = [derive_seed(args.seed, data, "split", i) for i in range(args.splits)]
        smp, base = prepare_view(smp, seeds=seeds, params=base)
        states = [balance_split(smp, seed=sd, params=base, split=i)
                  for i, sd in enumerate(seeds)]
        cpu0 = []
        for i, (sd, st) in enumerate(zip(seeds, states, strict=True)):
            c = time.process_time()
            run_split(smp, split=i, seed=sd, params=base, state=st)
            cpu0.append(time.process_time() - c)
        for nt, update in variants:
            p = base.model_copy(update={"worst_violation": True, **update})
            du, ratio, mass, steps, f1, cpu = [], [], [], [], [], []
            for i, (sd, st) in enumerate(zip(seeds, states, strict=True)):
                c = time.process_time()
                r = run_split(smp, split=i, seed=sd, params=p, state=st)
                cpu.append(time.process_time() - c - cpu0[i])
                du.append(r.delta_unweighted)
                ratio.append(r.ratio_in_subgroup)
                mass.append(r.mass)
                steps.append(r.t)
                if in_g is not None:  # the held-out subgroup found, against the planted G
                    yv = _violation_outcome(p, r.gamma_pos, r.gamma_neg)
                    tr, te = st.train, st.test
                    wv = worst_violation(tr, te, y_value=yv, seed=sd, params=p)
                    found = wv.in_g_test & (te.y == yv)
                    truth = in_g[st.te] & (te.y == yv)
                    tp = float(np.sum(found & truth))
                    f1.append(2 * tp / max(1.0, found.sum() + truth.sum()))
            du_a = np.array(du, float)
            du_a = du_a[np.isfinite(du_a)]
            print(f"| {data} | {nt} | {args.splits} | {du_a.mean():.3f} ({du_a.std(ddof=1):.3f})"
                  f" | {'–' if planted is None else f'{planted:.3f}'} | "
                  f"{np.nanmean(np.array(ratio, float)):.3f} | {np.nanmean(mass):.3f} | "
                  f"{np.mean(steps):.1f} | {'–' if not f1 else f'{np.mean(f1):.3f}'} | "
                  f"{np.mean(cpu):.2f} |", flush=True)
    print(f"load average {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
