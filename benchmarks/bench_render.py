"""
Benchmark: ray-traced raw frame of the Lytro-size preset (3280 x 3280, 4 rays per pixel).

Target (issue 3): under 10 s per raw frame on one core. Prints the time of a raw frame and of
the white image, the throughput in Mrays/s, and the ratio against a baseline measured in the
same process: the straightforward tracing through the reference Camera.trace ((N, 2) arrays,
one call per sample) plus board shading, on a crop, scaled per pixel.

    OMP_NUM_THREADS=1 python3 benchmarks/bench_render.py [--scale 1.0] [--samples 4]
"""

import argparse
import os
import time

os.environ.setdefault('OMP_NUM_THREADS', '1')
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

import numpy as np  # noqa: E402

from lf_mpc_calib.simulation.optics import default_board, preset  # noqa: E402
from lf_mpc_calib.simulation.render import (  # noqa: E402
    render_raw, render_white, sample_pattern)


def reference_rows(camera, board, rvec, tvec, pattern, rows):
    """Baseline: Camera.trace per sample and a plain ray-plane intersection, rows x W pixels."""
    W = camera.sensor.width
    ys, xs = np.mgrid[0:rows, 0:W]
    ys = ys + (camera.sensor.height - rows) // 2
    q = np.column_stack([xs.ravel(), ys.ravel()]).astype(float)
    kl, _ = camera.micro_image_of(q)
    rmat, t = camera.pose_to_physical(rvec, tvec)
    total = np.zeros(len(q))
    for dx, dy, ex, ey in pattern:
        e = np.tile([ex, ey], (len(q), 1)) * 0.5 * camera.mla.pitch
        origin, slope, weight = camera.trace(q + [dx, dy], lens_points=e, kl=kl)
        o = np.column_stack([origin, np.zeros(len(q))]) - t
        d = np.column_stack([slope, np.ones(len(q))])
        ob, db = o @ rmat, d @ rmat
        lam = -ob[:, 2] / db[:, 2]
        p = ob + lam[:, None] * db
        total += weight * board.shade(p[:, 0], p[:, 1])
    return total / len(pattern)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--preset', default='lytro')
    ap.add_argument('--scale', type=float, default=1.0)
    ap.add_argument('--samples', type=int, default=4)
    ap.add_argument('--repeat', type=int, default=2)
    args = ap.parse_args()
    cam = preset(args.preset, scale=args.scale)
    board = default_board(cam)
    centre = np.array([(board.cols - 1) / 2, (board.rows - 1) / 2, 0.0]) * board.square
    rvec = np.array([0.3, -0.2, 0.05])
    from scipy.spatial.transform import Rotation
    r = Rotation.from_rotvec(rvec).as_matrix()
    rv, tv = cam.pose_from_physical(r, np.array([0.0, 0.0, cam.scene_distance]) - r @ centre)
    W, H = cam.sensor.size
    rays = W * H * args.samples
    print(f'{cam.name} {W}x{H} px, {args.samples} rays/pixel, one core '
          f'(OMP_NUM_THREADS={os.environ["OMP_NUM_THREADS"]})')

    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        render_raw(cam, board, rv, tv, samples=args.samples)
        times.append(time.perf_counter() - t0)
    raw_s = min(times)
    t0 = time.perf_counter()
    render_white(cam, samples=args.samples)
    white_s = time.perf_counter() - t0

    rows = max(1, min(H, 65536 // W)) * 8
    pattern = sample_pattern(args.samples)
    t0 = time.perf_counter()
    reference_rows(cam, board, rv, tv, pattern, rows)
    ref_s = (time.perf_counter() - t0) * H / rows
    print(f'raw frame    {raw_s:7.2f} s  ({rays / raw_s / 1e6:6.1f} Mrays/s)  target < 10 s: '
          f'{"met" if raw_s < 10 else "MISSED"}')
    print(f'white image  {white_s:7.2f} s')
    print(f'baseline     {ref_s:7.2f} s  (Camera.trace per sample, {rows} rows scaled to {H})')
    print(f'ratio        {ref_s / raw_s:7.2f} x faster than the baseline')


if __name__ == '__main__':
    main()
