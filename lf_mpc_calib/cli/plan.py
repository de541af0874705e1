"""
``lf-mpc-calib plan``: plan the captures that reach a target uncertainty, and render them.

    lf-mpc-calib plan --preset P [--seed S] --target-k-sigma PCT --target-pp-sigma PX
        [--random] [--corner-noise PX] [--scale F] [--samples N] [--max-captures N]
        [--no-verify] -o DIR

From the preset's nominal model, :class:`~lf_mpc_calib.calibration.planning.PosePlanner`
suggests board poses one at a time (A-optimal on sigma / target of k_i..k_v and the principal
point, from the model's Jacobian and the corner noise) until the predicted sigmas meet the
targets; with --random, random poses from the same constraints are added until the same
target is predicted. The poses are rendered into DIR laid out as ``simulate`` writes it
(manifest, white, frames, ground_truth.yaml); DIR must be new or empty, ``--overwrite``
replaces the data set it holds. The last line printed is ``captures: N``.

Then ``plan`` checks its captures (unless --no-verify): it calibrates them as ``calibrate-raw
DIR`` will at its defaults and prints the sigmas that reports against the targets. The
prediction counts the corner noise alone; a focused calibrate-raw quotes the larger of the
residual and the leave-one-pose-out sigma (errors shared within a pose count there), so where
the reported sigmas are over a target the prediction is scaled per quantity to what was
reported, more captures are planned and appended to DIR, and the check is made again (at most
VERIFY_ROUNDS). Exit code 1 (the data set kept) when the target is still not met.

The frames are rendered with :data:`CONVENTIONAL_SAMPLES` rays per pixel (focused cameras:
simulate's FOCUSED_SAMPLES) unless --samples says otherwise: fewer rays bias what calibrate-raw
measures (full-size Lytro at 4 rays: the views' disparity about 0.5 % short on near boards, k_j
0.35 % off the truth, over 2 sigma, at every seed; focused cameras: the aperture's cut of the
micro-images, simulation.dataset.FOCUSED_SAMPLES).
"""

from pathlib import Path
import sys

import numpy as np

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.cli.numbers import integer, real, SEED
from lf_mpc_calib.cli.paths import add_dataset_output_arguments
from lf_mpc_calib.simulation.names import PRESETS

CORNER_NOISE_PX = {'conventional': 0.085, 'focused': 0.12}
"""Default corner noise assumed per camera type (px of a view, conventional; raw px,
focused): the effective noise of the rendered captures, the noise whose independent-noise
prediction equals the sigmas calibrate-raw reports for them (assumed x reported / predicted
sigma), the largest measured by bench_plan_e2e at full size (docs/planning-results.md):
Lytro, on plan's own 5-capture sets (seeds 0-4, 16 rays), 0.029-0.083 px (0.028-0.057 px on
sets of 14-16 captures: fewer captures measure more); focused-Keplerian seeds 0-1 (48
captures, 64 rays) 0.087-0.116 px. The former 0.15 px took 2.9-3.5 x the Lytro's reported
sigmas (14-16 captures where 5 do)."""
MAX_CAPTURES = 60
MIN_CAPTURES = 5
"""Captures planned at least, even where fewer are predicted to reach the target: the sigmas a
calibration of 3-4 rendered captures reports are unsteady (docs/planning-results.md: they
may grow with a capture); measured, full-size Lytro seed 4 at 0.065 px: 3 captures predicted
k 0.290 %, calibrate-raw reported 0.340 % for a 0.3 % target."""
VERIFY_ROUNDS = 3
"""Calibrations of its own captures ``plan`` makes at most to check the target: the planner
predicts sigmas from the corner noise alone, while a focused calibrate-raw quotes the larger of
the residual and the leave-one-pose-out sigma, which counts errors shared within a pose
(measured, focused-Keplerian seed 4, 27 captures: k 0.318 % quoted, 0.159 % predicted)."""
CONVENTIONAL_SAMPLES = 16
"""Default rays per pixel of a conventional camera's rendered captures (focused cameras:
simulate's FOCUSED_SAMPLES). Measured on full-size Lytro, boards at 0.24-0.25 m: the views'
disparity came out 0.5 % short at 4 rays, 0.15 % at 16, 32 and 64; the corners' error within a
corner 0.034 -> 0.016 px RMS."""


def register(subparsers):
    """Add the ``plan`` subcommand."""
    p = subparsers.add_parser(
        'plan', help='plan board poses to a target uncertainty and render them',
        description='Suggest board poses until the predicted sigmas meet the targets, then '
                    'render them into a dataset folder as simulate writes it.')
    p.add_argument('--preset', choices=PRESETS, required=True, help='camera preset')
    p.add_argument('--seed', type=SEED, default=0,
                   help='seed of the candidates and the noise (default: %(default)s)')
    p.add_argument('--target-k-sigma', type=real(0, 100, low_open=True), required=True,
                   metavar='PCT',
                   help='sigma of k_i, k_j, k_u, k_v aimed at, in %% of the value')
    p.add_argument('--target-pp-sigma', type=real(0, 1e3, low_open=True), required=True,
                   metavar='PX',
                   help='sigma of the principal point aimed at, in px')
    p.add_argument('--random', action='store_true',
                   help='random poses from the same constraints instead of planned ones')
    p.add_argument('--corner-noise', type=real(0, 100, low_open=True), default=None, metavar='PX',
                   help='corner noise assumed, px (default: '
                        + ', '.join(f'{v} {k}' for k, v in CORNER_NOISE_PX.items()) + ')')
    p.add_argument('--scale', type=real(0, 1, low_open=True), default=1.0,
                   help='sensor crop factor in (0, 1] (default: %(default)s)')
    p.add_argument('--samples', type=integer(1, 256), default=None,
                   help=f'rays per pixel (default: {CONVENTIONAL_SAMPLES} for a conventional '
                        'camera, as simulate renders a focused one)')
    p.add_argument('--max-captures', type=integer(3, 1000), default=MAX_CAPTURES,
                   help='refuse when the target needs more (default: %(default)s)')
    p.add_argument('--no-verify', action='store_true',
                   help='do not calibrate the rendered captures to check the target (default: '
                        'calibrate them as calibrate-raw does and plan more while its sigmas '
                        'are over the target)')
    p.add_argument('--ideal', action='store_true',
                   help='an ideal camera: the irradiance itself (no shot or read noise, PRNU, '
                        'black level, hot pixels, dust or lens jitter). Default: the '
                        'realistic sensor and lenses of the presets (every lens off its '
                        'lattice point and focal length; docs/simulation.md)')
    add_dataset_output_arguments(p)
    p.set_defaults(func=run)


def ideal_override(args):
    """The preset overrides of ``--ideal`` ({} without it: the realistic sensor and lenses)."""
    from lf_mpc_calib.simulation.optics import IDEAL
    return dict(IDEAL) if getattr(args, 'ideal', False) else {}


def default_samples(camera):
    """Rays per pixel of the captures of ``camera`` (a simulation Camera) when --samples is
    not given: :data:`CONVENTIONAL_SAMPLES`, or simulate's FOCUSED_SAMPLES."""
    from lf_mpc_calib.simulation.dataset import FOCUSED_SAMPLES
    return FOCUSED_SAMPLES if camera.camera_type == 'focused' else CONVENTIONAL_SAMPLES


def run(args):
    """Plan, render; returns the exit code."""
    from lf_mpc_calib.cli.simulate import render_progress
    from lf_mpc_calib.simulation.dataset import write_dataset
    from lf_mpc_calib.simulation.optics import default_board, preset
    from lf_mpc_calib.simulation.planning_scene import simulated_planner
    # the numbers' ranges are checked where they enter (cli/numbers in register)
    from lf_mpc_calib.cli.paths import check_dataset_output, dataset_output
    check_dataset_output(args.output, args.overwrite)       # before planning and rendering
    camera = preset(args.preset, scale=args.scale, **ideal_override(args))
    samples = args.samples or default_samples(camera)
    board = default_board(camera)
    noise = (CORNER_NOISE_PX[camera.camera_type] if args.corner_noise is None
             else args.corner_noise)
    planner = simulated_planner(camera, board, noise_px=noise,
                                target_k_pct=args.target_k_sigma,
                                target_pp_px=args.target_pp_sigma,
                                rng=np.random.default_rng(args.seed))
    rvecs, tvecs = [], []
    add_until_reached(planner, args, rvecs, tvecs, min(MIN_CAPTURES, args.max_captures))
    with dataset_output(args.output, args.overwrite) as folder:
        write_dataset(folder, camera, board, np.array(rvecs), np.array(tvecs),
                      seed=args.seed, samples=samples, progress=render_progress())
    out = Path(args.output)
    print(f'wrote {out} ({len(rvecs)} frames, ground truth in {out / "ground_truth.yaml"})')
    met = True if args.no_verify else verify(args, planner, rvecs, tvecs)
    print(f'captures: {len(rvecs)}')
    return 0 if met else 1


def add_until_reached(planner, args, rvecs, tvecs, at_least):
    """Add suggested (--random: random) poses to ``planner`` and to the lists rvecs, tvecs
    until its prediction meets the targets with at least ``at_least`` captures in all;
    raises InvalidInputError when --max-captures are not enough."""
    from lf_mpc_calib.calibration.planning import SCALES
    from lf_mpc_calib.camera.optical_frame import OpticalFrame
    frame = OpticalFrame.of(planner.model, 'conventional' if planner.constraints.image_size
                            is not None else 'focused')     # PoseConstraints: one or other
    while not planner.reached() or len(rvecs) < at_least:
        if len(rvecs) >= args.max_captures:
            worst = ', '.join(f'{q} {s:.3g}' for q, s in planner.predicted().items())
            raise InvalidInputError(
                f'the target is not predicted within {args.max_captures} captures (sigmas '
                f'then: {worst}); raise --max-captures or relax the targets')
        if args.random:
            r, t, _ = planner.random_poses(1)
            r, t, why = r[0], t[0], 'random pose within the constraints'
        else:
            s = planner.suggest()
            # the planner's (and the data set's) frame is the model's; the words are the
            # optical frame's (a focused camera's board from the main lens)
            r, t, why = s.rotation_vector, s.translation, s.in_frame(frame).why
        planner.add_capture(r, t)
        rvecs.append(r)
        tvecs.append(t)
        sig = planner.predicted()
        print(f'capture {len(rvecs)}: {why}; predicted sigma k '
              f'{max(sig[q] for q in SCALES):.3g} %, principal point '
              f'{max(sig["principal_point_u"], sig["principal_point_v"]):.3g} px',
              file=sys.stderr)


def verify(args, planner, rvecs, tvecs):
    """
    Calibrate the rendered captures as ``calibrate-raw`` will at its defaults and compare the
    sigmas it reports (a focused camera's: the larger of the residual and leave-one-pose-out
    ones) with the targets; while over them, scale the planner's prediction per quantity to
    what was reported (:attr:`PosePlanner.sigma_scale`), plan more captures and append them to
    the data set (at most VERIFY_ROUNDS calibrations, --max-captures captures). Prints each
    check; returns whether the target is met.
    """
    from lf_mpc_calib.calibration.planning import QUANTITIES, SCALES
    from lf_mpc_calib.cli.calibrate_raw import calibrate_folder
    from lf_mpc_calib.errors import LFCalibError
    from lf_mpc_calib.pipeline.capture_planning import reported_sigmas, sigma_scale
    from lf_mpc_calib.cli.simulate import render_progress
    from lf_mpc_calib.simulation.dataset import append_frames
    for check in range(1, VERIFY_ROUNDS + 1):
        print(f'checking: calibrating the {len(rvecs)} captures as calibrate-raw will',
              file=sys.stderr, flush=True)
        try:
            calibration = calibrate_folder(args.output)[0]
        except LFCalibError as e:
            print(f'error: calibrate-raw refuses the {len(rvecs)} captures: {e}; the data set '
                  'is kept', file=sys.stderr)
            return False
        reported = reported_sigmas(calibration.result)
        scale, planner.sigma_scale = planner.sigma_scale, None
        predicted = planner.predicted()
        planner.sigma_scale = scale
        met = all(reported[q] <= planner.target(q) for q in QUANTITIES)
        k = max(reported[q] for q in SCALES), max(reported[q] for q in QUANTITIES[4:])
        pk = max(predicted[q] for q in SCALES), max(predicted[q] for q in QUANTITIES[4:])
        print(f'check {check}: calibrate-raw reports sigma k {k[0]:.3g} %, principal point '
              f'{k[1]:.3g} px for the {len(rvecs)} captures (predicted at {planner.noise_px:g} '
              f'px of corner noise {pk[0]:.3g} %, {pk[1]:.3g} px; targets '
              f'{args.target_k_sigma:g} %, {args.target_pp_sigma:g} px): '
              f'{"met" if met else "over the target"}')
        if met:
            for problem in calibration.determination.refusals:
                print(f'note: calibrate-raw refuses it without --accept-uncertain: {problem} '
                      '(a target looser than its limit)')
            return True
        if check == VERIFY_ROUNDS or len(rvecs) >= args.max_captures:
            print(f'error: the target is not met with {len(rvecs)} captures after {check} '
                  'checks (raise --max-captures or relax the targets); the data set is kept',
                  file=sys.stderr)
            return False
        # each quantity's effective noise over the assumed one: the prediction then equals
        # what was reported for these captures
        noise = planner.noise_px
        planner.sigma_scale = {q: f / noise for q, f in sigma_scale(
            calibration.result, {q: v / noise for q, v in predicted.items()}).items()}
        n = len(rvecs)
        try:
            add_until_reached(planner, args, rvecs, tvecs, n + 1)
        except InvalidInputError as e:
            del rvecs[n:], tvecs[n:]
            print(f'error: {e}; the data set of {n} captures is kept', file=sys.stderr)
            return False
        more = len(rvecs) - n
        print(f'{more} more capture{"s" if more > 1 else ""} planned with the prediction '
              'scaled to what was reported; rendering', file=sys.stderr)
        append_frames(args.output, np.array(rvecs[n:]), np.array(tvecs[n:]),
                      progress=render_progress())
    return False
