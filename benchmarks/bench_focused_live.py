"""
Live focused decode: today's code against the cached fast path, per stage, on the same frames.

Renders a white and a short sequence of frames of the focused-keplerian preset (a board moving
slowly in depth and sideways, as on an arm), then times per frame, one core, CPU time
(time.process_time; wall time beside it):
- today:  the detector's normalise, estimate_w and render every frame (what
  FocusedMeasurer.measure did before focused_live);
- new:    measurement.focused_live.LiveCenterRenderer (cached maps, w re-estimated when due);
and prints per-stage times, frames/s, the ratio and the accuracy of the new image against
today's (max / mean |difference| in normalised units, w difference).
Not yet: the 4080 x 3068 (R12) size.

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_focused_live.py --quick

Only ~/center is on the fast path so far; ~/points and ~/depth are today's (timed with --full).
"""

import argparse
import time

import cv2
import numpy as np

from lf_mpc_calib.features.micro_image_corners import MicroImageCornerDetector
from lf_mpc_calib.measurement.focused_live import LiveCenterRenderer
from lf_mpc_calib.simulation.focused_raw import board_pose
from lf_mpc_calib.simulation.optics import Checkerboard, preset
from lf_mpc_calib.simulation.render import render_raw, render_white


def frames(cam, n, samples):
    """A white and n raw frames of a board drifting in depth and sideways."""
    board = Checkerboard(12, 8, 0.7 * cam.field_of_view(cam.scene_distance)[1] / 9)
    white = render_white(cam, samples=samples)
    raws = []
    for k in range(n):
        d = (1.25 + 0.002 * k) * cam.scene_distance
        rv, tv = board_pose(cam, board, d, (10.0, -8.0, 3.0), offset=(0.0005 * k, 0.0))
        raws.append(render_raw(cam, board, rv, tv, samples=samples, noise=0.0))
    return white, raws, board


def todays_center(det, raw):
    """Today's ~/center (FocusedMeasurer.measure before focused_live): every step per frame."""
    norm = det.normalise(raw)
    return np.clip(det.render(norm, det.estimate_w(norm))[0], 0.0, 1.0)


def timed(fn, raws):
    """(mean CPU s, mean wall s, outputs) of fn over the frames."""
    out, c0, t0 = [], time.process_time(), time.perf_counter()
    for raw in raws:
        out.append(fn(raw))
    n = len(raws)
    return (time.process_time() - c0) / n, (time.perf_counter() - t0) / n, out


def run(scale, n, samples):
    cam = preset('focused-keplerian', scale=scale)
    white, raws, _ = frames(cam, n, samples)
    det = MicroImageCornerDetector(white)
    raws32 = [r.astype(np.float32) for r in raws]
    c_old, w_old, ref = timed(lambda r: todays_center(det, r), raws32[:max(3, n // 2)])
    fast = LiveCenterRenderer(det)
    fast.render(raws32[0])          # the first frame builds the maps (timed apart)
    c_new, w_new, new = timed(fast.render, raws32)
    diffs, same = [], 0
    for old, (img, _) in zip(ref, new):
        if old.shape == img.shape:          # the same step 1 / |w|
            same += 1
            diffs.append(np.abs(old - img))
    h, wd = raws[0].shape
    print(f'{wd}x{h}  ~/center  today {1e3 * c_old:8.1f} ms CPU ({1e3 * w_old:7.1f} wall)  '
          f'new {1e3 * c_new:6.1f} ms CPU ({1e3 * w_new:6.1f} wall)  '
          f'{1 / c_new:6.1f} fps  ratio {c_old / c_new:5.1f}x  '
          f'w searches {fast.w_estimates}, walks {fast.w_refines} in {n + 1} frames')
    if diffs:
        print(f'   accuracy vs today ({same}/{len(ref)} frames at the same w): '
              f'max |d| {max(d.max() for d in diffs):.4f}, '
              f'mean |d| {np.mean([d.mean() for d in diffs]):.5f} (normalised units)')
    norm = fast.normalise(raws32[-1])
    mx, my = fast.maps(fast.w)
    stages = {'normalise': lambda: fast.normalise(raws32[-1]),
              'remap': lambda: cv2.remap(norm, mx, my, cv2.INTER_LINEAR),
              'w search (first frame)': lambda: det.estimate_w(norm),
              'w walk (when due)': lambda: det.refine_w(norm, fast.w)}
    print('   new stages, ms CPU: ' + ', '.join(
        f'{k} {1e3 * timed(lambda _: f(), [None] * 3)[0]:.1f}' for k, f in stages.items()))
    return wd, h, 1 / c_new


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--quick', action='store_true', help='preset size only, few frames')
    ap.add_argument('--frames', type=int, default=None)
    ap.add_argument('--samples', type=int, default=4, help='rays per pixel of the renders')
    args = ap.parse_args()
    n = args.frames or (12 if args.quick else 30)
    wd, h, fps = run(1.0, n, args.samples)
    print(f'focused live {wd}x{h}: center {fps:.1f} fps, points n/a fps, depth n/a fps '
          f'(one core, CPU time; points and depth not on the fast path yet)')


if __name__ == '__main__':
    main()
