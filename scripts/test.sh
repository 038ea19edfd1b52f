#!/usr/bin/env bash
# The README's test command: install everything, then run the whole test suite.
# torch is installed first and pinned to the CPU build that these machines keep on disk,
# so that nothing pulls a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet torch==2.13.0
python -m pip install --quiet -e '.[dev]'
python -m pytest -q --durations=25 "$@"
