#!/usr/bin/env bash
# Rerun the speed stage alone and compare it with the run it replaces (docs/speed.md, "Checking a run"):
#   1. results/<run>/speed/ is copied to results/<run>/speed.first/ (replacing an older copy);
#   2. snakemake --cores all --forcerun speed [args]: the speed jobs again (and the report, which reads them);
#   3. python -m sbd_core speed-compare: per row and batch size, the first run's median [interval] and the rerun's
#      median (inside / OUTSIDE), then how many landed inside the first run's interval.
#
#   scripts/speed_rerun.sh                          # the embedded default (run: embedded)
#   scripts/speed_rerun.sh RUN [snakemake args]     # another run, e.g. RUN=pilot --configfile config/pilot.yaml
set -euo pipefail
RUN=${1:-embedded}
shift || true
PYTHON=${PYTHON:-python}
SPEED="results/$RUN/speed"
[ -d "$SPEED" ] || { echo "error: $SPEED not found: run the workflow first (snakemake --cores all)" >&2; exit 1; }
rm -rf "$SPEED.first"
cp -r "$SPEED" "$SPEED.first"
"$PYTHON" -m snakemake --cores all --forcerun speed "$@"
"$PYTHON" -m sbd_core speed-compare --first "$SPEED.first" --second "$SPEED"
