"""
Benchmark: are the reported standard deviations honest? A sweep of seeds, |error| / sigma.

Simulated sessions of the Lytro design (6 poses, 7x7 views, true model of the optics) with
corner errors of two kinds: independent per ray, and mostly common to the views of one board
corner (what a corner detector makes: the views see the same image patch). Each session is
calibrated; the errors of k_i, k_j, k_u, k_v, u_0, v_0 against the truth are divided by the
reported sigma. Target: |error| / sigma <= 3 for >= 95 % of the estimates. The classic
(J^T J)^-1 s^2 is printed beside the reported (cluster-robust) sigma as the baseline.

    OMP_NUM_THREADS=1 python3 benchmarks/bench_uncertainty.py [--seeds 20] [--scale 0.5]
        [--poses capture|random]
"""

import argparse
import os

os.environ.setdefault('OMP_NUM_THREADS', '1')

import numpy as np  # noqa: E402

from lf_mpc_calib.calibration import calibrate  # noqa: E402
from lf_mpc_calib.calibration.closed_form import aligned_truth  # noqa: E402
from lf_mpc_calib.calibration.refine import _LM, RefinementProblem  # noqa: E402
from lf_mpc_calib.calibration.closed_form import validate_observations  # noqa: E402
from lf_mpc_calib.camera.model import PARAMETER_NAMES  # noqa: E402
from lf_mpc_calib.camera.observations import Observations  # noqa: E402
from lf_mpc_calib.camera.rotations import rotation_matrix  # noqa: E402
from lf_mpc_calib.simulation.dataset import capture_poses, random_poses  # noqa: E402
from lf_mpc_calib.simulation.observations import simulate_observations, view_grid  # noqa: E402
from lf_mpc_calib.simulation.optics import conventional_camera, default_board  # noqa: E402

NAMES = ('k_i', 'k_j', 'k_u', 'k_v', 'u_0', 'v_0')
NOISE = {'independent': (0.0, 0.15), 'per corner': (0.13, 0.07)}
"""(sigma common to the views of a corner, sigma per ray) in pixels: both ~0.15 px RMS."""


def classic_sigma(obs, result):
    """(J^T J)^-1 s^2 at the result: the sigma the refinement reported before."""
    pb = RefinementProblem(obs, validate_observations(obs))
    free = np.array([n not in result.fixed for n in PARAMETER_NAMES])
    lm = _LM(pb, free, 'linear', 1.0)
    perm = np.argsort(result.pose_ids)
    poses = np.hstack([result.rotation_vectors[perm], result.translations[perm]])
    res, jac = pb.evaluate(result.model.to_vector(), poses)
    cov = lm.covariance(lm.normal_equations(res, jac))
    dof = 2 * pb.n - int(free.sum()) - 6 * pb.n_poses
    s2 = float(np.sum(res * res)) / dof
    names = [n for n, f in zip(PARAMETER_NAMES, free) if f]
    return {n: float(np.sqrt(cov[k, k] * s2)) for k, n in enumerate(names)}


def session(camera, board, truth, seed, noise, poses):
    """(z reported (6,), z classic (6,)) of one simulated session."""
    rng = np.random.default_rng(seed)
    if poses == 'random':
        rv, tv = random_poses(camera, board, 6, rng=rng, distance_range=(0.6, 1.5))
    else:
        rv, tv = capture_poses(camera, board, 6, rng=rng)
    obs = simulate_observations(truth, rv, tv, board.points(), view_grid(7) - 3)
    _, corner = np.unique(obs.pose * 10000 + obs.point, return_inverse=True)
    common, per_ray = NOISE[noise]
    ijuv = obs.ijuv.copy()
    ijuv[:, 2:] += (rng.normal(0.0, common, (corner.max() + 1, 2))[corner]
                    + rng.normal(0.0, per_ray, (len(obs), 2)))
    noisy = Observations(obs.pose, obs.point, obs.board, ijuv)
    result = calibrate(noisy)
    aligned, _, _ = aligned_truth(truth, result.model, rotation_matrix(rv), tv)
    classic = classic_sigma(noisy, result)
    err = np.array([abs(getattr(result.model, n) - getattr(aligned, n)) for n in NAMES])
    return (err / np.array([result.stddev[n] for n in NAMES]),
            err / np.array([classic[n] for n in NAMES]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--seeds', type=int, default=20)
    ap.add_argument('--scale', type=float, default=0.5)
    ap.add_argument('--poses', choices=('capture', 'random'), default='capture')
    args = ap.parse_args()
    camera = conventional_camera('lytro', scale=args.scale)
    board = default_board(camera)
    truth = camera.ground_truth_model()
    print(f'Lytro x{args.scale}, 6 {args.poses} poses, 7x7 views, {args.seeds} seeds; '
          f'|error|/sigma of {", ".join(NAMES)}')
    print(f'{"corner errors":<14} {"sigma":<22} {"share <= 3":>10} {"median":>7} {"max":>6}')
    for noise in NOISE:
        z, zc = zip(*(session(camera, board, truth, s, noise, args.poses)
                      for s in range(args.seeds)))
        for label, values in (('reported (clustered)', np.concatenate(z)),
                              ('classic (J^T J)^-1 s^2', np.concatenate(zc))):
            print(f'{noise:<14} {label:<22} {100 * np.mean(values <= 3):9.1f}% '
                  f'{np.median(values):7.2f} {values.max():6.1f}', flush=True)
    print('target: share <= 3 at least 95 % for the reported sigma')


if __name__ == '__main__':
    main()
