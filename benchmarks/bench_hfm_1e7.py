"""HFM's Spark path at 1e7 rows x 50 on ``local[2]``: it completes, and the Python
workers' peak memory per task stays flat in n (issue 39's acceptance: within 1.2x of
the 1e6 run).

Each size runs in a fresh ``spark-submit``-like process (a fresh session, fresh Python
workers), on the clustered synthetic cell of ``bench_hfm.py`` (20 centres in the unit
cube, Gaussian spread 0.03, the group tied to the centre) written to Parquet in chunks,
so the generator never holds the table. The points are read from Parquet by every pass
(not cached), as a warehouse table is. The engine is forced onto the Spark passes
(``local_max_bytes=0``) in the local session the CLI starts without a ``spark.conf``
(its driver heap sized from the machine), both targets (D and D_f) and the histogram,
as the CLI's HFM stage computes them. While the audit runs, a thread reads every Python
worker's peak RSS (``VmHWM`` in ``/proc``; a worker may serve several tasks, its peak is
theirs), the worker daemon's apart (it runs no task; its size is its preloaded
modules), and resets the workers' peaks at every pass of the engine, so that the pass
table shows each pass's largest worker peak. Run it from the repository root (the
session's preloading daemon needs the workers to import this fairspark).

Usage::

    python benchmarks/bench_hfm_1e7.py --sizes 1000000 10000000 --dim 50
    python benchmarks/bench_hfm_1e7.py --sizes 10000000 --dim 50 --spawn-probe 40

``--spawn-probe`` then runs the largest size that many seconds with a watcher that reads
every child of the JVM the moment it appears: one read before its exec shows the JVM's
command line and memory, what the sampler of workers skips.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np

from _harness import load, parse_args, spark_session

CHUNK = 250_000


def write_clustered(path: Path, n: int, d: int, seed: int) -> None:
    """The clustered cell in chunks of :data:`CHUNK` rows, one Parquet file each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    centres = np.random.default_rng(seed).random((20, d))
    path.mkdir(parents=True)
    for i, s in enumerate(range(0, n, CHUNK)):
        m = min(CHUNK, n - s)
        rng = np.random.default_rng([seed, i])
        lab = rng.integers(0, 20, m)
        X = np.clip(centres[lab] + rng.normal(0, 0.03, (m, d)), 0, 1)
        g = rng.random(m) < np.where(lab < 10, 0.6, 0.1)
        score = X[:, :3].mean(axis=1) + 0.1 * g
        y = (score + rng.normal(0, 0.1, m) > 0.55).astype(float)
        yp = (score > 0.55).astype(float)
        x = pa.ListArray.from_arrays(pa.array(np.arange(0, m * d + 1, d, dtype=np.int32)),
                                     pa.array(X.ravel()))
        tbl = pa.table({"key": pa.array(np.char.add("r", np.arange(s, s + m).astype(str))),
                        "y": y, "yp": yp, "x": x, "c0": g.astype(np.int32)})
        pq.write_table(tbl, path / f"part-{i:05d}.parquet")


class WorkerPeaks:
    """Samples every 0.1 s the peak RSS (``VmHWM``) of the Python workers: the processes
    forked by this session's worker daemon (``fairspark._daemon``, a descendant of this
    process), read from ``/proc`` while they live, so a worker that ends with its task
    is still counted. The daemon itself (its parent is the JVM) runs no task: its peak,
    its preloaded modules, is kept apart (:attr:`daemon`). A child of the JVM read
    between its clone and its exec (the JVM spawns ``getconf`` and the daemon during the
    run) shows the JVM's own command line, which names the daemon module in its conf,
    and the JVM's memory (1.5-2.5 GB at that point of a 1e7 run): it is no Python process
    and counts nowhere (:attr:`jvm_spawns` keeps what was read). :meth:`begin` marks the
    start of an engine pass: the workers' peaks are reset there (``clear_refs``), so
    :attr:`by_pass` holds each pass's own largest worker peak."""

    def __init__(self) -> None:
        import threading

        self.peaks: dict[int, int] = {}
        #: the daemon's own peak (its preloaded modules; it runs no task)
        self.daemon = 0
        #: ``(pid, kB)`` of the JVM's children read before their exec (the JVM's memory)
        self.jvm_spawns: list[tuple[int, int]] = []
        #: per engine pass (in order), the largest worker peak while it ran (kB)
        self.by_pass: dict[str, int] = {}
        self._pass: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def _status(pid: str) -> dict[str, str]:
        with open(f"/proc/{pid}/status") as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)

    @classmethod
    def _mine(cls, pid: str) -> bool:
        """Whether this process is an ancestor of ``pid`` (its JVM's daemon or a worker)."""
        me = str(os.getpid())
        for _ in range(6):
            pid = cls._status(pid)["PPid"].strip()
            if pid == me:
                return True
            if pid in ("0", "1"):
                return False
        return False

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read()
                    # fairspark's preloading daemon, or PySpark's own when it fell
                    # back to it (fairspark._daemon.main: an import started a thread)
                    if b"fairspark._daemon" not in cmd and b"pyspark.daemon" not in cmd:
                        continue
                    st = self._status(pid)
                    ppid = st["PPid"].strip()
                    with open(f"/proc/{ppid}/cmdline", "rb") as f:
                        parent = f.read()
                    if not self._mine(ppid):
                        continue  # another session's worker
                    kb = int(st["VmHWM"].split()[0])
                except (OSError, KeyError, ValueError):
                    continue
                if b"java" in cmd.split(b"\0")[0]:
                    self.jvm_spawns.append((int(pid), kb))  # not yet exec'd: the JVM's
                    continue
                # the daemon's parent is the JVM (whose command line names the daemon
                # module in its conf); a worker's is the daemon, a Python process
                daemon = b"fairspark._daemon" in parent or b"pyspark.daemon" in parent
                if daemon and b"java" not in parent.split(b"\0")[0]:
                    self.peaks[int(pid)] = max(self.peaks.get(int(pid), 0), kb)
                    if self._pass is not None:
                        self.by_pass[self._pass] = max(self.by_pass.get(self._pass, 0), kb)
                else:
                    self.daemon = max(self.daemon, kb)

    def begin(self, name: str) -> None:
        """A pass starts: reset the workers' peaks to their present size (Linux's
        ``clear_refs`` 5) and count what follows to ``name`` (a repeated pass gets a
        numbered name)."""
        for pid in list(self.peaks):
            with contextlib.suppress(OSError):
                with open(f"/proc/{pid}/clear_refs", "w") as f:
                    f.write("5")
        k, i = name, 2
        while k in self.by_pass:
            k, i = f"{name} ({i})", i + 1
        self.by_pass[k] = 0
        self._pass = k

    def stop(self) -> list[int]:
        """The workers' peaks in MB, largest first."""
        self._stop.set()
        self._thread.join()
        return sorted((round(v / 1024) for v in self.peaks.values()), reverse=True)


class JvmChildren:
    """Polls ``/proc`` without pause for new children of this session's JVM and reads,
    the moment one is seen, its first argument and ``VmHWM``, and the JVM's. A child read
    between its clone and its exec still runs in the JVM's memory: it shows the JVM's
    command line and resident size, which a sampler of worker processes must not count
    (``--spawn-probe``)."""

    def __init__(self) -> None:
        import threading

        me = os.getpid()
        kids = [c for t in os.listdir(f"/proc/{me}/task")
                for c in open(f"/proc/{me}/task/{t}/children").read().split()]
        self.jvm = next(c for c in kids
                        if b"java" in open(f"/proc/{c}/cmdline", "rb").read().split(b"\0")[0])
        self.t0 = time.perf_counter()
        #: per child seen: seconds, pid, first argument, its VmHWM and the JVM's (MB), pass
        self.seen: list[dict] = []
        self.pass_name = "-"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def _hwm_mb(status: str) -> int:
        return round(int(status.split("VmHWM:")[1].split()[0]) / 1024)

    def _run(self) -> None:
        known = set(os.listdir("/proc"))
        while not self._stop.is_set():
            now = os.listdir("/proc")
            for pid in now:
                if pid in known or not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        argv0 = f.read().split(b"\0")[0]
                    with open(f"/proc/{pid}/status") as f:
                        st = f.read()
                    with open(f"/proc/{self.jvm}/status") as f:
                        jvm_mb = self._hwm_mb(f.read())
                    if st.split("PPid:")[1].split()[0] != self.jvm:
                        continue
                    mb = self._hwm_mb(st)
                except (OSError, IndexError, ValueError):
                    continue
                self.seen.append({"s": round(time.perf_counter() - self.t0, 2),
                                  "pid": int(pid), "argv0": os.path.basename(argv0).decode(
                                      errors="replace"), "mb": mb, "jvm_mb": jvm_mb,
                                  "pass": self.pass_name})
            known = set(now)
            time.sleep(0.0002)

    def stop(self) -> list[dict]:
        self._stop.set()
        self._thread.join()
        return self.seen


def one_size(n: int, d: int, tmp: str, probe: float = 0.0, remote: str | None = None) -> dict:
    """Generate, run the Spark passes, read the workers' peak RSS (this process); with
    ``probe`` seconds, watch the JVM's children instead and end after that long. With
    ``remote`` (``local[2]``) the session is a Spark Connect one to pyspark's local
    server, started by this process with the same settings (its JVM is this process's
    child, as the classic session's is)."""
    import resource

    from fairspark.cli import local_driver_memory
    from fairspark.hfm._kernels import default_m2, sample_projections
    from fairspark.hfm._spark.cost import CostLog
    from fairspark.hfm.compute import CertifyOptions, DistanceOptions, hfm_distances

    t0 = time.perf_counter()
    path = Path(tmp) / f"clustered_{n}_{d}"
    write_clustered(path, n, d, seed=1)
    t_gen = time.perf_counter() - t0
    # the local session the CLI starts when the config sets no spark.conf: its driver
    # heap sized from the machine (fairspark.cli.local_driver_memory)
    conf = {"spark.ui.enabled": "false", "spark.driver.memory": local_driver_memory()}
    if remote:
        from fairspark.session import build_session

        spark = build_session(remote=remote, app_name=f"hfm-{n}", conf=conf,
                              log_level="ERROR")
    else:
        spark = spark_session(app_name=f"hfm-{n}", conf=conf)
    pts = spark.read.parquet(str(path))
    W = sample_projections(dim=1 + d, m1=25, sampler="uniform_l1", seed=2)
    options = DistanceOptions(method="certified", m2=default_m2(n), targets=(0, 1),
                              histogram_bins=40)
    peaks = WorkerPeaks()
    kids = JvmChildren() if probe else None
    step = CostLog.step

    @contextlib.contextmanager
    def marked(self, name, **kw):  # every pass of the engine names itself to the sampler
        peaks.begin(name)
        if kids is not None:
            kids.pass_name = name
        with step(self, name, **kw) as rec:
            yield rec

    def probe_result(done: bool) -> dict:
        return {"n": n, "probe_s": probe, "hfm_done": done, "load": load(),
                "jvm_children": kids.stop() if kids is not None else []}

    if probe:  # the probe ends the process after ``probe`` seconds, the run unfinished
        import threading

        def end() -> None:
            time.sleep(probe)
            print("RESULT " + json.dumps(probe_result(False)), flush=True)
            os._exit(0)

        threading.Thread(target=end, daemon=True).start()

    CostLog.step = marked
    t = time.perf_counter()
    res = hfm_distances(pts, n_attr=1, dim_x=d, n_rows=n, options=options,
                        certify=CertifyOptions(local_max_bytes=0), projections={0: W, 1: W})
    el = time.perf_counter() - t
    CostLog.step = step
    if probe:
        return probe_result(True)
    worker_peaks = peaks.stop()
    r0, r1 = res[(0, 0)], res[(1, 0)]
    spark.stop()
    return {"n": n, "d": d, "generate_s": round(t_gen, 1), "hfm_s": round(el, 1),
            "D": r0.value, "D_f": r1.value, "certified": bool(r0.certified and r1.certified),
            "engine": r0.extra.get("engine"), "cost": r0.extra.get("cost"),
            "session": "connect" if remote else "classic",
            "worker_peak_rss_mb": worker_peaks[:8], "workers": len(worker_peaks),
            "daemon_peak_rss_mb": round(peaks.daemon / 1024),
            "jvm_spawns_read_mb": [[p, round(kb / 1024)] for p, kb in peaks.jvm_spawns],
            "worker_peak_by_pass_mb": {k: round(v / 1024) for k, v in peaks.by_pass.items()},
            "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                        / 1024.0), "load": load()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child's size
    ap.add_argument("--probe", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--spawn-probe", type=float, default=0.0, metavar="SECONDS",
                    help="then run the largest size this long with a watcher of the JVM's "
                         "children (each read the moment it appears, before its exec)")
    ap.add_argument("--tmp", default=None, help="folder for the Parquet tables")
    ap.add_argument("--kinds", nargs="+", default=["classic"], choices=["classic", "connect"],
                    help="session kinds, each size on each (connect: pyspark's local server)")
    ap.add_argument("--remote", default=None, help=argparse.SUPPRESS)  # the child's
    args = parse_args(ap, argv, fast={"sizes": [2000, 4000], "dim": 5})
    if args.one:
        with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
            print("RESULT " + json.dumps(one_size(args.one, args.dim, tmp, args.probe,
                                                  args.remote)), flush=True)
        return
    results = []
    # a fresh process per size and kind: fresh workers, fresh peaks
    for n, kind in [(n, k) for n in args.sizes for k in args.kinds]:
        print(f"n = {n:,} ({kind} session): start, load {load()}", flush=True)
        log = _log_file(f"bench_hfm_1e7_{n}_{kind}_", args.tmp)
        with open(log, "w") as f:
            out = subprocess.run([sys.executable, __file__, "--one", str(n), "--dim",
                                  str(args.dim)] + (["--tmp", args.tmp] if args.tmp else [])
                                 + (["--remote", "local[2]"] if kind == "connect" else []),
                                 stdout=subprocess.PIPE, stderr=f, text=True, check=False)
        line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
        if out.returncode or not line:
            print(out.stdout[-3000:])
            raise SystemExit(f"n = {n}: exit {out.returncode}; its log: {log}")
        r = json.loads(line[0][7:])
        results.append(r)
        print(f"n = {n:,} x {r['d']} ({r['session']}): {r['engine']}, HFM {r['hfm_s']} s (generate "
              f"{r['generate_s']} s), D {r['D']:.6f}, D_f {r['D_f']:.6f}, certified "
              f"{r['certified']}, largest worker peak RSS {r['worker_peak_rss_mb']} MB of "
              f"{r['workers']} workers (the daemon {r.get('daemon_peak_rss_mb')} MB), driver "
              f"{r['driver_peak_rss_mb']} MB, load {r['load']}", flush=True)
        if r.get("jvm_spawns_read_mb"):
            print(f"  not counted: JVM children read before their exec (pid, the JVM's MB): "
                  f"{r['jvm_spawns_read_mb']}", flush=True)
        cost = r.get("cost") or {}
        # the sampler saw the same passes, in the same order: each one's worker peak
        mb = list(r.get("worker_peak_by_pass_mb", {}).values())
        passes = cost.get("passes", [])
        mb = mb if len(mb) == len(passes) else [""] * len(passes)
        print("| pass | s | jobs | rows read | rows left | largest worker peak (MB) |\n"
              "|---|---|---|---|---|---|")
        for p, m in zip(passes, mb, strict=True):
            print(f"| {p['pass']} | {p['seconds']:.2f} | {p.get('jobs', '')} | "
                  f"{p.get('rows_read', '')} | {p.get('rows_left', '')} | {m} |", flush=True)
    if args.spawn_probe:
        _spawn_probe(max(args.sizes), args)
    if len(args.kinds) > 1:  # the same size on both kinds: Connect's peak against classic's
        top = [r for r in results if r["n"] == max(args.sizes)]
        peak = {r["session"]: max(r["worker_peak_rss_mb"], default=0) for r in top}
        same = len({(r["D"], r["D_f"]) for r in top}) == 1
        print(f"n = {max(args.sizes):,}: largest worker peak RSS {peak} MB, HFM s "
              f"{ {r['session']: r['hfm_s'] for r in top} }, the same D and D_f on both: {same}")
        results = [r for r in results if r["session"] == args.kinds[0]]
    if len(results) > 1:
        a = max(results[0]["worker_peak_rss_mb"], default=0)
        b = max(results[-1]["worker_peak_rss_mb"], default=0)
        ratio = f"{b / a:.2f}x" if a else "n/a (no worker seen)"
        print(f"largest worker peak RSS: {a} MB at n = {results[0]['n']:,}, {b} MB at "
              f"n = {results[-1]['n']:,}: ratio {ratio} (target at most 1.2x)")


def _log_file(prefix: str, folder: str | None) -> Path:
    """A fresh log file for a child's stderr (in ``--tmp`` or the temporary folder): a
    fixed name could belong to another user or another run."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=".log", dir=folder)
    os.close(fd)
    return Path(name)


def _spawn_probe(n: int, args: argparse.Namespace) -> None:
    """Run size ``n`` for ``--spawn-probe`` seconds in a fresh process and print every
    child the JVM spawned: one read before its exec carries the JVM's command line
    (``java``) and the JVM's memory."""
    print(f"spawn probe, n = {n:,}, {args.spawn_probe:g} s: start, load {load()}", flush=True)
    log = _log_file(f"bench_hfm_1e7_probe_{n}_", args.tmp)
    with open(log, "w") as f:
        out = subprocess.run([sys.executable, __file__, "--one", str(n), "--dim",
                              str(args.dim), "--probe", str(args.spawn_probe)]
                             + (["--tmp", args.tmp] if args.tmp else []),
                             stdout=subprocess.PIPE, stderr=f, text=True, check=False)
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    if out.returncode or not line:
        raise SystemExit(f"spawn probe: exit {out.returncode}; its log: {log}")
    r = json.loads(line[0][7:])
    for c in r["jvm_children"]:
        state = ("read before its exec: the JVM's memory" if "java" in c["argv0"]
                 else "read in its exec (no command line yet)" if not c["argv0"]
                 else "after its exec")
        print(f"  JVM child {c['pid']} at {c['s']} s ({c['pass']}): {c['argv0']!r}, VmHWM "
              f"{c['mb']} MB, the JVM's {c['jvm_mb']} MB: {state}", flush=True)
    print(f"spawn probe: {len(r['jvm_children'])} JVM children seen, "
          f"{sum('java' in c['argv0'] for c in r['jvm_children'])} read before their exec, "
          f"load {r['load']}", flush=True)


if __name__ == "__main__":
    main()
