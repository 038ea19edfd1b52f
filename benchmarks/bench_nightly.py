#!/usr/bin/env python
"""The whole nightly run, all four audits at their documented defaults.

Two parts.

**The CLI run** (default). For each ``--rows`` size, writes a synthetic scored table
(``--dim`` numeric features, two sensitive attributes ``sex`` (2 values) and ``race``
(4 values) and their intersection ``sex*race``, a label, a prediction and a unique row
key) as Parquet, runs ``fairspark audit`` on it with every audit switched on at its
defaults (``group``, ``hfm``, ``mdfa``, ``correlation``: an empty section each) on
``--master`` (``local[2]``), and prints one table line per size: exit code, wall time,
the runner's stage timings (from ``summary.json``; from the log's ``stage`` lines when
the run did not finish), the peak resident memory of the run's process tree (driver JVM,
Python driver and Python workers, sampled every 0.25 s from ``/proc``; forked workers
share pages, so the sum is an upper bound) and the load average before and after.
Then it fits, per stage, ``time = a + b * rows`` over the sizes (least squares) so that
``docs/operations.md`` can extrapolate: ``a`` is what the stage costs whatever the table
(mdfa's and correlation's trainings run on capped samples), ``b`` the part that grows
with the rows. ``--out FILE`` writes the same tables as Markdown.

**The kernel probe** (``--probe``, no Spark, one process, one BLAS/torch thread). The
trainings of mdfa and correlation run on capped samples, so their cost does not depend
on the table's rows; the probe times them at the defaults on a sample of the same
synthetic design and breaks them down: per mdfa split the balancing nets, the balance
diagnostics, the certificate, the null draw's certificate and Algorithm 1 (with its
number of steps), the null model once per attribute; per correlation attempt the time
and the acceptance rate. From these it estimates each audit's share of a nightly on
``--cores`` cores (3 attribute views, perfect parallel efficiency: a lower bound).

At the defaults the trainings dominate and do not depend on the rows (probe, d = 50,
loaded machine: about 60 CPU s per mdfa split, two thirds of it the balancing nets, and
9 ms per correlation attempt: some 150 + 7 minutes of trainings on 2 cores), so the
sizes are measured with light training settings (``--set``, flagged in the tables) and
the trainings by the probe; one run at the defaults shows the whole cost.

Examples::

    python benchmarks/bench_nightly.py --rows 3000 6000 --dim 10 --tmp /tmp/nb_small
    python benchmarks/bench_nightly.py --probe --dim 50 --probe-splits 2 --out probe.md
    python benchmarks/bench_nightly.py --rows 100000 300000 1000000 --dim 50 \
        --set mdfa.splits=2 correlation.rounds=2 correlation.n_samples=100 --out rows.md
    python benchmarks/bench_nightly.py --rows 1000000 --dim 50 --timeout 14400 --out full.md
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from _harness import (
    LIGHT_SETS,
    ROOT,
    VIEWS,
    draw_rows,
    load,
    parse_args,
    parse_sets,
    stage_markdown,
    timed,
    write_table,
)


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    return children


def kill_tree(root: int) -> None:
    """SIGKILL ``root`` and every descendant (the CLI, its JVM, the Python workers), by
    pid: a run past its timeout must not leave a JVM behind."""
    import signal

    children, todo, pids = _children(), [root], []
    while todo:
        p = todo.pop()
        pids.append(p)
        todo.extend(children.get(p, []))
    for p in reversed(pids):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _tree_rss(root: int, executors: dict[int, tuple[int, int]] | None = None) -> tuple[int, int]:
    """(sum, max) resident bytes over ``root`` and all its descendants.

    With ``executors`` (a dict, updated in place), also each Spark executor's peak: the
    resident bytes of an executor JVM (``CoarseGrainedExecutorBackend``, the processes
    ``local-cluster`` masters start) alone and with its Python workers, keyed by the
    JVM's pid."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            ppid, pages = int(parts[1]), int(parts[21])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
        rss[int(d)] = pages * page
    total, biggest, todo = 0, 0, [root]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        biggest = max(biggest, rss.get(p, 0))
        if executors is not None and p != root and _is_executor(p):
            sub, stack = 0, [p]
            while stack:
                q = stack.pop()
                sub += rss.get(q, 0)
                stack.extend(children.get(q, []))
            jvm, tree = executors.get(p, (0, 0))
            executors[p] = (max(jvm, rss.get(p, 0)), max(tree, sub))
        todo.extend(children.get(p, []))
    return total, biggest


def _is_executor(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"CoarseGrainedExecutorBackend" in f.read()
    except OSError:
        return False


_STAGE_LINE = re.compile(r"stage\s+(\S.*?)\s+(\d+\.\d+) s\s*$")


def stages_from_log(log: str) -> dict[str, float]:
    """The runner's ``stage <name> <seconds> s`` log lines (a run cut short has no
    summary.json; its finished stages are still in the log)."""
    out: dict[str, float] = {}
    for line in log.splitlines():
        m = _STAGE_LINE.search(line)
        if m:
            out[m.group(1).strip()] = float(m.group(2))
    return out


def nightly_config(inp: Path, out: Path, dim: int, master: str,
                   sets: dict[str, dict] | None = None) -> dict:
    """The run's config: every audit at its defaults (an empty section each), unless
    ``sets`` overrides some of their keys."""
    audits = {a: dict((sets or {}).get(a, {})) for a in ("group", "hfm", "mdfa", "correlation")}
    return {
        "dataset": "nightly_bench", "run_date": "2026-11-30", "seed": 17,
        "input": {"path": str(inp), "format": "parquet"},
        "columns": {
            "features": [f"f{j}" for j in range(dim)],
            "sensitive": [{"column": "sex", "privileged": "Male"},
                          {"column": "race", "privileged": "White"}],
            "intersections": [["sex", "race"]],
            "label": {"column": "label", "positive": 1},
            "prediction": {"column": "prediction", "positive": 1}, "row_key": "row_id",
        },
        "audits": audits,
        "output": {"path": str(out)},
        "spark": {"master": master},
    }


def run_one(base: Path, rows: int, dim: int, master: str, timeout: float,
            sets: dict[str, dict] | None = None) -> dict:
    """Write the table (once) and run the CLI on it; the figures of one size."""
    inp = base / "in"
    if not (inp / "_done").exists():
        t = time.perf_counter()
        write_table(inp, rows, dim)
        (inp / "_done").write_text("")
        print(f"wrote {rows} rows x {dim} features in {time.perf_counter() - t:.1f} s",
              flush=True)
    out = base / "out"
    cfg_path = base / "config.json"  # JSON is YAML
    cfg_path.write_text(json.dumps(nightly_config(inp, out, dim, master, sets), indent=1))
    cmd = [sys.executable, "-m", "fairspark.cli", "audit", "--config", str(cfg_path)]
    load_before = load()
    print("command:", " ".join(cmd), "| load at start:", load_before, flush=True)
    peak = {"sum": 0, "max": 0}
    executors: dict[int, tuple[int, int]] = {}
    started = time.time()
    t = time.perf_counter()
    log_path = base / "cli.log"  # written as the run goes (tail -f it)
    log_file = log_path.open("w")
    proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            s, m = _tree_rss(proc.pid, executors)
            peak["sum"], peak["max"] = max(peak["sum"], s), max(peak["max"], m)
            done.wait(0.25)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_tree(proc.pid)
        proc.wait()
    done.set()
    th.join()
    wall = time.perf_counter() - t
    log_file.close()
    log = log_path.read_text(errors="replace")
    stages: dict = {}
    statuses: dict = {}
    summ = [p for p in out.rglob("summary.json") if p.stat().st_mtime >= started]
    if summ:
        s = json.loads(sorted(summ)[-1].read_text())
        stages = s.get("stage_timings", {})
        statuses = {a: v.get("status") for a, v in s.get("audits", {}).items()
                    if isinstance(v, dict)}
    # the log also has the stages after summary.json was written ("write")
    for k, v in stages_from_log(log).items():
        stages.setdefault(k, v)
    if proc.returncode not in (0, 3):
        print(log[-4000:])
    return {"rows": rows, "rc": "timeout" if timed_out else proc.returncode, "wall": wall,
            "stages": stages, "statuses": statuses, "peak_sum": peak["sum"],
            "peak_max": peak["max"],
            "executor_peaks": [executors[p] for p in sorted(executors)],
            "load_before": load_before, "load": load()}


# ---------------------------------------------------------------- the kernel probe
def probe_mdfa(dim: int, rows: int, splits: int, seed: int = 5) -> dict:
    """One attribute view (sex) of mdfa at its defaults on ``rows`` sampled rows:
    seconds per component of a split (mean over ``splits``) and the null model."""
    from fairspark.mdfa import certify as C
    from fairspark.mdfa.diagnostics import balance_diagnostics
    from fairspark.mdfa.params import MDFAParams

    p = MDFAParams()
    r = draw_rows(np.random.default_rng(seed), rows, dim)
    sample = C.MDFASample(x=r["X"], s=np.where(r["female"], 1, -1),
                          y=np.where(r["prediction"] == 1, 1, -1), desc=r["X"],
                          feature_names=[f"f{j}" for j in range(dim)],
                          desc_names=[f"f{j}" for j in range(dim)])
    sample, _, null_s = timed(sample.with_null_model, seed=seed)
    # the L2 strength is chosen once per view (`l2_selection: once`), before the splits
    p, _, l2_s = timed(C.choose_l2, sample, seed=1000, params=p)
    parts: dict[str, list[float]] = {}
    steps, gammas, walls = [], [], []
    for i in range(splits):
        sd = 1000 + i
        w0 = time.perf_counter()
        st, _, tot = timed(C.balance_split, sample, seed=sd, params=p)
        # the two parts of balance_split, timed again on their own
        x, s = sample.x, sample.s.astype(int)
        xs = ((x - x[st.tr].mean(0)) / np.where(x[st.tr].std(0) == 0, 1, x[st.tr].std(0)))
        xs = xs.astype(np.float32)
        _, _, diag_s = timed(balance_diagnostics, x_tr=xs[st.tr], s_tr=s[st.tr],
                              w_tr=st.train.w, x_te=xs[st.te], s_te=s[st.te], w_te=st.test.w)
        g, _, cert_s = timed(C._certificate_gammas, st, seed=sd, params=p)
        _, _, null_g_s = timed(C._null_gammas, st, sample, split=i, seed=sd, params=p)
        out = C.SplitResult(split=i, gamma_pos=g[0], gamma_neg=g[1], gamma_max=max(g))
        wv, _, wva_s = timed(C._with_violation, out, st, sample, seed=sd, params=p)
        walls.append(time.perf_counter() - w0 - 0.0)
        steps.append(len(json.loads(wv.trace)))
        gammas.append(max(g))
        for k, v in (("balance_split (nets + diagnostics)", tot),
                     ("  of which diagnostics", diag_s),
                     ("certificate (gamma)", cert_s), ("null draw's certificate", null_g_s),
                     ("Algorithm 1 (worst violation)", wva_s)):
            parts.setdefault(k, []).append(v)
    per = {k: float(np.mean(v)) for k, v in parts.items()}
    per_split = sum(v for k, v in per.items() if not k.startswith("  "))
    return {"rows": rows, "dim": dim, "splits_probed": splits,
            "null_model_s": null_s + l2_s, "l2_choice_s": l2_s,
            "parts_s": per, "split_s": per_split, "wva_steps": steps, "gamma_max": gammas,
            "split_wall_s": walls,
            # splits: auto runs a first wave of splits_wave and stops there on the
            # validated data (docs/mdfa.md, "How many splits")
            "defaults": {"splits": (p.splits_wave if p.splits == "auto" else p.splits),
                         "sample_rows": p.sample_rows, "epochs": p.epochs,
                         "l2_grid": p.l2_grid, "auditor": p.auditor, "alpha": p.alpha,
                         "xi": p.xi, "wva_search": p.wva_search}}


def probe_correlation(dim: int, rows: int, attempts: int, seed: int = 5) -> dict:
    """Correlation at its defaults on ``rows`` sampled rows, attribute sex: seconds per
    attempt (mean over ``attempts`` of round 0, per model and, as the tasks run them at
    the default ``linear_fits: batched``, batched) and the acceptance rate."""
    from fairspark.correlation._oracle import (
        OracleData,
        OracleModel,
        make_model,
        run_attempt,
        split_round,
    )
    from fairspark.correlation.params import CorrelationParams

    p = CorrelationParams()
    r = draw_rows(np.random.default_rng(seed), rows, dim)
    data = OracleData(x=r["X"], y=r["label"].astype(float), priv=~r["female"],
                      w=np.ones(rows))
    split = split_round(data, seed=seed, round_id=0, test_fraction=p.test_fraction)
    # warm-up, not timed: the first call imports every model family's module (seconds;
    # Spark's worker daemon has them preloaded)
    run_attempt(
        data, split, OracleModel(model=p.models[0], k=p.k, min_accuracy=p.min_accuracy),
        seed=seed, round_id=0, attempt=-1,
    )
    statuses = []
    t0, c0 = time.perf_counter(), time.process_time()
    for a in range(attempts):
        res = run_attempt(
            data, split, OracleModel(model=p.models[0], k=p.k, min_accuracy=p.min_accuracy),
            seed=seed, round_id=0, attempt=a,
        )
        statuses.append(str(res.status))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    # the estimator alone on bootstraps of the same size (what the rest costs on top)
    rng = np.random.default_rng(seed)
    c1 = time.process_time()
    for a in range(attempts):
        idx = rng.integers(0, rows, p.k)
        if len(np.unique(data.y[idx])) < 2:
            continue
        make_model(p.models[0], None, random_state=a).fit(data.x[idx], data.y[idx])
    fit_only = (time.process_time() - c1) / attempts
    acc = statuses.count("accepted") / max(1, len(statuses))
    # the same attempts as the tasks run them at the default linear_fits: batched
    from fairspark.correlation._batched import batched_family, run_round_batched

    oracle = OracleModel(model=p.models[0], k=p.k, min_accuracy=p.min_accuracy)
    batched_cpu = None
    if p.advanced.linear_fits == "batched" and batched_family(p.models[0], None):
        c2 = time.process_time()
        done = run_round_batched(data, split, oracle, seed=seed, round_id=0, first=0,
                                 need=attempts, cap=attempts)
        batched_cpu = (time.process_time() - c2) / max(1, len(done))
    return {"rows": rows, "dim": dim, "attempts": attempts, "s_per_attempt": wall / attempts,
            "cpu_s_per_attempt": batched_cpu or cpu / attempts,
            "per_model_cpu_s_per_attempt": cpu / attempts, "fit_only_s": fit_only,
            "acceptance": acc,
            "defaults": {"models": p.models, "n_samples": p.n_samples, "rounds": p.max_rounds,
                         "k": p.k, "sample_rows": p.sample_rows}}


def probe_markdown(mdfa: dict | None, corr: dict | None, cores: int, views: int,
                   argv_line: str) -> str:
    """The probe's figures and the nightly estimate they give (lower bound: perfect
    parallel efficiency, no Spark overhead)."""
    lines = [f"probe: `{argv_line}`; load before/after in the lines below; "
             f"estimate (CPU seconds, so load-independent) for {views} attribute views on "
             f"{cores} cores at perfect efficiency", ""]
    total = 0.0
    if mdfa is not None:
        d = mdfa["defaults"]
        lines += [f"mdfa, one split at the defaults ({mdfa['rows']:,}-row sample, d = "
                  f"{mdfa['dim']}, {d['epochs']} epochs, one net per split (L2 from "
                  f"{d['l2_grid']} chosen once), "
                  f"{d['auditor']}, Alg. 1 {d['wva_search']}), mean of "
                  f"{mdfa['splits_probed']} splits (one thread; CPU seconds):", "",
                  "| part | CPU s per split |", "|---|---|"]
        lines += [f"| {k} | {v:.2f} |" for k, v in mdfa["parts_s"].items()]
        lines += [f"| **split** | **{mdfa['split_s']:.2f}** |",
                  f"| null model and L2 choice (once per view; the L2 choice "
                  f"{mdfa.get('l2_choice_s', 0.0):.2f}) | {mdfa['null_model_s']:.2f} |", "",
                  f"wall s per split {[round(w, 1) for w in mdfa['split_wall_s']]} "
                  f"(diagnostics timed twice in it); "
                  f"Algorithm 1 steps per split: {mdfa['wva_steps']}; gamma_max "
                  f"{[round(g, 4) for g in mdfa['gamma_max']]}", ""]
        est = views * (mdfa["null_model_s"] + d["splits"] * mdfa["split_s"] / cores)
        total += est
        lines.append(f"mdfa estimate: {views} x ({mdfa['null_model_s']:.1f} + {d['splits']} x "
                     f"{mdfa['split_s']:.2f} / {cores}) = **{est:.0f} s** ({est / 60:.1f} min)")
        lines.append("")
    if corr is not None:
        d = corr["defaults"]
        per_kept = 1.0 / max(corr["acceptance"], 1e-9)
        trainings = d["n_samples"] * d["rounds"] * per_kept
        est = views * trainings * corr["cpu_s_per_attempt"] / cores
        total += est
        lines += [f"correlation ({', '.join(d['models'])}, K = {d['k']}, "
                  f"{corr['rows']:,}-row sample, d = {corr['dim']}): "
                  f"{corr['cpu_s_per_attempt'] * 1e3:.2f} CPU ms per attempt "
                  f"({corr['s_per_attempt'] * 1e3:.2f} ms wall; the estimator's fit alone "
                  f"{corr['fit_only_s'] * 1e3:.2f} CPU ms), acceptance {corr['acceptance']:.2f} "
                  f"over {corr['attempts']} attempts; one scikit-learn fit per attempt "
                  f"(linear_fits: per_model) {corr['per_model_cpu_s_per_attempt'] * 1e3:.2f} "
                  f"CPU ms; rounds: at most rounds_max (auto may stop earlier)", "",
                  f"correlation estimate: {views} x {d['n_samples']} x {d['rounds']} / "
                  f"{corr['acceptance']:.2f} attempts x {corr['cpu_s_per_attempt'] * 1e3:.2f} ms / "
                  f"{cores} = **{est:.0f} s** ({est / 60:.1f} min)", ""]
    lines.append(f"sum of the two: **{total:.0f} s** ({total / 60:.1f} min), before "
                 "preparation, group, hfm, Spark start-up and parallel losses")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--tmp", default="/tmp/fairspark_nightly_bench")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--timeout", type=float, default=3600,
                    help="seconds per size; a run past it is killed and its finished "
                         "stages are read from its log")
    ap.add_argument("--out", default=None, help="also write the tables (Markdown) here")
    ap.add_argument("--set", nargs="*", default=[], metavar="AUDIT.KEY=VALUE",
                    help="override an audit's default (e.g. mdfa.splits=4); the tables "
                         "then say that the run was not at the defaults")
    ap.add_argument("--probe", action="store_true",
                    help="time the mdfa and correlation kernels at their defaults instead")
    ap.add_argument("--probe-splits", type=int, default=2)
    ap.add_argument("--probe-attempts", type=int, default=300)
    ap.add_argument("--probe-mdfa-rows", type=int, default=None,
                    help="mdfa sample rows (default: the audit's sample_rows)")
    ap.add_argument("--probe-corr-rows", type=int, default=None,
                    help="correlation sample rows (default: the audit's sample_rows)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["mdfa", "correlation"])
    ap.add_argument("--cores", type=int, default=2, help="cores of the estimate (--probe)")
    args = parse_args(ap, argv, fast={"rows": [1000, 2000], "dim": 4, "set": LIGHT_SETS,
                                      "timeout": 600, "probe_splits": 1,
                                      "probe_attempts": 20})
    argv_line = "python benchmarks/bench_nightly.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    print(f"cores: {os.cpu_count()}; load at start {load()}", flush=True)
    if args.probe:
        from fairspark._threads import pin_threads

        pin_threads()
        import torch

        torch.set_num_threads(1)
        from fairspark.correlation.params import CorrelationParams
        from fairspark.mdfa.params import MDFAParams

        l0 = load()
        mdfa = corr = None
        if "mdfa" not in args.skip:
            mdfa = probe_mdfa(args.dim, args.probe_mdfa_rows or MDFAParams().sample_rows,
                              args.probe_splits)
        l1 = load()
        if "correlation" not in args.skip:
            corr = probe_correlation(args.dim,
                                     args.probe_corr_rows or CorrelationParams().sample_rows,
                                     args.probe_attempts)
        text = (probe_markdown(mdfa, corr, args.cores, len(VIEWS), argv_line)
                + f"\n\nload before mdfa {l0}; before correlation {l1}; after {load()}")
        print(text)
        if args.out:
            Path(args.out).write_text(text + "\n\n```json\n"
                                      + json.dumps({"mdfa": mdfa, "correlation": corr},
                                                   indent=1, default=str) + "\n```\n")
        return 0
    sets = parse_sets(args.set)
    res = [run_one(Path(args.tmp).resolve() / f"n{n}_d{args.dim}", n, args.dim, args.master,
                   args.timeout, sets) for n in args.rows]
    text = stage_markdown(res, argv_line, os.cpu_count())
    if sets:
        text = ("**Not at the defaults**: overridden " + ", ".join(
            f"`{a}.{k}={v}`" for a, kv in sets.items() for k, v in kv.items()) + "\n\n"
            + text)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if all(r["rc"] in (0, 3) for r in res) else 1


if __name__ == "__main__":
    raise SystemExit(main())
