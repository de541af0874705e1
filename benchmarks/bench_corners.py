"""
Benchmark: checkerboard corners across all 9x9 views of one Lytro-size pose (328 px views).

Target (issue 4): under 2 s per pose on one core. The views are rendered straight from an MPC
model (lf_mpc_calib.features.synthetic_views) so the exact corner pixels are known; the script
prints the time per pose, the time ratio against the baseline stage (findChessboardCornersSB on
the central view alone, measured in the same process), and the corner error against ground
truth for increasing sensor noise.

    OMP_NUM_THREADS=1 python3 benchmarks/bench_corners.py [--poses 3]
"""

import argparse
import os
import time

os.environ.setdefault('OMP_NUM_THREADS', '1')

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from lf_mpc_calib.camera.board import Checkerboard  # noqa: E402
from lf_mpc_calib.errors import DetectionError  # noqa: E402
from lf_mpc_calib.features.corners import detect_corners, find_board  # noqa: E402
from lf_mpc_calib.features.synthetic_views import render_views, ViewStack  # noqa: E402
from lf_mpc_calib.camera.model import MPCModel  # noqa: E402

# Paper Table 3 camera (328 px views, k_u ~ 2e-3), focused at 0.3 m (k_3 = k_4 = -1/0.3).
MODEL = MPCModel(2.4e-4, 2.5e-4, 2.0e-3, 1.9e-3, -0.32, -0.31, 0.0, 0.0, -3.3, -3.3)
BOARD = Checkerboard(12, 9, 0.0035)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--poses', type=int, default=3)
    ap.add_argument('--noise', type=float, nargs='*', default=[0.0, 0.01, 0.02, 0.05])
    args = ap.parse_args()
    cv2.setNumThreads(1)
    rng = np.random.default_rng(0)
    print(f'views 9x9 of 328x328 px, board {BOARD.cols}x{BOARD.rows}, one core')
    for noise in args.noise:
        times, base, errs, found = [], [], [], []
        for p in range(args.poses):
            rvec = rng.uniform(-0.25, 0.25, 3)
            tvec = np.array([rng.uniform(-0.008, 0.0), rng.uniform(-0.008, 0.0),
                             rng.uniform(0.075, 0.09)]) - np.array([0.019, 0.014, 0.0])
            stack, truth = render_views(MODEL, BOARD, rvec, tvec, views=(9, 9),
                                        size=(328, 328), noise_sigma=noise, rng=rng,
                                        supersample=3)
            stack = ViewStack(stack.views, stack.i_values, stack.j_values, stack.valid)
            try:
                t0 = time.perf_counter()
                find_board(stack.views[4, 4], BOARD)
                base.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                det = detect_corners(stack, BOARD, pose=p)
                times.append(time.perf_counter() - t0)
            except DetectionError as exc:
                print(f'  pose {p} skipped: {exc}')
                continue
            o = det.observations
            ii = o.ijuv[:, 0].astype(int) + 4
            jj = o.ijuv[:, 1].astype(int) + 4
            e = o.ijuv[:, 2:] - truth[jj, ii, o.point]
            errs.append(e)
            found.append(len(o) / (81 * BOARD.n_points))
        if not errs:
            continue
        e = np.concatenate(errs)
        t = np.median(times)
        print(f'noise {noise:5.3f}: detect {t:.3f} s/pose (target < 2 s: '
              f'{"ok" if t < 2 else "MISSED"}), {t / np.median(base):.1f}x the central-view '
              f'search alone ({np.median(base):.3f} s); found {100 * np.mean(found):.1f} % of '
              f'rows; '
              f'corner error RMS {np.sqrt(np.mean(np.sum(e ** 2, 1))):.4f} px, '
              f'max {np.abs(e).max():.3f} px')


if __name__ == '__main__':
    main()
