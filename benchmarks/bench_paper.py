"""
The paper's simulated experiments (Table 4, Fig. 9-11): the same as ``lf-mpc-calib bench paper``.

    python3 benchmarks/bench_paper.py [--trials N] [--sweep poses-views|noise|all] [-o DIR]
"""

import sys

from lf_mpc_calib.cli import main

if __name__ == '__main__':
    sys.exit(main(['bench', 'paper'] + sys.argv[1:]))
