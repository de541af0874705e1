"""
Speed of the ``lf-mpc-calib`` command line, with ratios against a baseline in the same run.

The whole ``lf-mpc-calib calibrate TABLE.csv`` process with the default options (interpreter
start, imports, reading the CSV, closed form, refinement with distortion='auto' and its holds,
writing the calibration file) against scipy.optimize.least_squares with its default
finite-difference Jacobian on the same table from the same closed-form start (capped at
--baseline-nfev evaluations, as in bench_calibration.py; the table already in memory, so the
baseline is timed favourably). Two Illum-size tables (10 poses x 13x13 views x 88 corners =
148 720 rays, the camera of bench_calibration.py, 0.3 px noise): ``distorted`` (k_1 = 0.05,
k_2 = -0.1: every term determined, one solve) and ``k1=k2=0`` (no radial distortion: 'auto'
holds k_2 and k_1). Ratios of CPU time (the calibrate process's user + system time, from
getrusage of the children; the baseline's process time), which a loaded machine disturbs less
than wall time (also printed). Target: >= 15x on both tables. Also ``lf-mpc-calib --help``
(the parser alone, every subcommand registered), target < 0.3 s wall.

    python3 benchmarks/bench_cli.py [--quick] [--baseline-nfev 40] [--repeats 3]

The timed command runs as installed, from the repository root: lf_mpc_calib's modules
compiled to bytecode once (:func:`installed_env`).

Latest table, 27 Nov 10:29 UTC (2 cores shared with two other sessions, load average 2-3;
default best of 3):

    table       calibrate CPU   baseline CPU   ratio CPU       held
    distorted   0.553 s         11.3 s         20.5x           -
    k1=k2=0     0.595 s         11.1 s         18.6x           k_1, k_2

The baseline's CPU time moves with the machine's load (9.3 s on the quiet machine, 13-14 s
at load 20-37), and a single --quick run of the calibrate process varies by about 0.1 s
(system time of its page faults), so read the figure as a range: 15-20x.

Where a run's CPU goes (Illum-size table, timed in the process): interpreter start and
imports ~0.11 s (numpy ~0.05 s of it); reading the CSV ~0.13 s (np.loadtxt's C parser
on the file's bytes ~0.11 s, as fast as any reader of numpy, scipy or OpenCV for this file;
the id checks and the repeated-ray count the rest); closed form ~0.03 s; each LM step ~25 ms (the
Jacobian ~18 ms with radial distortion, ~10 ms without; the normal equations ~6 ms); the
cluster-robust sigmas ~8 ms a solve; the error summary ~25 ms; writing the file ~5 ms. The
distorted table takes 4 LM steps. Without radial distortion the same solve is followed by one
refit: k_2's hold, predicted from the solution's linearisation, shows k_1 undetermined beyond
doubt, so both are held at once (refine._hold_undetermined), with the parameters and sigmas
of refits one hold at a time (test_refine_held_start.py); that refit starts from the held
minimum of the quadratic model and takes one LM step.

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
from timing import children_cpu_s  # noqa: E402 - benchmarks/timing.py
from lf_mpc_calib.calibration import closed_form  # noqa: E402
from lf_mpc_calib.calibration.closed_form import validate_observations  # noqa: E402
from lf_mpc_calib.calibration.refine import RefinementProblem  # noqa: E402
from lf_mpc_calib.io.calibration_file import load_calibration  # noqa: E402
from lf_mpc_calib.io.observation_table import read_observations, write_observations  # noqa
from lf_mpc_calib.simulation.observations import (  # noqa: E402
    board_points, random_poses, simulate_observations, view_grid)


def illum_table(path, radial=True):
    """Write the Illum-size table to ``path`` (radial=False: k_1 = k_2 = 0); the true model."""
    rng = np.random.default_rng(0)
    truth = illum_like()
    if not radial:
        truth = truth.replace(k_1=0.0, k_2=0.0)
    board = board_points(11, 8, 0.012)
    rv, tr = random_poses(10, rng=rng, board=board, distance=0.3, max_offset=0.03)
    obs = simulate_observations(truth, rv, tr, board, view_grid(13), noise_px=0.3, rng=rng)
    write_observations(path, obs)
    return truth


def installed_env(tmp):
    """
    The environment of an installed package: lf_mpc_calib's modules compiled to bytecode
    once (pip and colcon do so on install), here under ``tmp`` (PYTHONPYCACHEPREFIX), with
    PYTHONDONTWRITEBYTECODE dropped; without it each run compiles them again (~0.1 s).
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(Path(tmp) / 'pyc'))
    env.pop('PYTHONDONTWRITEBYTECODE', None)
    subprocess.run([sys.executable, '-m', 'compileall', '-q', str(ROOT / 'lf_mpc_calib')],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    return env


def time_process(argv, repeats, env):
    """Best (wall, CPU) seconds of running ``python -m lf_mpc_calib ARGV`` (must exit 0)."""
    wall = cpu = float('inf')
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), children_cpu_s()
        # from the repository root: ``-m`` puts the working folder first on sys.path, and
        # another checkout's lf_mpc_calib there would be the one timed
        subprocess.run([sys.executable, '-m', 'lf_mpc_calib', *argv], env=env, check=True,
                       stdout=subprocess.DEVNULL, cwd=ROOT)
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, children_cpu_s() - c0)
    return wall, cpu


def baseline(table, nfev):
    """(wall, CPU) seconds of closed form + least_squares (2-point finite differences)."""
    obs = read_observations(table)
    t0, c0 = time.perf_counter(), time.process_time()
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
    return time.perf_counter() - t0, time.process_time() - c0, res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    ap.add_argument('--quick', action='store_true', help='time each process once')
    ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--baseline-nfev', type=int, default=40)
    args = ap.parse_args()
    repeats = 1 if args.quick else args.repeats

    with tempfile.TemporaryDirectory(prefix='bench_cli_') as tmp:
        env = installed_env(tmp)
        t_help, _ = time_process(['--help'], max(repeats, 3), env)
        print(f'lf-mpc-calib --help:       {t_help:7.3f} s   (target < 0.3 s: '
              f'{"ok" if t_help < 0.3 else "MISSED"})')
        ratios = {}
        for name, radial in (('distorted', True), ('k1=k2=0', False)):
            table, cal = Path(tmp) / f'{name}.csv', Path(tmp) / f'{name}.yaml'
            truth = illum_table(table, radial)
            n_rays = sum(1 for _ in open(table)) - 1
            print(f'table {name}: {n_rays} rays, {table.stat().st_size / 1e6:.1f} MB')
            c0 = time.process_time()
            read_observations(table)
            print(f'  read_observations alone:   {time.process_time() - c0:7.3f} s CPU')
            wall, cpu = time_process(['calibrate', str(table), '-o', str(cal), '--quiet'],
                                     repeats, env)
            result = load_calibration(cal)
            err = np.abs(result.model.to_vector() - truth.to_vector())[:6] / np.abs(
                truth.to_vector()[:6])
            held = ','.join(sorted(result.held)) if getattr(result, 'held', None) else ''
            print(f'  lf-mpc-calib calibrate:    {cpu:7.3f} s CPU ({wall:.3f} s wall; whole '
                  f'process, default options); max rel. error of k_i..v_0 {err.max():.2e}'
                  + (f'; held {held}' if held else ''))
            b_wall, b_cpu, res = baseline(table, args.baseline_nfev)
            print(f'  baseline least_squares (finite-difference Jacobian): {b_cpu:7.1f} s CPU '
                  f'({b_wall:.1f} s wall; {res.nfev} evaluations, status {res.status})')
            ratios[name] = b_cpu / cpu
            print(f'  speed-up of the whole calibrate process: {ratios[name]:.1f}x CPU '
                  f'({b_wall / wall:.1f}x wall)')
    for name, ratio in ratios.items():
        print(f'{name}: {ratio:.1f}x (target >= 15x: {"ok" if ratio >= 15 else "MISSED"})')


if __name__ == '__main__':
    main()
