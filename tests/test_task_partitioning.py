"""Training and split tasks: chunking, partition independence, profile, worker daemon.

The correlation trainings and the mdfa splits are dealt round-robin to a fixed number
of chunks (one Spark task each). Whatever the number of chunks (1, 2, 7 or the
default), the results must be the very same numbers as the plain kernel calls.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairspark.correlation import (
    OracleJob,
    OracleModel,
    draw_stratified_sample,
    run_oracle_tasks,
    split_round,
)
from fairspark.correlation._batched import task_attempt
from fairspark.correlation._spark import chunk_ids, n_chunks
from fairspark.mdfa import MDFAParams, MDFASample, make_synthetic, run_splits, run_splits_local
from fairspark.mdfa._spark import chunk_splits

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------ chunking
@pytest.mark.parametrize("total,chunks", [(1, 1), (10, 3), (7, 7), (100, 8), (5, 2)])
def test_chunks_deal_every_id_once(total, chunks):
    got = np.concatenate([chunk_ids(total, chunks, c) for c in range(chunks)])
    assert sorted(got.tolist()) == list(range(total))
    sizes = [len(chunk_ids(total, chunks, c)) for c in range(chunks)]
    assert max(sizes) - min(sizes) <= 1  # equal chunks
    splits = [i for c in range(chunks) for i in chunk_splits(total, chunks, c)]
    assert sorted(splits) == list(range(total))


def test_chunk_out_of_range_is_named():
    with pytest.raises(ValueError, match=r"chunk must be in \[0, 3\), got 3"):
        chunk_ids(10, 3, 3)
    with pytest.raises(ValueError, match=r"chunk must be in \[0, 2\), got -1"):
        chunk_splits(10, 2, -1)
    assert n_chunks(5, 8) == 5 and n_chunks(100, 8) == 8 and n_chunks(0, 8) == 1


# ------------------------------------------------------------ correlation
@pytest.fixture(scope="module")
def oracle_sample(spark):
    rng = np.random.default_rng(3)
    n = 900
    x = rng.random((n, 3))
    priv = rng.random(n) < 0.5
    y = (rng.random(n) < 1 / (1 + np.exp(-(4 * (x[:, 0] - 0.5) + 0.7 * priv)))).astype(float)
    pdf = pd.DataFrame({"_fs_key": [f"k{i}" for i in range(n)], "_fs_label": y,
                        "_fs_x": [list(r) for r in x], "_fs_w": 1.0, "_fs_p_0": priv})
    return draw_stratified_sample(spark.createDataFrame(pdf), priv_cols=["_fs_p_0"],
                                  attributes=["sex"], max_rows=500, seed=5)


_KW = {"attributes": [0], "models": ["logistic_regression", "linear_svm"], "seeds": [21],
       "n_samples": 8, "rounds": 3, "k": 120, "min_accuracy": 0.6, "attempt_cap": 40}


def test_correlation_same_attempts_for_1_2_7_and_default_chunks(spark, oracle_sample):
    default = run_oracle_tasks(spark, oracle_sample, OracleJob(**_KW)).attempts
    assert (default["attr"] >= 0).all()  # no profile rows without profile=True
    for parts in (1, 2, 7):
        got = run_oracle_tasks(spark, oracle_sample, OracleJob(partitions=parts, **_KW)).attempts
        pd.testing.assert_frame_equal(got, default)
    # each round runs exactly the attempts a sequential loop runs: 0, 1, ... up to its
    # n_samples-th accepted one, or to the attempt cap
    for _, rnd in default.groupby(["model", "round"]):
        assert list(rnd["attempt"]) == list(range(len(rnd)))
        acc = (rnd["status"] == "accepted").to_numpy()
        assert (acc.sum() == _KW["n_samples"] and acc[-1]) or len(rnd) == _KW["attempt_cap"]
    # and each row is the plain kernel call with the same ids (brute force, no Spark)
    data = oracle_sample.for_attribute(0)
    metrics = list(default.columns[7:])
    assert len(metrics) == len(OracleModel.__dataclass_fields__["metrics"].default)
    for _, row in default.iterrows():
        split = split_round(data, seed=21, round_id=int(row["round"]), test_fraction=0.3)
        ref = task_attempt(
            data, split, OracleModel(model=row["model"], k=120, min_accuracy=0.6),
            seed=21, round_id=int(row["round"]), attempt=int(row["attempt"]),
        )
        assert ref.status == row["status"]
        np.testing.assert_array_equal(ref.metrics, row[metrics].to_numpy(float))


def test_correlation_profile_has_one_record_per_task(spark, oracle_sample):
    tab = run_oracle_tasks(spark, oracle_sample, OracleJob(partitions=3, profile=True, **_KW))
    plain = run_oracle_tasks(spark, oracle_sample, OracleJob(partitions=3, **_KW))
    pd.testing.assert_frame_equal(tab.attempts, plain.attempts)
    assert len(tab.profile) == tab.waves >= 1
    assert tab.waves == 1  # every round in one Spark job
    for w in tab.profile:
        assert w["chunks"] == min(3, w["rounds"]) and len(w["tasks"]) == w["chunks"]
        assert sum(t["rounds"] for t in w["tasks"]) == w["rounds"]
        assert sorted(t["chunk"] for t in w["tasks"]) == list(range(w["chunks"]))
        assert sum(t["attempts"] for t in w["tasks"]) == w["attempts"]
        for t in w["tasks"]:
            assert w["submit"] <= t["start"] <= t["end"] <= w["collected"]
            assert t["run_s"] > 0 and t["ship_s"] >= 0 and t["serialise_s"] >= 0
    assert sum(w["attempts"] for w in tab.profile) == len(tab.attempts)


def test_correlation_phase_seconds_fit_inside_each_task(spark, oracle_sample):
    """Each attempt's CPU seconds per phase (draw, fit, predict, metrics), measured in
    the task, are >= 0, and per task they sum to no more than the task's CPU time."""
    from fairspark.correlation._rounds import CPU_COLUMNS, round_costs

    tab = run_oracle_tasks(spark, oracle_sample, OracleJob(partitions=3, profile=True, **_KW))
    cpu = tab.cpu
    assert list(CPU_COLUMNS) == ["cpu_draw", "cpu_fit", "cpu_predict", "cpu_metrics"]
    assert not set(CPU_COLUMNS) & set(tab.attempts.columns)  # the attempts stay pure
    keys = ["attr", "model", "round", "attempt"]
    assert cpu[keys].equals(tab.attempts[keys])  # one timing per attempt run
    assert (cpu[list(CPU_COLUMNS)] >= 0).all().all()
    fitted = tab.attempts["status"] != "rejected"
    assert (cpu.loc[fitted.to_numpy(), "cpu_fit"] > 0).any()
    # the plan deals rounds (attr, model, round) in this order, round g to chunk g mod C
    order = [(0, m, r) for m in _KW["models"] for r in range(_KW["rounds"])]
    per_round = cpu.assign(t=cpu[list(CPU_COLUMNS)].sum(axis=1)).groupby(
        ["attr", "model", "round"])["t"].sum()
    (w,) = tab.profile
    for t in w["tasks"]:
        ids = chunk_ids(len(order), w["chunks"], t["chunk"])
        phases = sum(per_round[order[int(g)]] for g in ids)
        assert 0 < phases <= t["run_cpu_s"] + 1e-6, (phases, t["run_cpu_s"])
    # summed per round: every phase, the attempts and a total that is their sum
    rc = round_costs(cpu)
    assert len(rc) == len(order) and (rc["attempts"] == tab.attempts.groupby(
        ["attr", "model", "round"]).size().to_numpy()).all()
    np.testing.assert_allclose(rc["total"], rc[["draw", "fit", "predict", "metrics"]].sum(axis=1))


# ------------------------------------------------------------ mdfa
def test_mdfa_same_splits_for_1_2_7_and_default_chunks(spark):
    d = make_synthetic(n=600, nu=0.6, mu=0.2, seed=4)
    smp = MDFASample(x=d.x, s=d.s, y=d.y, desc=d.x, feature_names=["x1", "x2"],
                     desc_names=["x1", "x2"])
    p = MDFAParams(auditor="logistic_regression", epochs=2, l2_grid=[1e-3], splits=9,
                   alpha=0.1)
    seeds = [100 + i for i in range(9)]
    ref = run_splits_local(smp, seeds=seeds, params=p)
    prof: list[dict] = []
    default = run_splits(spark, smp, seeds=seeds, params=p, profile=prof)
    # the default: one task per split (the progress lines count finished splits)
    assert prof[-1]["chunks"] == 9 and len(prof) == 10
    assert sum(r["splits"] for r in prof[:-1]) == 9
    for got in [default] + [run_splits(spark, smp, seeds=seeds, params=p, partitions=k)
                            for k in (1, 2, 7)]:
        assert list(got["split"]) == list(range(9))
        for col in ("gamma_pos", "gamma_neg", "gamma_max", "l2", "mmd"):
            np.testing.assert_array_equal(got[col].to_numpy(float), ref[col].to_numpy(float))
        assert list(got["smd"]) == list(ref["smd"])


# ------------------------------------------------------------ threads and workers
def test_single_thread_pins_torch_and_restores_it():
    import torch  # a dependency of fairspark (setup.py), installed by scripts/test.sh

    from fairspark._threads import single_thread

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with single_thread():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_preload_imports_without_starting_threads():
    # the worker daemon forks after these imports: it must still be one OS thread
    code = ("from fairspark._threads import preload, os_threads, PRELOAD; import sys; "
            "miss = preload(); print(len(PRELOAD) - len(miss), os_threads(), "
            "'sklearn.linear_model' in sys.modules)")
    from fairspark.session import DEFAULT_CONF, LOCAL_CONF

    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    pre = "spark.executorEnv."
    env.update({k[len(pre):]: v for k, v in {**DEFAULT_CONF, **LOCAL_CONF}.items()
                if k.startswith(pre)})  # the daemon's environment
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True, timeout=120).stdout.split()
    assert int(out[0]) >= 8 and out[1] == "1" and out[2] == "True"


def test_the_daemon_check_agrees_with_what_a_worker_imports(tmp_path):
    """From another folder, without ``PYTHONPATH``, a fresh interpreter of this
    environment (what Spark starts for its workers) imports this fairspark (the README's
    test command installs it, editable): the session must then add the preloading
    daemon, an editable install included (its finder, not a folder on ``sys.path``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = ("import pathlib, fairspark; "
            "print(pathlib.Path(fairspark.__file__).resolve().parents[1])")
    found = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert found.returncode == 0 and Path(found.stdout.strip()) == ROOT, (
        f"this fairspark is not installed in {sys.executable}'s environment "
        f"(run scripts/test.sh): {found.stdout}{found.stderr[-500:]}")
    check = "from fairspark.session import _workers_import_fairspark as f; print(f())"
    said = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    assert said.stdout.strip() == "True"


def test_local_session_workers_fork_from_the_preloading_daemon(spark):
    from fairspark.session import LOCAL_CONF

    conf = spark.sparkContext.getConf()
    assert conf.get("spark.python.daemon.module") == LOCAL_CONF["spark.python.daemon.module"]

    def parent(batches):
        import os as _os

        with open(f"/proc/{_os.getppid()}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode()
        for _ in batches:
            yield pd.DataFrame({"cmd": [cmd]})

    cmds = spark.range(0, 2, 1, numPartitions=2).mapInPandas(parent, "cmd string").toPandas()
    assert all("fairspark._daemon" in c for c in cmds["cmd"])


def test_daemon_takes_the_cli_list_without_loading_the_registry():
    """With the list the CLI hands it, the daemon imports neither the registry nor the
    audits' specs (scipy among them: about 0.9 s before the run's first Python task);
    without it, it computes the list from the registry."""
    from fairspark._threads import PRELOAD_ENV

    code = ("import sys; from fairspark._daemon import daemon_modules; "
            "print(','.join(daemon_modules())); "
            "print('fairspark.registry' in sys.modules, 'scipy.stats' in sys.modules)")
    env = {**os.environ, PRELOAD_ENV: "numpy, pandas,pyarrow"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["numpy,pandas,pyarrow", "False", "False"]
    env.pop(PRELOAD_ENV)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[1] == "True" and "numpy" in out[0].split(",")


def test_daemon_preloads_what_the_enabled_audits_need(monkeypatch):
    """The CLI names the enabled audits for the worker daemon: an HFM or group run
    preloads the Arrow batch libraries only (not torch, about 2 s of its first Python
    job), a run with mdfa torch and mdfa's task module, and no name (a session fairspark
    did not start) every registered audit's modules."""
    from fairspark._daemon import BASE_PRELOAD, preload_modules
    from fairspark._threads import AUDITS_ENV, PRELOAD
    from fairspark.registry import specs

    monkeypatch.setenv(AUDITS_ENV, "group,hfm")
    assert preload_modules() == BASE_PRELOAD and "torch" not in BASE_PRELOAD
    monkeypatch.setenv(AUDITS_ENV, "hfm,mdfa")
    got = preload_modules()
    assert set(PRELOAD) <= set(got) and set(specs()["mdfa"].worker_modules) <= set(got)
    assert not set(specs()["correlation"].worker_modules) & set(got)
    monkeypatch.delenv(AUDITS_ENV)
    every = {m for s in specs().values() for m in s.worker_modules}
    assert set(PRELOAD) | every == set(preload_modules())
