#!/usr/bin/env bash
# Run the whole test suite in .venv (made or reused by scripts/setup.sh), on 2 workers
# (pytest-xdist; LF_TEST_WORKERS=0 runs in one process, as a debugger wants).
# Arguments go to pytest, e.g. scripts/test.sh -x -k image_conversion
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
START=$SECONDS

"$ROOT/scripts/setup.sh"

cd "$ROOT"
# Node tests talk over real DDS: stay on this host. test/conftest.py gives every pytest process
# its own ROS_DOMAIN_ID.
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export PYTHONDONTWRITEBYTECODE=1
# One BLAS thread per process: the 2 workers already fill the 2 cores, and OpenBLAS's threads
# spinning beside them made small solves 8x slower (lstsq 6000 x 21: 7.7 ms against 0.97 ms
# on one thread; test_session.py 26 -> 20 s). Set them yourself to override.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
export MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"

set +e
# loadfile: the tests of one file share their module fixtures (renders, calibrations); the files
# run in the order test/conftest.py gives them (costliest first), not xdist's by test count.
WORKERS="${LF_TEST_WORKERS:-2}"
XDIST=()
[[ "$WORKERS" == 0 ]] || XDIST=(-n "$WORKERS" --dist loadfile --no-loadscope-reorder)
"$ROOT/.venv/bin/python" -m pytest "${XDIST[@]}" "$@"
rc=$?
set -e

if [[ $rc == 5 ]]; then
  echo "[test] pytest collected no tests: nothing ran, which counts as a failure" >&2
fi
echo "[test] pytest exit code $rc; total $((SECONDS - START)) s (setup included)"
exit $rc
