"""
Speed of the calibration on an Illum-sized problem, with ratios against baselines in the same run.

10 poses x 13x13 views x 88 corners (11 x 8 board) ~ 150 000 rays of an Illum-like camera
focused at 0.25 m (k_3 = k_4 = -4, NOTES §3), 0.3 px noise. Prints:

- closed form ('exact') time, target < 50 ms;
- full calibration (closed form + refinement with distortion, analytic sparse Jacobian,
  Schur-complement Levenberg-Marquardt), target < 1 s on one core;
- the baseline: scipy.optimize.least_squares (method='trf', x_scale='jac') with its default
  finite-difference Jacobian (dense, 2-point) on the same residual function from the same
  closed-form start, run to its own convergence (capped at --baseline-nfev evaluations);
  the ratio of wall times, target >= 20x; also per iteration;
- the same least_squares with our analytic sparse (CSR) Jacobian, for reference.

Run: OMP_NUM_THREADS and OPENBLAS_NUM_THREADS are set to 1 below, before numpy is imported.
    python3 benchmarks/bench_calibration.py [--skip-baseline] [--baseline-nfev N]
"""

import os

for _var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ[_var] = '1'

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import scipy.optimize  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import best_of  # noqa: E402 - benchmarks/timing.py
from lf_mpc_calib.calibration import calibrate, closed_form  # noqa: E402
from lf_mpc_calib.calibration.closed_form import validate_observations  # noqa: E402
from lf_mpc_calib.calibration.refine import RefinementProblem  # noqa: E402
from lf_mpc_calib.camera.model import MPCModel, PARAMETER_NAMES  # noqa: E402
from lf_mpc_calib.simulation.observations import (  # noqa: E402
    board_points, random_poses, simulate_observations, view_grid)


def illum_like():
    """F = 20 mm focused at 0.25 m, micro-lens pitch 20 um, pixel 1.4 um, gap 40 um."""
    d = 0.02 * 0.25 / 0.23
    return MPCModel(k_i=1.4e-6 * d / 4e-5, k_j=1.4e-6 * d / 4e-5, k_u=2e-5 / d,
                    k_v=0.98 * 2e-5 / d, u_0=-0.26, v_0=-0.2, k_1=0.05, k_2=-0.1,
                    k_3=-4.0, k_4=-4.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    ap.add_argument('--skip-baseline', action='store_true')
    ap.add_argument('--baseline-nfev', type=int, default=40)
    ap.add_argument('--repeats', type=int, default=3)
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    truth = illum_like()
    board = board_points(11, 8, 0.012)
    rv, tr = random_poses(10, rng=rng, board=board, distance=0.3, max_offset=0.03)
    obs = simulate_observations(truth, rv, tr, board, view_grid(13), noise_px=0.3, rng=rng)
    print(f'problem: {len(np.unique(obs.pose))} poses, {len(obs)} rays, '
          f'{10 + 6 * 10} unknowns, {2 * len(obs)} residuals')

    _, t_cf, init = best_of(lambda: closed_form(obs), args.repeats)
    rel_cf = np.abs(init.model.to_vector() / truth.to_vector() - 1)
    print(f'closed form (exact):      {1e3 * t_cf:8.1f} ms   (target < 50 ms: '
          f'{"ok" if t_cf < 0.05 else "MISSED"}); max rel. error of k_i..v_0, k_3, k_4 '
          f'{max(rel_cf[:6].max(), rel_cf[8:].max()):.2%}')
    _, t_cal, res = best_of(lambda: calibrate(obs), args.repeats)
    rel = np.abs(res.model.to_vector() / truth.to_vector() - 1)
    print(f'full calibration:         {t_cal:8.3f} s    (target < 1 s: '
          f'{"ok" if t_cal < 1.0 else "MISSED"}); {res.iterations} LM iterations, '
          f'converged={res.converged}, RMS {res.rms_reprojection_px:.4f} px, '
          f'{res.rms_ray_reprojection_mm:.4f} mm')
    print('  relative errors: ' + ', '.join(
        f'{n} {r:.2e}' for n, r in zip(PARAMETER_NAMES, rel)))
    print(f'  per LM iteration: {1e3 * (t_cal - t_cf) / max(res.iterations, 1):.0f} ms')

    # the same residuals as a flat function of (10 model parameters, 6 P pose parameters)
    grouped = validate_observations(obs)
    pb = RefinementProblem(obs, grouped)
    x0 = np.concatenate([init.model.to_vector(),
                         np.hstack([init.rotation_vectors, init.translations]).ravel()])

    def fun(x):
        r, _ = pb.evaluate(x[:10], x[10:].reshape(-1, 6), jacobian=False)
        r = r.reshape(-1)
        r[~np.isfinite(r)] = 1e6
        return r

    free = np.ones(10, dtype=bool)

    def jac_sparse(x):
        _, j = pb.evaluate(x[:10], x[10:].reshape(-1, 6))
        return pb.sparse_jacobian(j, free)

    t0 = time.perf_counter()
    sp = scipy.optimize.least_squares(fun, x0, jac=jac_sparse, method='trf', x_scale='jac',
                                      max_nfev=100)
    t_sp = time.perf_counter() - t0
    t_sp_total = t_sp + t_cf
    print(f'least_squares + analytic CSR Jacobian: {t_sp_total:8.3f} s ({sp.nfev} evaluations, '
          f'cost {sp.cost:.1f} vs ours {res.cost:.1f}); ours is {t_sp_total / t_cal:.1f}x faster')

    if args.skip_baseline:
        return
    t0 = time.perf_counter()
    base = scipy.optimize.least_squares(fun, x0, method='trf', x_scale='jac',
                                        max_nfev=args.baseline_nfev)
    t_base = time.perf_counter() - t0 + t_cf
    n_jac = base.njev if base.njev is not None else base.nfev
    print(f'baseline least_squares, default finite-difference Jacobian: {t_base:8.1f} s '
          f'({base.nfev} evaluations, {n_jac} Jacobians, status {base.status}: '
          f'{base.message}; cost {base.cost:.1f} vs ours {res.cost:.1f})')
    print(f'  speed-up of the full calibration: {t_base / t_cal:.0f}x (target >= 20x: '
          f'{"ok" if t_base / t_cal >= 20 else "MISSED"}); per iteration '
          f'{(t_base - t_cf) / max(n_jac, 1):.2f} s vs '
          f'{(t_cal - t_cf) / max(res.iterations, 1):.3f} s = '
          f'{((t_base - t_cf) / max(n_jac, 1)) / ((t_cal - t_cf) / max(res.iterations, 1)):.0f}x')


if __name__ == '__main__':
    main()
