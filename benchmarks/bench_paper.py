"""
The paper's simulated experiments (Table 4, Fig. 9-11): the same as ``lf-mpc-calib bench paper``.

    python3 benchmarks/bench_paper.py [--trials N] [--sweep poses-views|noise|all] [-o DIR]
        [--distortion] [--workers N]

BLAS threads are limited to 1 per process (the sweeps parallelise over worker processes).
"""

import os

for _var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ.setdefault(_var, '1')

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lf_mpc_calib.cli import main  # noqa: E402

if __name__ == '__main__':
    sys.exit(main(['bench', 'paper'] + sys.argv[1:]))
