#!/usr/bin/env bash
# The HFM scale figures (synthetic cells, real tables, per-task memory, the 5M-row CLI
# audit) in one go; run it on a quiet machine.
#
#   benchmarks/bench_hfm_scale.sh                # full sizes (hours on local[2])
#   benchmarks/bench_hfm_scale.sh --small        # the same steps at small sizes (minutes)
#   benchmarks/bench_hfm_scale.sh --fast         # each script's --fast profile (a smoke run;
#                                                # no real tables: they need ../shared/data)
#
# Every table line carries the load average (1/5/15 min) when it was measured.
# Output: out/bench_hfm_scale/*.md and the console.
set -euo pipefail
cd "$(dirname "$0")/.."
SMALL=0
[[ "${1:-}" == "--small" ]] && SMALL=1
OUT=out/bench_hfm_scale
mkdir -p "$OUT"
if [[ "${1:-}" == "--fast" ]]; then
  python benchmarks/bench_hfm.py --fast --out "$OUT/fast.md"
  python benchmarks/bench_hfm_cli_scale.py --fast | tee "$OUT/cli_scale_fast.txt"
  exit 0
fi
if [[ $SMALL == 1 ]]; then
  U_SIZES="2000 4000 8000"; C_SIZE=8000; MEM_SIZES="2000 8000"; CLI_ROWS=50000; LIMIT=600
  CLI_FLAGS="--only-hfm"
else
  U_SIZES="100000 300000 1000000"; C_SIZE=1000000; MEM_SIZES="100000 1000000"
  CLI_ROWS=5000000; LIMIT=3600; CLI_FLAGS=""
fi
B="nice -n 5 python benchmarks/bench_hfm.py --methods certified --peers scipy --time-limit $LIMIT"
echo "== load at start: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== uniform d=100 at $U_SIZES (certified vs scipy, one run)"
$B --datasets uniform --dims 100 --sizes $U_SIZES --out "$OUT/uniform_d100.md"

echo "== clustered d=50 at $C_SIZE"
$B --datasets clustered --dims 50 --sizes $C_SIZE --out "$OUT/clustered_d50.md"

echo "== real tables at natural size, with the 4-pass reference"
$B --datasets adult_sex compas_race german_sex --pass-ref --out "$OUT/real.md"

echo "== per-task peak memory (Python worker max RSS), one fresh session per size"
for n in $MEM_SIZES; do
  $B --datasets uniform --dims 100 --sizes "$n" --worker-rss --out "$OUT/memory_$n.md"
done

echo "== the CLI audit, $CLI_ROWS rows, d=30, spark.driver.maxResultSize=1m"
nice -n 5 python benchmarks/bench_hfm_cli_scale.py --rows "$CLI_ROWS" --dim 30 $CLI_FLAGS \
  | tee "$OUT/cli_scale.txt"
echo "== load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
