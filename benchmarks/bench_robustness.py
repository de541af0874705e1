"""
Benchmark: raw images -> calibration on conventional cameras unlike the presets, or a refusal.

A matrix of simulated cameras (the Lytro and Illum designs and variants of them, one factor at
a time: micro-image fill 0.85 / 1.0, lens pitch 8 / 10 / 14 px, lattice rotation +-1.5 deg,
sensor noise 0.5 % / 1 %), 6 poses at 0.6-1.5 x the focus distance, several seeds. Each run
goes through the whole front end (white image -> grid -> views -> corners -> calibration) and
is classed as

- ok: k_i, k_j, k_u, k_v within 1 %, principal point within 0.5 px and every |error| / sigma
  of those six within 3 (the reported uncertainty is honest);
- refused: a stage raised the package's error with its reason (printed);
- flagged: outside the targets, but the run flagged it (its 3-sigma bounds exceed the
  targets, ``run.determination.warnings``) and every |error| / sigma is within 3;
- SILENT FAILURE: anything else (a result outside the targets, given without a word, or an
  error beyond 3 sigma).

Poses: ``--poses capture`` (default) are those of ``simulate`` (a careful user's set,
:func:`~lf_mpc_calib.simulation.dataset.capture_poses`); ``--poses random`` draws depths
uniformly in 0.6-1.5 x focus and tilts up to 30 deg.

The table lists every run; the last line counts the classes. Any silent failure is a defect.

    OMP_NUM_THREADS=1 python3 benchmarks/bench_robustness.py [--seeds 3] [--quick]
        [--lytro-scale 0.5] [--illum-scale 0.35] [--samples 4] [--poses capture|random]
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault('OMP_NUM_THREADS', '1')

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from lf_mpc_calib.calibration.closed_form import aligned_truth  # noqa: E402
from lf_mpc_calib.camera.rotations import rotation_matrix  # noqa: E402
from lf_mpc_calib.errors import LFCalibError  # noqa: E402
from lf_mpc_calib.pipeline.offline import calibrate_raw, load_raw_dataset  # noqa: E402
from lf_mpc_calib.simulation.dataset import (  # noqa: E402
    capture_poses, random_poses, write_dataset)
from lf_mpc_calib.simulation.optics import conventional_camera, default_board  # noqa: E402

SCALES = ('k_i', 'k_j', 'k_u', 'k_v')
MAX_K_PCT = 1.0
MAX_PP_PX = 0.5
MAX_Z = 3.0
DEPTH_RANGE = (0.6, 1.5)


def variants(base, quick):
    """(label, design changes, sensor noise) of the matrix for one base design."""
    pitch = 9.9 if base == 'lytro' else 14.2
    out = [('as designed', {}, 0.0),
           ('fill 0.85', {'fill': 0.85}, 0.0),
           ('fill 1.0 (touching)', {'fill': 1.0}, 0.0)]
    if not quick:
        out += [(f'pitch {p} px', {'lens_pitch_px': p}, 0.0)
                for p in (8.0, 10.0, 14.0) if abs(p - pitch) > 1.0]
        out += [(f'rotation {d:+.1f} deg', {'rotation': np.radians(d)}, 0.0)
                for d in (-1.5, 1.5)]
        out += [(f'noise {n * 100:.1f} %', {}, n) for n in (0.005, 0.01)]
    return out


def judge(run, rvecs, tvecs):
    """(class, figures text) of a finished calibrate_raw run against its ground truth."""
    r = run.result
    kept = [int(p.stem.split('_')[-1]) for p in run.pose_frames]
    truth, _, _ = aligned_truth(run.truth, r.model, rotation_matrix(rvecs[kept]), tvecs[kept])
    err, z = {}, {}
    for name in SCALES:
        est, true = getattr(r.model, name), getattr(truth, name)
        err[name] = 100 * abs(est / true - 1)
        z[name] = abs(est - true) / r.stddev.get(name, np.nan)
    pp_err = np.abs(r.model.principal_point - truth.principal_point)
    for name, k, axis in (('u_0', 'k_u', 0), ('v_0', 'k_v', 1)):
        z[name] = abs(getattr(r.model, name) - getattr(truth, name)) / r.stddev.get(name, np.nan)
    honest = all(np.isfinite(v) and v <= MAX_Z for v in z.values())
    within = max(err.values()) <= MAX_K_PCT and pp_err.max() <= MAX_PP_PX
    flags = run.determination.warnings
    cls = ('ok' if within and honest else 'flagged' if honest and flags
           else 'SILENT FAILURE')
    text = (' '.join(f'{n} {err[n]:.2f}%' for n in SCALES)
            + f' pp {pp_err.max():.2f}px max|e|/s {max(z.values()):.1f}'
            + f' rms {r.rms_reprojection_px:.3f}px poses {len(kept)}'
            + (f' held {",".join(r.held)}' if r.held else '')
            + (f'; flagged: {"; ".join(flags)}' if flags and not within else ''))
    return cls, text


def run_case(base, scale, changes, noise, seed, samples, poses='capture'):
    """Render, calibrate, judge one case; returns (class, text, seconds)."""
    camera = conventional_camera(base, scale=scale, **changes)
    board = default_board(camera)
    rng = np.random.default_rng(seed)
    if poses == 'random':
        rvecs, tvecs = random_poses(camera, board, 6, rng=rng, max_tilt_deg=30.0,
                                    distance_range=DEPTH_RANGE)
    else:
        rvecs, tvecs = capture_poses(camera, board, 6, rng=rng, depth_range=DEPTH_RANGE)
    with tempfile.TemporaryDirectory() as tmp:
        write_dataset(tmp, camera, board, rvecs, tvecs, seed=seed, samples=samples, noise=noise)
        t0 = time.perf_counter()
        try:
            run = calibrate_raw(load_raw_dataset(tmp))
        except LFCalibError as exc:
            return 'refused', f'{type(exc).__name__}: {str(exc)[:160]}', \
                time.perf_counter() - t0
        dt = time.perf_counter() - t0
    cls, text = judge(run, rvecs, tvecs)
    return cls, text, dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument('--seeds', type=int, default=3)
    ap.add_argument('--quick', action='store_true', help='only the fill variants')
    ap.add_argument('--lytro-scale', type=float, default=0.5)
    ap.add_argument('--illum-scale', type=float, default=0.35)
    ap.add_argument('--samples', type=int, default=4, help='rays per raw pixel when rendering')
    ap.add_argument('--base', nargs='*', default=['lytro', 'illum'])
    ap.add_argument('--poses', choices=('capture', 'random'), default='capture',
                    help='capture: simulate\'s default pose set; random: uniform draws')
    args = ap.parse_args()
    cv2.setNumThreads(1)
    counts = {'ok': 0, 'flagged': 0, 'refused': 0, 'SILENT FAILURE': 0}
    print(f'targets: k_i..k_v <= {MAX_K_PCT} %, principal point <= {MAX_PP_PX} px, '
          f'|error|/sigma <= {MAX_Z}; 6 {args.poses} poses at {DEPTH_RANGE[0]}-{DEPTH_RANGE[1]} '
          'x focus')
    print(f'{"camera":<34} {"seed":>4} {"class":<15} {"time":>6}  figures / reason')
    for base in args.base:
        scale = args.lytro_scale if base == 'lytro' else args.illum_scale
        for label, changes, noise in variants(base, args.quick):
            for seed in range(args.seeds):
                cls, text, dt = run_case(base, scale, changes, noise, seed, args.samples,
                                         args.poses)
                counts[cls] += 1
                print(f'{base + " x" + str(scale) + ", " + label:<34} {seed:>4} {cls:<15} '
                      f'{dt:5.1f}s  {text}', flush=True)
    total = sum(counts.values())
    print(f'\n{total} runs: {counts["ok"]} ok, {counts["flagged"]} flagged, '
          f'{counts["refused"]} refused with a reason, {counts["SILENT FAILURE"]} silent failures')


if __name__ == '__main__':
    main()
