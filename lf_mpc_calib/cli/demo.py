"""
``lf-mpc-calib demo``: a whole calibration session on the simulated camera, end to end.

    lf-mpc-calib demo [--poses 6] [--preset lytro --scale 0.5] [-o OUTPUT_DIR]
    lf-mpc-calib demo --ros [--preset lytro|focused-keplerian|...] [--poses 6] [--output-dir DIR]
                      [--hand-eye [eye-to-hand]]

With ``--ros`` the same session runs through the ROS 2 nodes (simulated camera, calibration
node, decode node) in one process: :mod:`lf_mpc_calib.ros.demo`.

Renders a white image and raw frames of a checkerboard at a careful user's poses (the optics-based
simulator), estimates the lenslet grid, decodes every frame, finds the corners across views,
calibrates, and prints the recovered parameters against the optics' ground truth; then renders
one more frame at a new pose, measures the board corners in 3-D with the calibrated model
(triangulation from all views) and prints their error against the true corner positions.
"""

import sys
import time
from pathlib import Path

import numpy as np

from lf_mpc_calib.cli.numbers import integer, real, SEED

DEMO_SCALE = 0.5
"""Sensor crop of the offline demo (``--scale``'s default without --ros)."""


def register(subparsers):
    """Add the ``demo`` subcommand."""
    p = subparsers.add_parser(
        'demo', help='simulate a camera, calibrate it from raw frames, measure in 3-D',
        description='End-to-end session on the simulated camera: render, decode, detect, '
                    'calibrate, compare with ground truth, then measure a new frame in 3-D.')
    p.add_argument('--poses', type=integer(1, 1000), default=None,
                   help="board poses (default: 6; with --ros and a focused preset, as many "
                        "as simulate's focused capture)")
    p.add_argument('--preset', default='lytro', help='camera preset (default: %(default)s)')
    p.add_argument('--scale', type=real(0, 1, low_open=True), default=None,
                   help='sensor crop factor (default: 0.5; with --ros and a focused preset '
                        '0.7, where the principal point is pinned to 1 px; with --ros --plan '
                        '--hand-eye 1.0, where the mount error is within 0.02 deg at 95 %% '
                        'in about 4 captures)')
    p.add_argument('--seed', type=SEED, default=1, help='random seed (default: %(default)s)')
    p.add_argument('--ros', action='store_true',
                   help='run the session through the ROS 2 nodes (lf_sim_camera, '
                        'lf_calibration, lf_decoder) and their services')
    p.add_argument('--hand-eye', nargs='?', const='eye-in-hand', default=None,
                   choices=('eye-in-hand', 'eye-to-hand'),
                   help='with --ros: the camera on a simulated robot arm (eye-in-hand, the '
                        'default with the flag) or watching the board in its gripper '
                        '(eye-to-hand); solves the mount and measures in the base frame')
    p.add_argument('--lens-types', type=integer(1, 16), default=None, metavar='T',
                   help='micro-lens types told apart from the frames (default: the preset\'s, '
                        '3 for focused-multifocus; 1: one type)')
    p.add_argument('--timeout', type=real(0, 1e6, low_open=True), default=300.0,
                   help='with --ros: seconds to wait for a service answer (default: '
                        '%(default)s)')
    p.add_argument('--live', nargs='?', type=real(0, 3600, low_open=True), const=10.0,
                   default=None,
                   metavar='SECONDS',
                   help='with --ros: after the calibration, the board drifting at camera rate '
                        "(15 Hz) for SECONDS (10 with the flag): the decode node's rates and "
                        '3-D error against the truth of every frame')
    p.add_argument('--ideal', action='store_true',
                   help='an ideal camera: the irradiance itself (no shot or read noise, PRNU, '
                        'black level, hot pixels, dust or lens jitter). Default: the '
                        'realistic sensor and lenses of the presets (every lens off its '
                        'lattice point and focal length; docs/simulation.md)')
    from lf_mpc_calib.ros.demo_plan import add_plan_arguments
    add_plan_arguments(p)
    p.add_argument('-o', '--output', '--output-dir', default=None, metavar='DIR',
                   help='where the data set, calibration file and report go '
                        '(default: a temporary folder)')
    p.set_defaults(func=run)


def run(args):
    """Run the session; returns the exit code."""
    _check_arguments(args)
    if getattr(args, 'ros', False):
        from lf_mpc_calib.errors import UsageError
        from lf_mpc_calib.ros import demo
        from lf_mpc_calib.simulation.names import PRESETS
        if args.preset not in PRESETS:
            raise UsageError(f'unknown --preset {args.preset!r}; expected one of '
                             f'{", ".join(PRESETS)}')
        args.output_dir = args.output
        return demo.run(args)
    return _offline_session(args)


def _check_arguments(args):
    """UsageError (InvalidInputError for --lens-types) for options that do not go together;
    sets --poses' offline default."""
    from lf_mpc_calib.errors import UsageError
    if getattr(args, 'live', None) is not None and not getattr(args, 'ros', False):
        raise UsageError('--live needs --ros (the decode node measures the stream)')
    if getattr(args, 'live', None) is not None and not 0 < args.live <= 3600:
        raise UsageError(f'--live expects seconds > 0 and at most 3600, got {args.live}')
    from lf_mpc_calib.cli.simulate import MAX_POSES
    if args.poses is None and not getattr(args, 'ros', False):
        args.poses = 6
    if args.poses is not None and not 1 <= args.poses <= MAX_POSES:
        raise UsageError(f'--poses must be a whole number from 1 to {MAX_POSES}, got '
                         f'{args.poses}')
    if getattr(args, 'hand_eye', None) and not getattr(args, 'ros', False):
        raise UsageError('--hand-eye needs --ros (the arm is simulated through TF)')
    if getattr(args, 'plan', False) and not getattr(args, 'ros', False):
        raise UsageError('--plan needs --ros (the calibration node suggests the poses)')
    _check_preset_lens_types(args)


def _offline_session(args):
    """The demo without ROS: render, calibrate, compare, measure a new frame; returns 0."""
    import tempfile

    from lf_mpc_calib.cli.plan import ideal_override
    from lf_mpc_calib.pipeline.offline import load_raw_dataset, write_outputs
    from lf_mpc_calib.simulation.dataset import capture_poses, write_dataset
    from lf_mpc_calib.simulation.optics import default_board, preset

    start = time.perf_counter()
    out = Path(args.output) if args.output else Path(tempfile.mkdtemp(prefix='lf_demo_'))
    camera = preset(args.preset, scale=DEMO_SCALE if args.scale is None else args.scale,
                    **ideal_override(args))
    board = default_board(camera)
    rng = np.random.default_rng(args.seed)
    # a careful user's poses (both sides of the focus distance, tilts about both axes), then
    # one more frame to measure
    rvecs, tvecs = capture_poses(camera, board, args.poses + 1, rng=rng)
    print(f'simulated camera: {camera.name} {camera.sensor.size[0]}x{camera.sensor.size[1]} '
          f'px, board {board.cols}x{board.rows} x {board.square * 1e3:.1f} mm, '
          f'{args.poses} calibration poses -> {out}')

    def rendered(done, total):
        print(f'  rendered {"white image" if done == 0 else f"frame {done}/{total}"} '
              f'({time.perf_counter() - start:.1f} s)')

    write_dataset(out / 'dataset', camera, board, rvecs[:-1], tvecs[:-1], seed=args.seed,
                  progress=rendered)
    dataset = load_raw_dataset(out / 'dataset')
    calib = _calibrated(dataset, camera, args.lens_types)
    write_outputs(calib, out / 'calibration.yaml', report_dir=out / 'report', camera='lf_camera')
    _print_calibration(calib, camera)
    _print_new_frame(camera, board, rvecs[-1:], tvecs[-1:], rng, dataset, calib)
    print(f'\ncalibration file {out / "calibration.yaml"}, report {out / "report"}; '
          f'{time.perf_counter() - start:.1f} s in all')
    sys.stdout.flush()
    return 0


def _calibrated(dataset, camera, lens_types):
    """The pipeline's run on the demo's data set, printing each frame's line; an uncertain
    result kept (a demo shows its result and says so). Focused: corners in the micro-images
    (pipeline.focused_raw), with ``lens_types`` (None: the preset's) told from the frames."""
    from lf_mpc_calib.pipeline.offline import calibrate_raw

    def detected(k, total, path, message):
        print(f'  {path.name if path else "all"}: {message}')

    if camera.camera_type != 'focused':
        return calibrate_raw(dataset, progress=detected, accept_uncertain=True)
    from lf_mpc_calib.pipeline.focused_raw import calibrate_focused_raw
    n_types = camera.mla.n_types if lens_types is None else lens_types
    return calibrate_focused_raw(dataset, progress=detected, accept_uncertain=True,
                                 n_types=n_types)   # told from the frames, as for a user


def _print_calibration(calib, camera):
    """Print the calibration against the truth: RMS, the parameter table, the principal
    point, the told lens types, what was held and the acceptance verdict."""
    from lf_mpc_calib.report.calibration import truth_in_calibration_frame, truth_table
    result = calib.result
    truth = truth_in_calibration_frame(calib.truth, result.model)   # as the report does
    print(f'\ncalibrated {len(calib.pose_frames)} poses, {len(calib.observations)} rays: '
          f'RMS {result.rms_reprojection_px:.3f} px, {result.rms_ray_reprojection_mm:.4f} mm '
          f'({result.iterations} iterations, {result.message})')
    for line in truth_table(result.model, truth, result.stddev, result.held):
        print(line)
    pp_est, pp_true = result.model.principal_point, truth.principal_point
    print(f'principal point {pp_est.round(3)} px, truth {pp_true.round(3)} px')
    if camera.camera_type == 'focused' and calib.lens_type_rule is not None:
        from lf_mpc_calib.lenslet.nearest import MicroImageLattice   # the told types against
        from lf_mpc_calib.measurement.focused import micro_image_types   # the simulator's
        from lf_mpc_calib.simulation.focused_raw import type_agreement
        told = micro_image_types(calib.grid, calib.lens_type_rule)
        _, right = type_agreement(camera, MicroImageLattice(calib.grid).centres, told)
        print(f'lens types ({calib.lens_type_source}): {100 * right:.1f} % of {len(told)} '
              'micro-images of their true type (up to the labels\' order)')
    for name, reason in result.held.items():
        print(f'  {name}: {reason}')
    verdict = calib.acceptance      # the rule of calibrate-raw and the calibration node
    refused = ('' if verdict.accepted else ': calibrate-raw on this data set refuses it (it '
               'writes the file only with --accept-uncertain), the calibration node says so; '
               'add poses')
    print(f'acceptance: {verdict.summary()}{refused}')
    for warning in verdict.warnings:
        print(f'WARNING: {warning}')


def _print_new_frame(camera, board, rvec, tvec, rng, dataset, calib):
    """Render one more frame at the pose rvec, tvec (1, 3) (its noise from ``rng``), measure
    the board's corners in 3-D with the calibrated model and print their error against the
    truth and against the floor of the true model on the same detections."""
    from lf_mpc_calib.calibration.closed_form import aligned_truth
    from lf_mpc_calib.camera.optical_frame import OpticalFrame
    from lf_mpc_calib.camera.rotations import rotation_matrix
    from lf_mpc_calib.measurement.accuracy import corner_accuracy
    from lf_mpc_calib.simulation.render import render_raw
    result = calib.result
    raw = render_raw(camera, board, rvec[0], tvec[0], rng=rng).astype(np.float32)
    detection = _new_frame_detection(camera, raw, board, dataset, calib)
    truth_new, rot, trans = aligned_truth(calib.truth, result.model, rotation_matrix(rvec),
                                          tvec)
    frame = OpticalFrame.of(result.model, camera.camera_type)   # what the decode node gives
    acc = corner_accuracy(detection.observations, result.model, truth_new,
                          board.points() @ rot[0].T + trans[0], origin=frame.origin)
    expected = frame.points(board.points()[acc.ids] @ rot[0].T + trans[0])
    measured = frame.points(acc.measured)
    print(f'\nnew frame: {len(acc.ids)} corners measured in 3-D from '
          f'{len(detection.observations)} rays, board at {acc.distance_m * 1e3:.0f} mm')
    for k in range(min(4, len(acc.ids))):
        print(f'  corner {acc.ids[k]:3d}: measured {np.round(measured[k] * 1e3, 2)} mm, '
              f'truth {np.round(expected[k] * 1e3, 2)} mm, error {acc.error_mm[k]:.3f} mm')
    print(f'3-D error: mean {acc.error_mm.mean():.3f} mm, max {acc.error_mm.max():.3f} mm '
          f'({acc.error_mm.mean() / acc.distance_m / 10:.3f} % of the distance)')
    print(f'floor (true model, same detections): mean {acc.floor_mm.mean():.3f} mm, max '
          f'{acc.floor_mm.max():.3f} mm; calibrated / floor = {acc.ratio:.2f}')


def _new_frame_detection(camera, raw, board, dataset, calib):
    """The board's Detection in the new frame ``raw``, as the calibration found it: in the
    micro-images (focused, with the told lens types) or the decoded views."""
    if camera.camera_type == 'focused':
        from lf_mpc_calib.measurement.focused import micro_image_types
        from lf_mpc_calib.pipeline.focused_raw import focused_detector
        types = None if calib.lens_type_rule is None else \
            micro_image_types(calib.grid, calib.lens_type_rule)
        return _focused_detection(focused_detector(dataset, calib.grid, lens_types=types),
                                  raw, board, calib.result)
    from lf_mpc_calib.features.corners import detect_corners
    from lf_mpc_calib.io.images import read_float_image
    from lf_mpc_calib.lenslet.white_image import make_decoder
    _, decoder = make_decoder(read_float_image(dataset.white), grid=calib.grid)
    return detect_corners(decoder.decode(raw), board, pose=0)


def _check_preset_lens_types(args):
    """InvalidInputError for --lens-types other than 1 with a conventional preset."""
    from lf_mpc_calib.simulation.names import PRESETS
    if getattr(args, 'lens_types', None) in (None, 1) or args.preset not in PRESETS:
        return          # an unknown preset is named by the code that builds it
    from lf_mpc_calib.cli.calibrate_raw import check_lens_types
    from lf_mpc_calib.simulation.optics import preset
    kind = preset(args.preset).camera_type
    check_lens_types(args.lens_types, kind, f'preset {args.preset}')


def _focused_detection(detector, raw, board, result):
    """A focused camera's Detection of ``raw`` with (u, v) corrected by the lens-type terms."""
    import dataclasses
    from lf_mpc_calib.camera.observations import Observations
    det = detector.detect(raw, board, pose=0)
    obs = det.observations
    if result.lens_types is None or obs.lens_type is None:
        return det
    ijuv = result.lens_types.corrected_ijuv(obs.ijuv, obs.lens_type)
    return dataclasses.replace(det, observations=Observations(obs.pose, obs.point, obs.board,
                                                              ijuv, obs.lens_type))
