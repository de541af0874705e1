"""
Benchmark: corners in the micro-images of one raw frame of R12 size (4080 x 3068) on one core.

Target (issue 10): under 5 s per frame on one core. The frame is rendered by the simulator
(focused-keplerian optics on a 4080 x 3068 sensor, ~27k micro-images), the micro-image grid is
estimated once from its white image (per camera, timed separately), and the script prints the
detection time per frame, its ratio against the baseline stage measured in the same process
(findChessboardCornersSB on the rendered board image alone), and the corner error against the
optics' rows (simulation.focused_observations), with the aperture-cut correction (the default,
features.aperture_bias) and without. --quick: one pose.

    OMP_NUM_THREADS=1 python3 benchmarks/bench_micro_image_corners.py [--quick]
"""

import argparse
import os
import time

os.environ.setdefault('OMP_NUM_THREADS', '1')
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from lf_mpc_calib.features.corners import find_board  # noqa: E402
from lf_mpc_calib.features.micro_image_corners import (  # noqa: E402
    MicroImageCornerDetector, MicroImageOptions)
from lf_mpc_calib.simulation.focused_observations import focused_observations  # noqa: E402
from lf_mpc_calib.simulation.focused_raw import board_pose, match_truth  # noqa: E402
from lf_mpc_calib.simulation.optics import Checkerboard, preset  # noqa: E402
from lf_mpc_calib.simulation.render import WHITE_SAMPLES, render_raw, render_white  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--quick', action='store_true', help='one pose')
    args = ap.parse_args()
    cv2.setNumThreads(1)
    cam = preset('focused-keplerian', sensor__width=4080, sensor__height=3068, sensor__noise=0.0)
    h = cam.field_of_view(cam.scene_distance)[1]
    board = Checkerboard(11, 8, 0.6 * h / 10)
    t = time.perf_counter()
    white = render_white(cam, samples=WHITE_SAMPLES)
    t_render = time.perf_counter() - t
    t = time.perf_counter()
    det = MicroImageCornerDetector(white)
    t_grid = time.perf_counter() - t
    plain = MicroImageCornerDetector(white, det.grid,
                                     options=MicroImageOptions(aperture_correction=False))
    print(f'sensor {cam.sensor.width}x{cam.sensor.height}, {len(det.centres)} micro-images '
          f'(pitch {det.grid.pitch:.2f} px); white rendered in {t_render:.1f} s; grid from the '
          f'white {t_grid:.2f} s (once per camera)')
    poses = [(1.0, (8.0, -6.0, 2.0))] if args.quick else \
        [(1.0, (8.0, -6.0, 2.0)), (1.3, (-15.0, 10.0, -4.0)), (0.85, (20.0, 5.0, 8.0))]
    print(f'{"distance":>8s} {"detect s":>9s} {"baseline s":>10s} {"ratio":>6s} '
          f'{"corners":>8s} {"rows":>6s} {"wrong":>6s} {"RMS px":>7s} {"uncorrected s":>13s} '
          f'{"rows":>6s} {"RMS px":>7s}')
    for dist, ang in poses:
        rv, tv = board_pose(cam, board, dist * cam.scene_distance, ang)
        raw = render_raw(cam, board, rv, tv, samples=8, noise=0.0)
        raw8 = np.round(raw * 255).astype(np.uint8)
        t = time.perf_counter()
        found = det.detect(raw8, board)
        t_det = time.perf_counter() - t
        t = time.perf_counter()
        find_board(found.reference_image, board)
        t_base = time.perf_counter() - t
        truth = focused_observations(cam, board, rv[None], tv[None], radius_fraction=1.0)
        err, wrong = match_truth(found.observations, truth)
        rms = float(np.sqrt(np.mean(np.sum(err ** 2, axis=1))))
        t = time.perf_counter()
        bare = plain.detect(raw8, board)            # without the aperture-cut correction
        t_bare = time.perf_counter() - t
        err0, _ = match_truth(bare.observations, truth)
        print(f'{dist:8.2f} {t_det:9.2f} {t_base:10.2f} {t_det / t_base:6.1f} '
              f'{len(np.unique(found.observations.point)):4d}/{board.n_points:<3d} '
              f'{len(err):6d} {wrong:6d} {rms:7.3f} {t_bare:13.2f} {len(err0):6d} '
              f'{np.sqrt(np.mean(np.sum(err0 ** 2, axis=1))):7.3f}')
    print('target: detect < 5 s per frame on one core; wrong = rows matching no true ray; '
          'uncorrected: the same detector without the aperture-cut correction')


if __name__ == '__main__':
    main()
