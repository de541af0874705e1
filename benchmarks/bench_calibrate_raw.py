"""
Benchmark: the whole calibrate-raw chain on rendered data sets, time and accuracy vs truth.

Targets (issue 4): 10 Lytro-size poses in under 60 s on one core, dominated by detection;
on noise-free renders k_i..k_v within 0.5 %, principal point within 0.5 px, k_3, k_4 within
5 %, RMS reprojection <= 0.1 px; with sensor noise, how the errors grow. Rendering is not
timed. Times are printed with their ratio to the decode stage of the same run (baseline).

    OMP_NUM_THREADS=1 python3 benchmarks/bench_calibrate_raw.py --preset lytro --scale 1 \
        --poses 10 --noise 0 0.005 0.01
    [--true-grid: decode with the renderer's lenslet grid instead of estimating it]
    [--views 7x7] [--samples 16: rays per raw pixel; 4 renders 4x faster but their aliased
    edges put ~0.1 px of noise on every corner, ~0.6 % on k_i with 10 poses near focus]
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault('OMP_NUM_THREADS', '1')

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from lf_mpc_calib.io.calibration_file import load_calibration  # noqa: E402
from lf_mpc_calib.pipeline.offline import calibrate_raw, load_raw_dataset  # noqa: E402
from lf_mpc_calib.simulation.dataset import random_poses, write_dataset  # noqa: E402
from lf_mpc_calib.simulation.optics import Checkerboard, default_board, preset  # noqa: E402


def signed(model, truth):
    """Match the global signs of (k_i, k_u, u_0) and (k_j, k_v, v_0) to the truth's."""
    sx = np.sign(model.k_i * truth.k_i)
    sy = np.sign(model.k_j * truth.k_j)
    return model.replace(k_i=sx * model.k_i, k_u=sx * model.k_u, u_0=sx * model.u_0,
                         k_j=sy * model.k_j, k_v=sy * model.k_v, v_0=sy * model.v_0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--preset', default='lytro', choices=('lytro', 'illum'))
    ap.add_argument('--scale', type=float, default=1.0)
    ap.add_argument('--poses', type=int, default=10)
    ap.add_argument('--noise', type=float, nargs='*', default=[0.0])
    ap.add_argument('--board', default=None, help='COLSxROWS (default: sized to the view)')
    ap.add_argument('--square', type=float, default=None)
    ap.add_argument('--samples', type=int, default=16,
                    help='rays per raw pixel (4 leaves ~0.1 px of aliasing in corners)')
    ap.add_argument('--true-grid', action='store_true')
    ap.add_argument('--views', default=None, help='N_IxN_J sub-aperture views (default 9x9)')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--depth-range', type=float, nargs=2, default=(0.85, 1.15),
                    metavar=('NEAR', 'FAR'),
                    help='board distances as fractions of the focus distance: at the focus '
                         'plane the views have no disparity, so k_i, k_j rest on the spread')
    args = ap.parse_args()
    cv2.setNumThreads(1)
    camera = preset(args.preset, scale=args.scale)
    board = default_board(camera)
    if args.board:
        cols, rows = (int(x) for x in args.board.lower().split('x'))
        board = Checkerboard(cols, rows, args.square or board.square)
    rv, tv = random_poses(camera, board, args.poses, rng=np.random.default_rng(args.seed),
                          max_tilt_deg=35.0, distance_range=tuple(args.depth_range))
    print(f'{args.preset} x {args.scale}: raw {camera.sensor.size}, board {board.cols}x'
          f'{board.rows} x {board.square * 1000:.2f} mm, {args.poses} poses at '
          f'{args.depth_range[0]:g}-{args.depth_range[1]:g} x the focus distance, one core')
    for noise in args.noise:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            write_dataset(tmp, camera, board, rv, tv, seed=args.seed, samples=args.samples,
                          noise=noise)
            t_render = time.perf_counter() - t0
            ds = load_raw_dataset(tmp)
            grid = load_calibration(f'{tmp}/ground_truth.yaml').lenslet_grid \
                if args.true_grid else None
            t0 = time.perf_counter()
            views = None if args.views is None else \
                tuple(int(x) for x in args.views.lower().split('x'))
            run = calibrate_raw(ds, grid=grid, views=views, accept_uncertain=True)
            total = time.perf_counter() - t0
        t = run.timings
        m, truth = signed(run.result.model, run.truth), run.truth
        rel = {n: 100 * abs(getattr(m, n) / getattr(truth, n) - 1)
               for n in ('k_i', 'k_j', 'k_u', 'k_v', 'k_3', 'k_4')}
        pp = np.abs(m.principal_point - truth.principal_point)
        r = run.result
        print(f'noise {noise:.4f} (render {t_render:.1f} s, not timed): calibrate-raw '
              f'{total:.2f} s (target < 60 s for 10 Lytro poses), = {total / t["decode"]:.1f}x '
              f'decode; grid {t["grid"]:.2f} s, decode {t["decode"]:.2f} s, detect '
              f'{t["detect"]:.2f} s ({100 * t["detect"] / total:.0f} %), calibrate '
              f'{t["calibrate"]:.2f} s; {len(run.pose_frames)} poses kept, '
              f'{len(run.skipped)} skipped, {len(run.observations)} rays')
        print('   rel. error %: ' + ', '.join(f'{k} {v:.3f}' for k, v in rel.items())
              + f'; principal point error {pp.round(3).tolist()} px; RMS reprojection '
              f'{r.rms_reprojection_px:.4f} px; converged {r.converged}'
              + ('  [decoded with the true grid]' if args.true_grid else ''))
        d = run.determination
        print('   sigma %: ' + ', '.join(f'{k} {v:.3f}' for k, v in d.sigma_pct.items())
              + '; principal point sigma {:.3f}, {:.3f} px'.format(*d.sigma_principal_point_px)
              + ''.join(f'; REFUSED without --accept-uncertain: {x}' for x in d.refusals))


if __name__ == '__main__':
    main()
