#!/usr/bin/env python3
"""Build what a cluster user ships: the fairspark wheel and a packed Python environment.

Outputs (in ``--dist``, default ``dist/``)::

    fairspark-<version>-py3-none-any.whl   the wheel (pip install, or --py-files on the driver)
    fairspark-<version>-py3-none-any.zip   the same bytes, for ``spark-submit --py-files``
                                           (Spark only adds .zip/.egg/.jar to executors' path)
    fairspark-env.tar.gz                   for ``spark-submit --archives ...#env``
    fairspark-env.requirements.txt         the exact pins inside the packed env

The packed environment is a ``venv`` built with the interpreter that runs this script,
holding fairspark's runtime dependencies (read from the wheel's metadata, minus
``pyspark``, which Spark itself puts on the executors' path) pinned to the versions
installed here, so driver and executors agree (pickled numpy/pandas objects and Arrow
batches cross between them). torch is installed first from the CPU wheel on disk so
nothing pulls a CUDA build.

Packing an environment with torch takes a while, so the archive is cached under
``build/artifact-cache/<key>/`` where ``<key>`` hashes ``setup.py``, the pins, the
interpreter and this script; a rebuild with the same key copies the cached archive.

Usage::

    python tools/build_artifact.py [--dist dist] [--no-env] [--force]

See ``docs/deploy.md``.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV_NAME = "fairspark-env.tar.gz"
#: Bump when the way the environment is built changes (part of the cache key).
ENV_RECIPE = 2
#: Never shipped in the env: Spark provides pyspark/py4j on every executor.
NOT_SHIPPED = {"pyspark", "py4j"}
#: The CPU torch wheel on disk; a plain ``torch==<version>`` is the fallback.
TORCH_WHEELS = "/opt/wheels/torch-{version}+cpu-*.whl"
#: Large files no executor needs (headers, static libs, test suites, caches).
EXCLUDES = (
    "*/__pycache__/*",
    "*.pyc",
    "lib/python*/site-packages/torch/include/*",
    "lib/python*/site-packages/*/tests/*",
)
# Not excluded: torch/testing/_internal (torch.utils.checkpoint imports it at start-up).


def _version() -> str:
    text = (ROOT / "fairspark" / "_version.py").read_text(encoding="utf-8")
    return re.search(r'^__version__ = "([^"]+)"', text, re.MULTILINE).group(1)  # type: ignore[union-attr]


def _run(cmd: list[str], **kw: object) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def build_wheel(dist: Path) -> Path:
    """Build the pure-Python wheel of fairspark into ``dist``."""
    version = _version()
    wheel = dist / f"fairspark-{version}-py3-none-any.whl"
    if wheel.exists():
        wheel.unlink()
    # --no-isolation: build with the setuptools installed here (no index needed).
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist),
          str(ROOT)], cwd=ROOT)
    if not wheel.is_file():
        raise SystemExit(f"expected wheel {wheel} was not built")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    missing = [p for p in ("fairspark/__init__.py", "fairspark/metrics/_intervals.py")
               if p not in names]
    if not any(n.startswith("fairspark/report/templates/") for n in names):
        missing.append("fairspark/report/templates/*.j2")
    if missing:
        raise SystemExit(f"wheel {wheel.name} lacks {missing}")
    # Spark puts only .zip/.egg/.jar from --py-files on the executors' sys.path
    # (pyspark SparkContext.PACKAGE_EXTENSIONS), so ship the same bytes as a .zip.
    shutil.copyfile(wheel, wheel.with_suffix(".zip"))
    return wheel


def runtime_pins(wheel: Path) -> list[str]:
    """``name==version`` for every runtime dependency of the wheel, as installed here."""
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = zf.read(meta_name).decode("utf-8")
    pins = []
    for line in meta.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        if "extra ==" in req:
            continue
        name = re.match(r"[A-Za-z0-9_.\-]+", req).group(0)  # type: ignore[union-attr]
        if name.lower() in NOT_SHIPPED:
            continue
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            raise SystemExit(
                f"runtime dependency {name!r} is not installed in {sys.executable}; "
                "install fairspark's requirements first"
            ) from None
    return sorted(pins, key=str.lower)


def _torch_wheel(pin: str) -> str:
    version = pin.split("==", 1)[1].split("+", 1)[0]
    found = sorted(glob.glob(TORCH_WHEELS.format(version=version)))
    return found[-1] if found else f"torch=={version}"


def build_env(dist: Path, pins: list[str], *, force: bool = False) -> Path:
    """Create, fill and pack the environment (or reuse the cached archive)."""
    key_src = json.dumps({
        "setup": (ROOT / "setup.py").read_text(encoding="utf-8"),
        "pins": pins,
        "python": sys.version,
        "executable": os.path.realpath(sys.executable),
        "excludes": EXCLUDES,
        "recipe": ENV_RECIPE,
    }, sort_keys=True)
    key = hashlib.sha256(key_src.encode()).hexdigest()[:16]
    cache = ROOT / "build" / "artifact-cache" / key
    cached = cache / ENV_NAME
    out = dist / ENV_NAME
    if cached.is_file() and not force:
        print(f"reusing cached environment {cached}", flush=True)
    else:
        venv_dir = ROOT / "build" / "artifact-env"
        shutil.rmtree(venv_dir, ignore_errors=True)
        t0 = time.perf_counter()
        _run([sys.executable, "-m", "venv", str(venv_dir)])
        py = str(venv_dir / "bin" / "python")
        pip = [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        torch_pin = next((p for p in pins if p.lower().startswith("torch==")), None)
        if torch_pin:  # first, from the CPU wheel, so no later step can pull a CUDA build
            _run([*pip, _torch_wheel(torch_pin)])
        _run([*pip, *[p for p in pins if p is not torch_pin]])
        _run([py, "-c", ("import numpy, pandas, pyarrow, sklearn, torch, jinja2, matplotlib;"
              "assert torch.version.cuda is None, 'CUDA torch in the env';"
              "print('env ok: torch', torch.__version__)")])
        t1 = time.perf_counter()
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cache / (ENV_NAME + ".part")
        excludes = [a for pat in EXCLUDES for a in ("--exclude", pat)]
        _run([sys.executable, "-m", "venv_pack", "--prefix", str(venv_dir), "--output",
              str(tmp), "--format", "tar.gz", "--compress-level", "1", "--force", "--quiet",
              *excludes])
        tmp.replace(cached)
        (cache / "requirements.txt").write_text("\n".join(pins) + "\n", encoding="utf-8")
        shutil.rmtree(venv_dir, ignore_errors=True)
        print(f"installed in {t1 - t0:.0f} s, packed in {time.perf_counter() - t1:.0f} s",
              flush=True)
    if out.exists():
        out.unlink()
    shutil.copyfile(cached, out)
    shutil.copyfile(cache / "requirements.txt", dist / "fairspark-env.requirements.txt")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dist", default=str(ROOT / "dist"), help="output folder (default dist/)")
    ap.add_argument("--no-env", action="store_true", help="build the wheel only")
    ap.add_argument("--force", action="store_true", help="rebuild the env even if cached")
    args = ap.parse_args(argv)
    dist = Path(args.dist).resolve()
    dist.mkdir(parents=True, exist_ok=True)
    wheel = build_wheel(dist)
    print(f"wheel: {wheel}")
    print(f"zip:   {wheel.with_suffix('.zip')} (for --py-files)")
    if not args.no_env:
        pins = runtime_pins(wheel)
        env = build_env(dist, pins, force=args.force)
        print(f"env:   {env} ({env.stat().st_size / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
