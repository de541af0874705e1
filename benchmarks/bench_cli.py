"""
Speed of the ``lf-mpc-calib`` command line, with ratios against a baseline in the same run.

The whole ``lf-mpc-calib calibrate TABLE.csv`` process (interpreter start, imports, reading the
CSV, closed form, refinement with distortion, writing the calibration file) on an Illum-size
observation table (10 poses x 13x13 views x 88 corners ~ 148 720 rays, the camera of
bench_calibration.py, 0.3 px noise) against scipy.optimize.least_squares with its default
finite-difference Jacobian on the same table from the same closed-form start (capped at
--baseline-nfev evaluations, as in bench_calibration.py; the table already in memory, so the
baseline is timed favourably). Target: the process >= 10x faster. Also ``lf-mpc-calib --help``
(the parser alone, every subcommand registered), target < 0.3 s.

    python3 benchmarks/bench_cli.py [--quick] [--baseline-nfev 40] [--repeats 3]

--quick times each process once (default: best of --repeats).
"""

import os

for _var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ[_var] = '1'

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import scipy.optimize  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'benchmarks'))

from bench_calibration import illum_like  # noqa: E402
from lf_mpc_calib.calibration import closed_form  # noqa: E402
from lf_mpc_calib.calibration.closed_form import validate_observations  # noqa: E402
from lf_mpc_calib.calibration.refine import RefinementProblem  # noqa: E402
from lf_mpc_calib.io.calibration_file import load_calibration  # noqa: E402
from lf_mpc_calib.io.observation_table import read_observations, write_observations  # noqa
from lf_mpc_calib.simulation.observations import (  # noqa: E402
    board_points, random_poses, simulate_observations, view_grid)


def illum_table(path):
    """Write the Illum-size table to ``path``; return the true model."""
    rng = np.random.default_rng(0)
    truth = illum_like()
    board = board_points(11, 8, 0.012)
    rv, tr = random_poses(10, rng=rng, board=board, distance=0.3, max_offset=0.03)
    obs = simulate_observations(truth, rv, tr, board, view_grid(13), noise_px=0.3, rng=rng)
    write_observations(path, obs)
    return truth


def time_process(argv, repeats):
    """Best wall time of running ``python -m lf_mpc_calib ARGV`` (which must exit 0)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    best = float('inf')
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, '-m', 'lf_mpc_calib', *argv], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
    return best


def baseline(table, nfev):
    """Seconds of closed form + least_squares (2-point finite differences) on ``table``."""
    obs = read_observations(table)
    t0 = time.perf_counter()
    init = closed_form(obs)
    pb = RefinementProblem(obs, validate_observations(obs))
    x0 = np.concatenate([init.model.to_vector(),
                         np.hstack([init.rotation_vectors, init.translations]).ravel()])

    def fun(x):
        r, _ = pb.evaluate(x[:10], x[10:].reshape(-1, 6), jacobian=False)
        r = r.reshape(-1)
        r[~np.isfinite(r)] = 1e6
        return r

    res = scipy.optimize.least_squares(fun, x0, method='trf', x_scale='jac', max_nfev=nfev)
    return time.perf_counter() - t0, res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    ap.add_argument('--quick', action='store_true', help='time each process once')
    ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--baseline-nfev', type=int, default=40)
    args = ap.parse_args()
    repeats = 1 if args.quick else args.repeats

    with tempfile.TemporaryDirectory(prefix='bench_cli_') as tmp:
        table, cal = Path(tmp) / 'illum.csv', Path(tmp) / 'cal.yaml'
        truth = illum_table(table)
        n_rays = sum(1 for _ in open(table)) - 1
        print(f'table: {n_rays} rays, {table.stat().st_size / 1e6:.1f} MB')

        t_help = time_process(['--help'], max(repeats, 3))
        print(f'lf-mpc-calib --help:       {t_help:7.3f} s   (target < 0.3 s: '
              f'{"ok" if t_help < 0.3 else "MISSED"})')

        t0 = time.perf_counter()
        read_observations(table)
        print(f'read_observations alone:   {time.perf_counter() - t0:7.3f} s')

        t_cli = time_process(['calibrate', str(table), '-o', str(cal), '--quiet'], repeats)
        model = load_calibration(cal).model
        rel = np.abs(model.to_vector() / truth.to_vector() - 1)
        print(f'lf-mpc-calib calibrate:    {t_cli:7.3f} s   (whole process, with distortion); '
              f'max rel. error of k_i..v_0 {rel[:6].max():.2e}')

        t_base, res = baseline(table, args.baseline_nfev)
        print(f'baseline least_squares (finite-difference Jacobian): {t_base:7.1f} s '
              f'({res.nfev} evaluations, status {res.status}: {res.message})')
    ratio = t_base / t_cli
    print(f'speed-up of the whole calibrate process: {ratio:.1f}x (target >= 10x: '
          f'{"ok" if ratio >= 10 else "MISSED"})')


if __name__ == '__main__':
    main()
