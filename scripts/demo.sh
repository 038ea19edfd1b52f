#!/usr/bin/env bash
# The README's demo command: install, then run the main job on the bundled Adult data.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "fairspark demo: installing torch (CPU build) and fairspark, then auditing UCI Adult" \
     "with the bundled config fairspark/conf/demo.yaml; outputs under out/demo/"
python -m pip install --quiet torch==2.13.0
python -m pip install --quiet -e .
fairspark audit --output out/demo "$@"
