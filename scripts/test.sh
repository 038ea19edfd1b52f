#!/usr/bin/env bash
# The README's test command: install everything, then run the whole test suite.
# torch is installed first and pinned to the CPU build that these machines keep on disk,
# so that nothing pulls a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
# the report's browser test needs Debian's chromium and chromedriver
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      chromium chromium-driver >/dev/null) \
      || echo "warning: chromium could not be installed; the browser test will be skipped"
  else
    echo "warning: chromium/chromedriver missing and not root; the browser test will be skipped"
  fi
fi
python -m pip install --quiet torch==2.13.0
python -m pip install --quiet -e '.[dev]'
python -m pytest -q --durations=25 "$@"
