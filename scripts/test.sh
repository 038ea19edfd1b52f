#!/usr/bin/env bash
# The README's test command: install everything, then run the whole test suite.
# torch is installed first and pinned to the CPU build that these machines keep on disk,
# so that nothing pulls a multi-GB CUDA build.
#
#   bash scripts/test.sh [pytest args]          the whole suite (what CI runs)
#   bash scripts/test.sh --fast [pytest args]   the fast profile: no installs (run the
#       whole command once first), the tests not marked slow (tests/profiles.py says
#       which are left out and what covers their ground), on a classic session
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fast" ]; then
  shift
  start=$(date +%s)
  rc=0
  python -m pytest -q -m "not slow" --durations=15 "$@" || rc=$?
  echo "fast profile: $(( $(date +%s) - start )) s on $(nproc) cores (load $(cut -d' ' -f1-3 /proc/loadavg))"
  exit "$rc"
fi
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
python -m pip install --quiet -e '.[dev,connect,mlflow]'
# the suite on a classic local[2] session (it records the rows the Connect run compares)
rc=0
python -m pytest -q --durations=25 "$@" || rc=$?
# then the tests marked both_kinds on a Spark Connect session (pyspark's local server);
# pyspark allows one session kind per process, hence a second pytest process
crc=0
FAIRSPARK_TEST_SESSION=connect python -m pytest -q -m both_kinds --durations=10 "$@" || crc=$?
[ "$crc" = 5 ] && crc=0  # no test marked both_kinds among the selected ones
[ "$rc" = 0 ] || exit "$rc"
exit "$crc"
