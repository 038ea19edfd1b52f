#!/usr/bin/env bash
# The README's demo command: install, then run the main job on the bundled Adult data.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet torch==2.13.0
python -m pip install --quiet -e .
fairspark audit --output out/demo "$@"
