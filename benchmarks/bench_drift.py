"""
The decode node's calibration-drift watch (:mod:`lf_mpc_calib.measurement.drift`) on simulated
tracked frames: how soon a wrong calibration is named, and how often the right one is.

Per camera (an optics preset, its exact MPC model the truth): a calibration from 6 noisy
captures with the real :func:`lf_mpc_calib.calibration.calibrate` (the right calibration), then
frames of the board at random poses with the same corner noise
(:class:`lf_mpc_calib.simulation.drift_scene.DriftScene`, observation level: no rendering, no
corner detector), each fed to a fresh DriftWatch as the node does (residuals of the pose fitted
with the intrinsics held), with the calibration's RMS and its poses (the node's information:
the calibration's degrees of freedom estimated from its poses). The calibrations watched: the
right one, k_i + 1 % and the principal point + 1 px (u_0 - k_u), or ``--scale`` times these.

Figures printed per camera and calibration, over the seeds:

- ``flagged``: seeds in which the watch named a drift within ``--frames`` frames;
- ``frames to flag``: median and maximum (over those seeds) of the frames fed until it did;
- ``alarms``: onsets of a named drift (drifting after not drifting) over all frames of all
  seeds: false alarms for the right calibration;
- ``resid``: the window's RMS (px) at the end (or when flagged), against ``limit`` (px, the
  window's limit then) and ``cal`` (the calibration's RMS, px);
- ``clean``: RMS (px) of the residuals the calibration leaves on the same kind of frames
  without noise (mean over 5 frames and the seeds): what the pose fitted with its intrinsics
  cannot absorb (the right one's: its own estimation error);
- ``cal sd``: the calibration's own standard deviation of what was changed, in the change's
  unit (k_i: % of k_i; principal point: px, stddev of u_0 / |k_u|), mean over the seeds: a
  change of a few of these cannot be told from the calibration's own error by any test;
- ``targeted``: the same three figures of the targeted test of the intrinsics
  (:mod:`lf_mpc_calib.measurement.drift_score`, with the calibration's covariance), which the
  decode node runs for conventional cameras (``-`` for focused ones).

    PYTHONPATH=. python benchmarks/bench_drift.py [--seeds 3] [--frames 300] [--noise 0.1]
        [--camera lytro focused-galilean] [--scale 1]
"""

import argparse
import time

import numpy as np

from lf_mpc_calib.errors import DegenerateConfigurationError
from lf_mpc_calib.measurement.drift import DriftWatch, frame_residuals
from lf_mpc_calib.measurement.drift_score import ScoreWatch, frame_score
from lf_mpc_calib.simulation.drift_scene import DriftScene, perturbed

CAMERAS = ('lytro', 'focused-keplerian', 'focused-galilean')
CHANGES = ('none', 'k_i', 'principal point')


def watch_run(scene, model, rng, frames):
    """(frames to the first named drift or None, onsets, last DriftSummary) over ``frames``
    of the RMS test, and the same triple of the targeted test (a conventional camera: the
    decode node runs it there, measurement.calibration_watch) or None."""
    cal = scene.calibration
    watch = DriftWatch(cal.rms_reprojection_px, calibration_poses=len(cal.pose_ids))
    names = cal.free_names()
    score = ScoreWatch(names, cal.covariance, cal.rms_reprojection_px) \
        if scene.camera.camera_type == 'conventional' else None
    runs = [[None, 0, False, None], [None, 0, False, None]]   # first, onsets, was, summary
    for n in range(1, frames + 1):
        obs = scene.frame(rng)
        try:
            found = [watch.add(frame_residuals(obs, model))]
            if score is not None:
                found.append(score.add(frame_score(obs, model, names)))
        except DegenerateConfigurationError:   # the node skips such frames too
            continue
        for run, s in zip(runs, found):
            run[1] += int(s.drifting and not run[2])
            run[2] = s.drifting
            if s.drifting and run[0] is None:
                run[0] = n
            if run[0] is None or run[0] == n:
                run[3] = s
    out = [(r[0], r[1], r[3]) for r in runs]
    return out[0], (out[1] if score is not None else None)


def clean_rms(scene, model, rng, n=5):
    """Mean RMS (px) of the residuals ``model`` leaves on noise-free frames of the scene."""
    quiet = DriftScene(scene.camera, scene.truth, scene.board, 0.0, None, scene.image_size)
    out = []
    while len(out) < n:
        try:
            r = frame_residuals(quiet.frame(rng), model)
        except DegenerateConfigurationError:
            continue
        out.append(np.sqrt(np.mean(np.sum(r * r, axis=1))))
    return float(np.mean(out))


def own_stddev(cal, change):
    """The calibration's standard deviation of ``change`` (k_i: %; principal point: px)."""
    m, sd = cal.model, cal.stddev
    if change == 'k_i':
        return 100.0 * sd['k_i'] / abs(m.k_i)
    if change == 'principal point':
        return sd['u_0'] / abs(m.k_u)
    return float('nan')


def run_camera(name, args):
    """Print the rows of one camera."""
    for change in CHANGES:
        hits, alarms, last, clean, sd = [], 0, None, [], []
        targeted = []                                  # (first, onsets) of the targeted test
        for seed in range(args.seeds):
            rng = np.random.default_rng(seed)
            scene = DriftScene.make(name, noise_px=args.noise, rng=rng)
            model = perturbed(scene.calibration.model, change, args.scale)
            (first, onsets, last), score = watch_run(scene, model, rng, args.frames)
            alarms += onsets
            if first is not None:
                hits.append(first)
            if score is not None:
                targeted.append(score[:2])
            clean.append(clean_rms(scene, model, rng))
            sd.append(own_stddev(scene.calibration, change))
        ftf = f'{np.median(hits):6.0f} {max(hits):5d}' if hits else f'{"-":>6} {"-":>5}'
        print(f'{name:18s} {change:16s} {len(hits):3d}/{args.seeds:<3d} {ftf} {alarms:6d} '
              f'{last.residual_px:7.4f} {last.limit_px:7.4f} {last.calibration_px:7.4f} '
              f'{np.mean(clean):8.5f} {np.mean(sd):7.3f}  {_targeted(targeted)}', flush=True)


def _targeted(runs):
    """The targeted test's columns: flagged, frames to flag (median, max), alarms; or '-'."""
    if not runs:
        return '-'
    hits = [f for f, _ in runs if f is not None]
    ftf = f'{np.median(hits):.0f} {max(hits)}' if hits else '- -'
    return f'{len(hits)}/{len(runs)} {ftf} {sum(o for _, o in runs)}'


def main():
    """Run the benchmark (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--seeds', type=int, default=3)
    ap.add_argument('--frames', type=int, default=300)
    ap.add_argument('--noise', type=float, default=0.1, help='corner noise px per coordinate')
    ap.add_argument('--camera', nargs='+', default=list(CAMERAS))
    ap.add_argument('--scale', type=float, default=1.0,
                    help='size of the changes: k_i + scale %%, principal point + scale px')
    args = ap.parse_args()
    print(f'noise {args.noise} px per coordinate, {args.frames} frames, {args.seeds} seeds, '
          f'changes: k_i + {args.scale:g} %, principal point + {args.scale:g} px')
    print(f'{"camera":18s} {"calibration":16s} flagged  frames to flag alarms   resid   limit '
          f'    cal    clean  cal sd  targeted: flagged, frames (median max), alarms')
    print(f'{"":18s} {"":16s} {"":7s} median   max')
    t0 = time.perf_counter()
    for name in args.camera:
        run_camera(name, args)
    print(f'{time.perf_counter() - t0:.0f} s')


if __name__ == '__main__':
    main()
