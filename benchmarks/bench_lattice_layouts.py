"""
Benchmark: calibrate-raw on a preset and on its column-shifted / portrait twins (issue 26 part 5).

Each twin is the preset's camera with its micro-lens array turned by 90 degrees (column-shifted)
or the whole camera turned by 90 degrees (portrait), turned DEG more (rows:DEG: the preset
turned DEG only); all see board poses drawn alike (in their MPC frames: simulate's default
board and capture, seed --seed; a pose redrawn to keep the board in view may differ).
Printed per camera: grid mean / max centre error vs the optics (px), the calibration's
relative errors of k_i..k_4 (%), principal point error (px), RMS reprojection, whether the
pose set was judged to determine the camera, and the CPU time (process_time) of calibrate-raw
(rendering not counted) with its ratio to the row-major run.

    OMP_NUM_THREADS=1 python3 benchmarks/bench_lattice_layouts.py --preset lytro --scale 1 \
        --poses 6 --turns columns:5 portrait:-5
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault('OMP_NUM_THREADS', '1')

import numpy as np  # noqa: E402

from lf_mpc_calib.lenslet.estimate import estimate_grid  # noqa: E402
from lf_mpc_calib.pipeline.offline import calibrate_raw, load_raw_dataset  # noqa: E402
from lf_mpc_calib.simulation.dataset import (  # noqa: E402
    capture_board, capture_poses, write_dataset)
from lf_mpc_calib.simulation.lattice_turn import turn_lattice  # noqa: E402
from lf_mpc_calib.simulation.names import PRESETS  # noqa: E402
from lf_mpc_calib.simulation.optics import preset  # noqa: E402
from lf_mpc_calib.simulation.render import quantize, render_white  # noqa: E402

NAMES = ('k_i', 'k_j', 'k_u', 'k_v', 'k_3', 'k_4')


def _signed(model, truth):
    """The model with the global signs of (k_i, k_u, u_0), (k_j, k_v, v_0) matched to truth."""
    sx = np.sign(model.k_i * truth.k_i)
    sy = np.sign(model.k_j * truth.k_j)
    return model.replace(k_i=sx * model.k_i, k_u=sx * model.k_u, u_0=sx * model.u_0,
                         k_j=sy * model.k_j, k_v=sy * model.k_v, v_0=sy * model.v_0)


def _grid_error(camera):
    """(mean, max) px centre error of the grid estimated from a 1-ray white vs the truth."""
    truth = camera.lenslet_grid()
    grid = estimate_grid(quantize(render_white(camera, samples=1), 8))
    xy = truth.centres()
    half = 0.5 * truth.pitch
    whole = ((xy >= half - 0.5) & (xy <= np.array(truth.image_size) - 0.5 - half)).all(axis=1)
    if grid.shape != truth.shape or grid.hex_parity != truth.hex_parity:
        return float('nan'), float('nan')
    d = np.hypot(*(grid.centres()[whole] - xy[whole]).T)
    return float(d.mean()), float(d.max())


def _run(name, camera, board, poses, seed, samples):
    rv, tv = poses
    with tempfile.TemporaryDirectory() as root:
        write_dataset(root, camera, board, rv, tv, seed=seed, samples=samples)
        t0 = time.process_time()
        run = calibrate_raw(load_raw_dataset(root), accept_uncertain=True)
        cpu = time.process_time() - t0
    m, t = _signed(run.result.model, run.truth), run.truth
    rel = {n: 100 * abs(getattr(m, n) / getattr(t, n) - 1.0) for n in NAMES}
    pp = np.abs(m.principal_point - t.principal_point)
    g_mean, g_max = _grid_error(camera)
    return dict(name=name, rel=rel, pp=pp, rms=run.result.rms_reprojection_px, cpu=cpu,
                determined=run.determination.determined, grid=(g_mean, g_max),
                refusals=run.determination.refusals)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--preset', default='lytro', choices=PRESETS)
    ap.add_argument('--scale', type=float, default=1.0)
    ap.add_argument('--poses', type=int, default=6)
    ap.add_argument('--samples', type=int, default=4,
                    help='rays per pixel (simulate renders focused presets with 64)')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--turns', nargs='*', default=['columns:5', 'portrait:-5'],
                    help='twins as LAYOUT:DEG (LAYOUT rows, columns or portrait)')
    args = ap.parse_args()
    base = preset(args.preset, scale=args.scale)
    cameras = [('rows', base)]
    for spec in args.turns:
        kind, deg = spec.split(':')
        kw = dict(portrait=True) if kind == 'portrait' else dict(layout=kind)
        cameras.append((spec, turn_lattice(base, degrees=float(deg), **kw)))
    results = []
    for name, camera in cameras:
        board = capture_board(camera)
        poses = capture_poses(camera, board, args.poses, rng=np.random.default_rng(args.seed))
        results.append(_run(name, camera, board, poses, args.seed, args.samples))
        r = results[-1]
        print(f'{r["name"]:>12}: grid {r["grid"][0]:.4f} / {r["grid"][1]:.4f} px; '
              + ', '.join(f'{n} {v:.3f} %' for n, v in r['rel'].items())
              + f'; pp {r["pp"][0]:.3f} / {r["pp"][1]:.3f} px; rms {r["rms"]:.3f} px; '
              f'determined {r["determined"]} {r["refusals"][:1]}; calibrate-raw CPU '
              f'{r["cpu"]:.1f} s (x{r["cpu"] / results[0]["cpu"]:.2f} of rows)', flush=True)


if __name__ == '__main__':
    main()
