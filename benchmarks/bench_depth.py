"""
Benchmark: metric depth from the light field against ground truth, speed, and StereoSGBM.

Renders (untimed) a Lytro-size frame (preset('lytro'), 3280 x 3280, 8-bit, Gaussian noise --noise)
of fronto-parallel textured strips, one per depth from 0.5 to 2 x the focus distance Z_f, and
its white image; the ground-truth depth of the central view comes from the exact model of the
optics (simulation.scene.depth_truth). On one core (OMP/OpenBLAS threads 1,
cv2.setNumThreads(1)), in one process:

1. times: decode (Decoder.decode: all 9 x 9 views, and the usable ones only as the decode
   node's LiveMeasurer does), LiveMeasurer.measure without corners (decode of the usable views
   + the rectified central view: what the decode node runs before depth), depth
   (DepthEstimator.estimate: prepare / sweep / select), median of --repeat runs, and frames/s
   of LiveMeasurer.measure + depth; each as wall time and as the process's
   CPU time (one thread: what an unloaded core takes; on a shared machine wall time is longer);
2. accuracy per strip (pixels 4 px inside its edges): share with a depth, median relative
   error (signed and absolute), beside the bound sigma_Z / Z = Z * 0.05 px / (|k_i / k_u| *
   baseline) set by the baseline between the extreme used views and 0.05 px of disparity
   noise;
3. the baseline a user would otherwise run: OpenCV StereoSGBM on the two extreme usable
   horizontal views (8-bit, disparities 1/16 px), disparity converted to depth through the same
   model (exact: u_L - u_R = (k_i / k_u)(i_R - i_L)(1/Z + k_3)), same strips, same timing.

Usage: .venv/bin/python benchmarks/bench_depth.py [--scale 1.0] [--repeat 5] [--view-step 1]
"""

import os

os.environ['OMP_NUM_THREADS'] = '1'
os.environ['OPENBLAS_NUM_THREADS'] = '1'

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from lf_mpc_calib.lenslet.decode import Decoder  # noqa: E402
from lf_mpc_calib.measurement.depth import DepthEstimator  # noqa: E402
from lf_mpc_calib.measurement.live import LiveMeasurer  # noqa: E402
from lf_mpc_calib.simulation.optics import preset  # noqa: E402
from lf_mpc_calib.simulation.render import quantize, render_scene, render_white  # noqa: E402
from lf_mpc_calib.simulation.scene import depth_truth, strips_scene  # noqa: E402

FACTORS = (0.5, 0.6, 0.7, 0.85, 1.0, 1.2, 1.4, 1.7, 2.0)


def timed(fn, repeat):
    """(fn's last result, median wall ms, median CPU ms of this process) over repeat runs."""
    out, wall, cpu = None, [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return out, 1e3 * float(np.median(wall)), 1e3 * float(np.median(cpu))


def strip_masks(truth, depths, erode=9):
    kernel = np.ones((erode, erode), np.uint8)
    return [cv2.erode((np.abs(truth - z) < 1e-6 * z).astype(np.uint8), kernel) > 0
            for z in depths]


def sgbm_depth(lf, model, i_left, i_right):
    """Depth (rows, cols) at the left view's pixels from StereoSGBM on views i_left, i_right."""
    left = lf.view(i_left, 0)
    right = lf.view(i_right, 0)
    top = float(np.percentile(lf.views[lf.valid], 99.9))
    to8 = [np.clip(np.rint(v / top * 255), 0, 255).astype(np.uint8) for v in (left, right)]
    block = 5
    sgbm = cv2.StereoSGBM_create(minDisparity=-8, numDisparities=16, blockSize=block,
                                 P1=8 * block * block, P2=32 * block * block,
                                 uniquenessRatio=5, mode=cv2.STEREO_SGBM_MODE_SGBM)
    disp = sgbm.compute(to8[0], to8[1]).astype(np.float32) / 16.0
    bad = disp < -8 + 0.5
    # u_L - u_R = (k_i / k_u) (i_R - i_L) (w + k_3)  (central-view pixel u_c on both)
    w = disp / ((model.k_i / model.k_u) * (i_right - i_left)) - model.k_3
    with np.errstate(divide='ignore'):
        z = np.where(~bad & (w > 0), 1.0 / w, np.nan)
    return z.astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[1])
    ap.add_argument('--scale', type=float, default=1.0, help='sensor crop (1: Lytro size)')
    ap.add_argument('--repeat', type=int, default=5, help='timed runs per stage')
    ap.add_argument('--noise', type=float, default=0.01,
                    help='sensor noise sigma, fraction of full scale (default %(default)s)')
    ap.add_argument('--view-step', type=int, default=1, help='DepthEstimator view_step')
    args = ap.parse_args()
    cv2.setNumThreads(1)

    camera = preset('lytro', scale=args.scale)
    z_f = camera.main_lens.focus_distance
    depths = z_f * np.array(FACTORS)
    scene = strips_scene(camera, depths, seed=7)
    t = time.perf_counter()
    raw = quantize(render_scene(camera, scene, rng=np.random.default_rng(0),
                                noise=args.noise), 8)
    white = quantize(render_white(camera), 8)
    truth = depth_truth(camera, scene)
    print(f'rendered {raw.shape[1]}x{raw.shape[0]} px frame of {len(depths)} strips at '
          f'{FACTORS[0]}-{FACTORS[-1]} x Z_f = {z_f} m in {time.perf_counter() - t:.0f} s '
          f'(untimed); sensor noise sigma {args.noise} of full scale')

    grid = camera.lenslet_grid()
    model = camera.ground_truth_model(grid)
    decoder = Decoder(grid, white=white)
    measurer = LiveMeasurer(model, grid, white=white)
    est = DepthEstimator.for_decoder(model, decoder, depth_range=(0.45 * z_f, 2.3 * z_f),
                                     view_step=args.view_step)
    lf, *t_all = timed(lambda: decoder.decode(raw), args.repeat)
    usable = measurer.decoder(raw.dtype).valid.copy()
    usable[lf.central_index] = True
    lf_usable, *t_decode = timed(lambda: decoder.decode(raw, only=usable), args.repeat)
    _, *t_measure = timed(lambda: measurer.measure(raw, points=False, rays=False),
                          args.repeat)
    dm, *t_depth = timed(lambda: est.estimate(lf_usable), args.repeat)
    if not np.array_equal(dm.depth, est.estimate(lf).depth, equal_nan=True):
        sys.exit('depth from the usable views differs from depth from all views')
    stages = {k: [] for k in dm.timings}
    for _ in range(args.repeat):
        for k, v in est.estimate(lf).timings.items():
            stages[k].append(v)
    total = [a + b for a, b in zip(t_measure, t_depth)]
    rows, cols = lf.view_shape
    print(f'\nviews {rows}x{cols} px; depth from {len(est.views)} usable views '
          f'(view_step {args.view_step}) x {len(est.inverse_depths)} inverse-depth hypotheses '
          f'({est.near:.3f}-{est.far:.3f} m), window {est.window}, baseline '
          f'{est.baseline_views} view steps')

    def row(label, ms, note=''):
        print(f'  {label:40s} {ms[0]:7.1f} / {ms[1]:7.1f} ms{note}')

    print('\nspeed, one core (median of %d): wall ms / CPU ms' % args.repeat)
    row('decode (9x9 views)', t_all)
    row(f'decode ({np.count_nonzero(usable)} usable views, the node\'s)', t_decode)
    row('measure (decode usable + central view)', t_measure)
    row('depth', t_depth, '   (wall: ' + ', '.join(
        f'{k} {1e3 * np.median(v):.1f}' for k, v in stages.items()) + ')')
    for what, k in (('wall', 0), ('CPU', 1)):
        print(f'  measure + depth ({what}): {total[k]:.1f} ms = {1e3 / total[k]:.1f} frames/s '
              f'(target >= 3); depth alone {1e3 / t_depth[k]:.1f} frames/s')

    i_vals = est.views[est.views[:, 1] == 0, 0]
    i_left, i_right = int(i_vals.min()), int(i_vals.max())
    sg, *t_sgbm = timed(lambda: sgbm_depth(lf, model, i_left, i_right), args.repeat)
    print(f'  StereoSGBM on views i = {i_left}, {i_right} (j = 0): {t_sgbm[0]:.1f} / '
          f'{t_sgbm[1]:.1f} ms (ratio depth / SGBM time, CPU {t_depth[1] / t_sgbm[1]:.2f})')

    masks = strip_masks(truth, depths)
    print('\naccuracy per strip: median relative error (signed / |abs|) and share with a '
          'depth')
    print('   Z/Z_f    Z (m)   plane sweep               bound(0.05px)  StereoSGBM')
    at_focus = None
    for f, z, m in zip(FACTORS, depths, masks):
        rel = (dm.depth[m] - z) / z
        ok = np.isfinite(rel)
        rs = (sg[m] - z) / z
        oks = np.isfinite(rs)
        med = np.median(np.abs(rel[ok])) if ok.any() else np.nan
        meds = np.median(np.abs(rs[oks])) if oks.any() else np.nan
        if f == 1.0:
            at_focus = med
        print(f'  {f:5.2f}  {z:6.3f}   {100 * np.median(rel[ok]) if ok.any() else np.nan:+6.2f}'
              f' / {100 * med:5.2f} % ({ok.mean():4.0%})   '
              f'{100 * est.relative_error_bound(z):6.2f} %'
              f'       {100 * np.median(rs[oks]) if oks.any() else np.nan:+7.2f} / '
              f'{100 * meds:6.2f} % ({oks.mean():4.0%})')
    all_m = np.any(masks, axis=0)
    rel_all = np.abs(dm.depth[all_m] - truth[all_m]) / truth[all_m]
    rs_all = np.abs(sg[all_m] - truth[all_m]) / truth[all_m]
    print(f'  all strips: plane sweep median |rel| {100 * np.nanmedian(rel_all):.2f} % '
          f'({np.isfinite(rel_all).mean():.0%} known); SGBM {100 * np.nanmedian(rs_all):.2f} % '
          f'({np.isfinite(rs_all).mean():.0%} known); ratio SGBM / sweep '
          f'{np.nanmedian(rs_all) / np.nanmedian(rel_all):.1f}')
    print(f'\nat the focus distance: median |relative error| {100 * at_focus:.2f} % '
          f'(target <= 1 %)')


if __name__ == '__main__':
    main()
