"""
``lf-mpc-calib calibrate-raw``: raw checkerboard frames + a white image -> calibration file.

    lf-mpc-calib calibrate-raw DATASET_DIR -o calibration.yaml [--report DIR]
        [--board COLSxROWS --square M] [--white W] [--views 7x7] [--bayer RGGB] [--grid FILE]
    lf-mpc-calib calibrate-raw BAG_DIR_OR_FILE --topic /camera/image_raw --board COLSxROWS
        --square M [--white W_FILE_OR_TOPIC] ...

``--robot-poses FILE`` (CSV ``frame,tx,ty,tz,rx,ry,rz``, base -> tool, or YAML; see
:mod:`lf_mpc_calib.io.robot_poses`) also solves the hand-eye calibration
(:mod:`lf_mpc_calib.calibration.hand_eye`), refining the intrinsics jointly with the mount, and
writes that joint calibration with its ``hand_eye`` key (the camera-only one stays in the
report); a folder written by ``lf-mpc-calib simulate --arm ...`` carries its robot poses in its
manifest.

A folder written by ``lf-mpc-calib simulate`` needs no options (its manifest names the board
and the white image). Any other folder of raw PNG/TIFF frames needs the board, and the white
image if it is not the folder's one ``white.*`` file. A rosbag2 (folder, .db3 or .mcap; needs
the ``rosbags`` package) gives its frames from the image topic. ``--grid`` decodes with the
lenslet grid of a file written by ``lf-mpc-calib grid`` or of a calibration file instead of
estimating it from the white image. Lytro raw frames (.lfr, .lfp, .raw) give their Bayer
pattern and camera metadata (kept in the calibration file's ``camera_metadata``), and their
``--white`` may be a folder of the camera's white images: the one of the frames' serial with
the nearest zoom, then focus step is used. The observation table is written beside the
calibration file (``<name>_observations.csv``).
"""

from pathlib import Path
import re
import sys

import numpy as np

from lf_mpc_calib.camera.board import Checkerboard
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.camera.model import PARAMETER_NAMES
from lf_mpc_calib.cli.numbers import integer, real


def register(subparsers):
    """Add the ``calibrate-raw`` subcommand."""
    p = subparsers.add_parser(
        'calibrate-raw', help='calibrate from raw checkerboard frames and a white image',
        description='Decode raw light-field frames into sub-aperture views, find the '
                    'checkerboard corners in every view, calibrate the MPC model and write '
                    'the calibration file, the observation table and (optionally) a report.')
    p.add_argument('dataset', help='folder of raw frames (with manifest.yaml from simulate, '
                                   'or any PNG/TIFF or Lytro .lfr/.lfp/.raw frames with '
                                   '--board/--square), or a rosbag2 (folder, .db3 or .mcap) '
                                   'with --topic')
    p.add_argument('-o', '--output', default='calibration.yaml',
                   help='calibration file to write (default: %(default)s)')
    p.add_argument('--report', metavar='DIR', default=None,
                   help='write the report (summary, plots, detections) into DIR')
    p.add_argument('--board', metavar='COLSxROWS', default=None,
                   help='inner corners of the checkerboard, e.g. 8x6')
    p.add_argument('--square', type=real(0, 10, low_open=True), default=None, metavar='M',
                   help='square size in metres (with --board)')
    p.add_argument('--first-square', choices=('black', 'white'), default='black',
                   help='colour of the outer square before the first inner corner '
                        '(default: %(default)s)')
    from lf_mpc_calib.cli.simulate import add_board_type_arguments
    add_board_type_arguments(p)
    p.add_argument('--min-corners', type=integer(4, 100000), default=6, metavar='N',
                   help='fewest ChArUco corners a pose counts with (on two rows and two '
                        'columns; default: %(default)s)')
    p.add_argument('--white', default=None, metavar='FILE',
                   help='white image; for Lytro frames also a folder of Lytro white images; '
                        'for a rosbag2 a file or a topic of the bag (default: its white_image '
                        'topic, else white.* beside it)')
    p.add_argument('--dark', default=None, metavar='FILE',
                   help='dark frame (same size and bit depth, no light), subtracted from the '
                        'white and every frame first (default: the manifest\'s dark, or the '
                        'one dark.* in a folder without manifest)')
    p.add_argument('--topic', default=None, metavar='TOPIC',
                   help='rosbag2 input: the sensor_msgs/Image topic of the raw frames')
    p.add_argument('--grid', default=None, metavar='FILE',
                   help='decode with the lenslet grid in FILE (from `lf-mpc-calib grid` or a '
                        'calibration file) instead of estimating it from the white image')
    p.add_argument('--views', default=None, metavar='NIxNJ',
                   help='sub-aperture views to use, e.g. 7x7 (default: the decoder\'s)')
    p.add_argument('--bayer', default=None, metavar='PATTERN',
                   help='Bayer pattern of the raw frames (e.g. RGGB); default: mono or '
                        'from the manifest')
    p.add_argument('--camera-type', choices=('auto', 'conventional', 'focused'), default='auto',
                   help='conventional (plenoptic 1.0: views decoded from the grid) or focused '
                        '(plenoptic 2.0: corners in the micro-images); auto tells them from the '
                        'micro-image size and what the frames show inside micro-images, and a '
                        'type the data contradicts is refused (default: %(default)s)')
    p.add_argument('--lens-types', type=_lens_types, default=None, metavar='T',
                   help='focused multi-focus cameras: T interleaved micro-lens types, told '
                        'apart from the corners\' sharpness and detections and given their own '
                        'terms; \'simulated\': the true types of a data set written by simulate '
                        '(ground truth, not what a real camera gives) (default: the '
                        'lens_types a calibration node saved in the manifest, else 1)')
    p.add_argument('--min-poses', type=integer(1, 10000), default=3,
                   help='fewest poses with a detected board to calibrate (default: %(default)s)')
    add_model_arguments(p)
    p.add_argument('--accept-uncertain', action='store_true',
                   help='write the calibration even when the poses leave the intrinsics more '
                        'uncertain than 1 %% (k) or 0.5 px (principal point) 1-sigma '
                        '(default: refuse with the poses to add)')
    add_hand_eye_arguments(p, 'a frame file name (or stem, or 0-based index in the data set); '
                              'default: the robot_poses of the dataset\'s manifest.yaml')
    p.add_argument('--quiet', action='store_true', help='no progress per image')
    p.set_defaults(func=run)


def add_model_arguments(p, fix_help='comma-separated parameters to hold fixed'):
    """The options of which model parameters are estimated, shared with ``calibrate``."""
    p.add_argument('--no-distortion', action='store_true',
                   help='estimate the six intrinsics only (k_1..k_4 fixed at 0)')
    p.add_argument('--all-distortion', action='store_true',
                   help='keep k_1..k_4 free even where the data do not determine them '
                        '(default: each is held at 0 unless it exceeds 3 sigma)')
    p.add_argument('--fix', default='', metavar='NAMES', help=fix_help)
    p.add_argument('--pose-jackknife', choices=('auto', 'on', 'off'), default='auto',
                   help='refit once without each pose and report the spread of the intrinsics '
                        'beside their residual sigmas (errors shared within a pose show only '
                        'there); auto: focused cameras with >= 4 poses (default: %(default)s)')


def distortion_option(args):
    """The ``distortion`` argument of ``calibrate`` from the command line."""
    if args.no_distortion:
        return False
    return True if getattr(args, 'all_distortion', False) else 'auto'


def pose_jackknife_of(args, obs, result, camera_type, done=None):
    """The leave-one-pose-out refits (a PoseJackknife) that ``--pose-jackknife`` asks for;
    None when off, or for 'auto' on a conventional camera or < 4 poses. ``done``: refits
    already made with the default loss scale (a focused run's), reused."""
    from lf_mpc_calib.calibration.pose_jackknife import MIN_POSES, pose_jackknife
    mode = getattr(args, 'pose_jackknife', 'auto')
    n = len(obs.pose_ids)
    if mode == 'off' or (mode == 'auto' and (camera_type != 'focused' or n < MIN_POSES)):
        return None
    if done is not None and getattr(args, 'f_scale', 1.0) == 1.0:
        return done
    if n < MIN_POSES:
        print(f'warning: --pose-jackknife needs >= {MIN_POSES} poses, got {n}: skipped',
              file=sys.stderr)
        return None
    return pose_jackknife(obs, result, loss=result.loss, f_scale=getattr(args, 'f_scale', 1.0))


def print_held(result, out):
    """Print the distortion terms held at 0 because the data did not determine them."""
    for name, reason in result.held.items():
        print(f'  {name}: {reason}', file=out)


def add_hand_eye_arguments(p, frame_help):
    """The hand-eye options shared by ``calibrate`` and ``calibrate-raw``."""
    p.add_argument('--robot-poses', metavar='FILE', default=None,
                   help='robot poses base -> tool per frame (CSV frame,tx,ty,tz,rx,ry,rz in '
                        'metres and radians, or YAML): also solve the hand-eye calibration and '
                        'write its hand_eye key; frame: ' + frame_help)
    p.add_argument('--setup', choices=('eye-in-hand', 'eye-to-hand'), default=None,
                   help='camera on the arm (board fixed) or fixed (board on the arm); '
                        'default: the manifest\'s, else eye-in-hand')
    p.add_argument('--base-frame', default=None, help='robot base frame (default: base_link)')
    p.add_argument('--tool-frame', default=None, help='robot tool frame (default: tool0)')


def check_hand_eye_options(args, robot_poses):
    """UsageError when --setup, --base-frame or --tool-frame is given without robot poses
    (``robot_poses``: any, or None): they set up the hand-eye solve, and would be ignored."""
    from lf_mpc_calib.errors import UsageError
    given = [f'--{d.replace("_", "-")}' for d in ('setup', 'base_frame', 'tool_frame')
             if getattr(args, d, None) is not None]
    if given and robot_poses is None:
        raise UsageError(f'{", ".join(given)} set{"s" * (len(given) == 1)} up the hand-eye '
                         'solve: expected robot poses with it (--robot-poses FILE, or a data '
                         'set whose manifest has them), got none')


def solve_hand_eye(args, obs, result, robot, frames, out, frame_indices=None,
                   camera_type='conventional'):
    """Solve and print the hand-eye calibration, the intrinsics refined jointly with the
    mount (its ``extras['joint_calibration']`` is what the calibration file then holds);
    returns (HandEyeResult, file mapping)."""
    from lf_mpc_calib.calibration.hand_eye_joint import SHIFT_WARNING_SIGMAS
    from lf_mpc_calib.pipeline.hand_eye import hand_eye_for_frames, hand_eye_mapping
    he = hand_eye_for_frames(obs, result, robot, frames, setup=args.setup,
                             frame_indices=frame_indices)
    mapping = hand_eye_mapping(he, robot, base_frame=args.base_frame,
                               tool_frame=args.tool_frame)
    sd_t = 1e3 * he.mount_stddev[1]
    sd_r = np.degrees(he.mount_stddev[0])
    shown = optical_hand_eye(he, camera_type)     # the mount as the file and TF have it
    print(f'hand-eye ({he.setup}, {len(he.pose_ids)} captures, closed form '
          f'{he.closed_form_method}): {mapping["parent_frame"]} -> {mapping["child_frame"]} '
          f'translation [{", ".join(f"{1e3 * x:.3f}" for x in shown.mount[1])}] mm (sd '
          f'{", ".join(f"{x:.3f}" for x in sd_t)}), rotation vector '
          f'[{", ".join(f"{x:.5f}" for x in shown.mount[0])}] rad (sd '
          f'{", ".join(f"{x:.4f}" for x in sd_r)} deg); RMS {he.rms_reprojection_px:.4f} px '
          f'(calibration {he.calibration_rms_px:.4f} px)', file=out)
    shift = he.extras.get('intrinsics_shift')
    if shift is not None:
        if shift.large:
            print(f'warning: the robot poses pull the intrinsics by {shift.max_sigmas:.1f} sigma '
                  f'from the camera-only calibration (> {SHIFT_WARNING_SIGMAS:g}): check that '
                  'the robot poses are accurate, base -> tool, in metres and radians',
                  file=sys.stderr)
    missing = he.extras.get('captures_without_robot_pose') or []
    if missing:
        print(f'warning: {len(missing)} calibrated frame(s) have no robot pose and were left out '
              f'of the hand-eye: {", ".join(Path(m).name for m in missing)}', file=sys.stderr)
    return he, mapping


def optical_hand_eye(he, camera_type):
    """``he`` (HandEyeResult) with its mount parent -> the optical frame of its model
    (:mod:`lf_mpc_calib.camera.optical_frame`), for what is printed and reported."""
    from lf_mpc_calib.camera.optical_frame import OpticalFrame
    return he.in_optical_frame(OpticalFrame.of(he.model, camera_type))


def print_joint_calibration(he, out):
    """Print the calibration written beside the mount: the intrinsics refined jointly with
    the hand-eye, their sigmas, and how far they moved from the camera-only ones."""
    joint = he.extras['joint_calibration']
    m, sd = joint.model, joint.stddev
    print(f'written calibration: intrinsics refined jointly with the hand-eye '
          f'({len(joint.pose_ids)} captures with robot poses): RMS reprojection '
          f'{joint.rms_reprojection_px:.4f} px, ray {joint.rms_ray_reprojection_mm:.4f} mm',
          file=out)
    for values in (m.intrinsics_dict(), m.distortion_dict()):
        print('  ' + '  '.join(f'{k}={v:.6g}' + (f' (sd {sd[k]:.2g})' if np.isfinite(
            sd.get(k, np.nan)) else '') for k, v in values.items()), file=out)
    print(f'  {he.extras["intrinsics_shift"].summary()}', file=out)


def check_joint_determined(he, run, accept_uncertain):
    """The Acceptance (calibration.acceptance, the rule of the node and the demo too) of the
    calibration written beside the mount (the joint one, else ``run.result``); raises
    DegenerateConfigurationError naming the figures and the poses to add when it does not
    determine the camera, unless ``accept_uncertain``."""
    from lf_mpc_calib.calibration.acceptance import check_accepted
    from lf_mpc_calib.calibration.hand_eye_joint import published_result
    from lf_mpc_calib.errors import DegenerateConfigurationError
    result = published_result(run.result, he)
    try:
        return check_accepted(result, board_points=run.board.points(),
                              camera_type=run.camera_type, accept_uncertain=accept_uncertain)
    except DegenerateConfigurationError as exc:
        raise DegenerateConfigurationError(
            f'with the robot poses (intrinsics refined jointly with the hand-eye): {exc}'
        ) from None


def parse_fix(text):
    """Split ``'k_1,k_2'`` into a tuple of parameter names; raises InvalidInputError."""
    names = tuple(n.strip() for n in (text or '').split(',') if n.strip())
    bad = [n for n in names if n not in PARAMETER_NAMES]
    if bad:
        raise InvalidInputError(f'--fix got unknown parameter(s) {bad}; expected names from '
                                f'{",".join(PARAMETER_NAMES)}')
    return names


def parse_views(text):
    """``'7x7'`` -> (7, 7); raises InvalidInputError."""
    if text is None:
        return None
    m = re.fullmatch(r'\s*(\d+)\s*[xX]\s*(\d+)\s*', text)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise InvalidInputError(f'--views must be NIxNJ (e.g. 7x7), got {text!r}')
    return int(m.group(1)), int(m.group(2))


def board_from_args(args):
    """The Checkerboard (a CharucoBoard with --board-type charuco) from --board/--square, or
    None when neither is given."""
    if args.board is None and args.square is None:
        return None
    if args.board is None or args.square is None:
        raise InvalidInputError('--board COLSxROWS and --square M must be given together, '
                                f'got --board {args.board} --square {args.square}')
    board = Checkerboard.from_spec(args.board, args.square, first_square=args.first_square)
    if getattr(args, 'board_type', None) != 'charuco':
        return board
    from lf_mpc_calib.camera.board import CharucoBoard
    from lf_mpc_calib.cli.simulate import charuco_options
    return CharucoBoard(board.cols, board.rows, board.square, **charuco_options(args))


def run(args):
    """Run calibrate-raw; returns the exit code."""
    from lf_mpc_calib.pipeline.hand_eye import robot_poses_for_dataset
    from lf_mpc_calib.pipeline.offline import load_raw_dataset, write_outputs
    if getattr(args, 'camera_type', 'auto') == 'conventional':
        check_lens_types(args.lens_types, 'conventional', '--camera-type conventional')
    dataset = load_raw_dataset(args.dataset, board=board_from_args(args), white=args.white,
                               demosaic=args.bayer, grid=args.grid, topic=args.topic,
                               dark=args.dark)
    out = sys.stdout
    folder = Path(args.dataset)
    robot = (robot_poses_for_dataset(folder, args.robot_poses) if folder.is_dir()
             or args.robot_poses else None)
    check_hand_eye_options(args, robot)
    # with robot poses the calibration written is the joint one: that is the one whose
    # determination is checked (the arm determines the principal point better)
    accept = args.accept_uncertain or robot is not None
    result_run, camera_type = calibrate_dataset(args, dataset, accept=accept,
                                                progress=_progress_printer(args.quiet, out),
                                                out=out)
    for path, reason in result_run.skipped:
        print(f'warning: skipped {path}: {reason}', file=sys.stderr)
    for path, warning in result_run.frame_warnings:
        print(f'warning: {path}: {warning}', file=sys.stderr)
    he = mapping = None
    determined = result_run.determination
    if robot is not None:
        order = {str(p): k for k, p in enumerate(dataset.frames)}
        he, mapping = solve_hand_eye(args, result_run.observations, result_run.result, robot,
                                     result_run.pose_frames, out,
                                     [order[str(p)] for p in result_run.pose_frames],
                                     camera_type=camera_type)
        determined = check_joint_determined(he, result_run, args.accept_uncertain)
    jackknife = pose_jackknife_of(args, result_run.observations, result_run.result, camera_type,
                                  getattr(result_run, 'jackknife', None))
    written = write_outputs(result_run, args.output, report_dir=args.report, hand_eye=mapping,
                            hand_eye_result=he, jackknife=jackknife)
    joint = he is not None and 'joint_calibration' in he.extras
    if joint:
        print('camera-only calibration (before the hand-eye; kept in the report):', file=out)
    _print_calibration(result_run, camera_type, out)
    for line in [] if jackknife is None else jackknife.summary():
        print(line, file=out)
    if joint:
        print_joint_calibration(he, out)
    _print_pose_set(result_run, camera_type, determined, out)
    for p in written[:2]:
        print(f'wrote {p}', file=out)
    if args.report:
        print(f'wrote report into {args.report} ({len(written) - 2} files)', file=out)
    return 0


def _progress_printer(quiet, out):
    """progress(index, total, path, message) of calibrate_dataset: a frame's line to ``out``
    (a skipped one's to stderr), a line without a frame as it is; nothing when ``quiet``."""
    def progress(index, total, path, message):
        if quiet:
            return
        if path is None:
            print(message, file=out, flush=True)
        elif message.startswith('skipped: '):
            print(f'[{index + 1}/{total}] {path.name}: {message}', file=sys.stderr, flush=True)
        else:
            print(f'[{index + 1}/{total}] {path.name}: {message}', file=out, flush=True)
    return progress


def _print_calibration(result_run, camera_type, out):
    """Print the calibration: poses, rays, RMS, the intrinsics and distortion, what was held,
    the model fit against the corner noise and the lens types' terms."""
    r = result_run.result
    m = r.model
    print(f'{len(result_run.pose_frames)} poses, {len(result_run.observations)} rays: RMS '
          f'reprojection {r.rms_reprojection_px:.4f} px, ray {r.rms_ray_reprojection_mm:.4f} mm'
          f'{"" if r.converged else " (NOT converged: " + str(r.message) + ")"}', file=out)
    print('  ' + '  '.join(f'{k}={v:.6g}' for k, v in m.intrinsics_dict().items()), file=out)
    print('  ' + '  '.join(f'{k}={v:.6g}' for k, v in m.distortion_dict().items()), file=out)
    print_held(r, out)
    print(f'model fit: RMS {r.rms_reprojection_px:.3f} px = {result_run.fit_ratio:.2f} x the '
          f'corner noise {result_run.corner_noise_px:.3f} px measured across '
          f'{"micro-images" if camera_type == "focused" else "views"}', file=out)
    if r.lens_types is None:
        return
    from lf_mpc_calib.report.raw_calibration import lens_type_residuals
    lt = r.lens_types
    source = getattr(result_run, 'lens_type_source', None)
    print(f'{lt.n_types} micro-lens types ({_SOURCES.get(source, source)}):', file=out)
    for t, line in enumerate(lens_type_residuals(r, result_run.observations)):
        print(f'  {line}; scale {100 * lt.scale[t]:+.3f} +- {100 * lt.scale_std[t]:.3f} %, '
              f'offset ({lt.offset_px[t][0]:+.3f}, {lt.offset_px[t][1]:+.3f}) +- '
              f'{lt.offset_std_px[t][0]:.3f} px{lt.view_text(t)}', file=out)


def _print_pose_set(result_run, camera_type, determined, out):
    """Print the guidance on the pose set and, from ``determined`` (a Determination), what
    the poses leave undetermined (accepted with --accept-uncertain) or uncertain."""
    guidance = pose_set_guidance(result_run, camera_type)
    print(f'pose set: {guidance.summary()}', file=out)
    for advice in guidance.advice[1:]:
        print(f'  also: {advice}', file=out)
    for problem in determined.refusals:
        print(f'WARNING (--accept-uncertain): {problem}: the poses do not determine the camera',
              file=out)
    for warning in determined.warnings:
        print(f'WARNING: {warning}', file=out)


def pose_set_guidance(result_run, camera_type):
    """
    The CaptureGuidance of a run's pose set (calibration.guidance.capture_guidance). A
    ChArUco board counts partly out of view: its advice sends the board into the image
    corners the kept poses' corners have not reached (conventional: in the central views,
    ``detections`` (path, Detection) of the run).
    """
    from lf_mpc_calib.calibration.guidance import capture_guidance
    from lf_mpc_calib.report.detections_overlay import region_names, uncovered_regions
    partial = getattr(result_run.board, 'board_type', 'checkerboard') == 'charuco'
    uncovered = []
    dets = [d for _, d in getattr(result_run, 'detections', ())
            if d.reference_image is not None]
    if partial and camera_type != 'focused' and dets:
        points = np.concatenate([np.asarray(d.central_uv, float).reshape(-1, 2) for d in dets])
        uncovered = region_names(uncovered_regions(points, np.shape(dets[0].reference_image)))
    return capture_guidance(result_run.result, board_points=result_run.board.points(),
                            camera_type=camera_type, partial_views=partial,
                            uncovered=uncovered)


def calibrate_dataset(args, dataset, *, accept, progress, out):
    """
    Calibrate a loaded raw ``dataset`` (pipeline.offline.load_raw_dataset) as calibrate-raw's
    ``args`` say, printing its camera-type and frame lines to ``out`` (unless --quiet);
    accept: write a calibration the poses leave uncertain. Returns (the pipeline's run,
    camera_type 'conventional' | 'focused').
    """
    from lf_mpc_calib.pipeline.offline import calibrate_raw
    views = parse_views(args.views)
    options = {'distortion': distortion_option(args)}
    fix = parse_fix(args.fix)
    if fix:
        options['fix'] = fix
    from lf_mpc_calib.pipeline.focused_raw import SIMULATED, calibrate_focused_raw, \
        resolve_camera_type
    camera_type, type_grid, evidence = resolve_camera_type(
        dataset, getattr(args, 'camera_type', 'auto'), grid=dataset.grid)
    if not args.quiet:
        print(f'camera type: {camera_type} ({evidence})', file=out, flush=True)
    check_lens_types(args.lens_types, camera_type, evidence)
    if not args.quiet:
        b = dataset.board
        grid = '' if args.grid is None else f', lenslet grid from {args.grid}'
        white = dataset.white.name if isinstance(dataset.white, Path) else dataset.white
        print(f'{len(dataset.frames)} frames, white {white}, board '
              f'{b.cols}x{b.rows} x {b.square * 1000:g} mm{grid}', file=out, flush=True)
    folder = Path(args.dataset)
    if camera_type == 'focused':
        if args.lens_types is None:
            args.lens_types = _saved_lens_types(folder)
            if args.lens_types > 1:
                print(f'lens types: {args.lens_types} (the calibration session\'s manifest)',
                      file=out)
        simulated = args.lens_types == SIMULATED
        cam = dataset.camera
        if args.lens_types == 1 and cam is not None and cam.mla.n_types > 1:
            print(f'note: the simulated camera has {cam.mla.n_types} micro-lens types, '
                  f'calibrated as one (--lens-types {cam.mla.n_types}: told from the frames; '
                  '--lens-types simulated: the simulator\'s)', file=out)
        result_run = calibrate_focused_raw(
            dataset, grid=type_grid, calibrate_options=options, min_poses=args.min_poses,
            progress=progress, accept_uncertain=accept,
            recentre=dataset.grid is None,     # the white's estimate, not a grid given
            lens_types=SIMULATED if simulated else None,
            n_types=1 if simulated else args.lens_types)
    else:
        from lf_mpc_calib.features.corners import CornerOptions
        result_run = calibrate_raw(dataset, views=views, grid=type_grid or dataset.grid,
                                   calibrate_options=options, min_poses=args.min_poses,
                                   progress=progress, accept_uncertain=accept,
                                   corner_options=CornerOptions(min_corners=args.min_corners))
    return result_run, camera_type


def calibrate_folder(folder):
    """
    What ``calibrate-raw FOLDER`` calibrates at its defaults, an uncertain calibration
    accepted, nothing printed or written: (the pipeline's run, camera_type). For ``plan``,
    which checks that its captures meet the target as calibrate-raw will report it.
    """
    import argparse
    import io
    from lf_mpc_calib.pipeline.offline import load_raw_dataset
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(['calibrate-raw', str(folder), '--accept-uncertain', '--quiet'])
    dataset = load_raw_dataset(args.dataset, board=None, white=None, demosaic=None, grid=None,
                               topic=None)
    return calibrate_dataset(args, dataset, accept=True, progress=None, out=io.StringIO())


_SOURCES = {'inferred': 'told from the frames', 'given': 'given',
            'simulated': "the simulator's true types, given", None: 'from the observation table'}


MAX_LENS_TYPES = 64
"""Interleaved micro-lens types, at most (as observation tables' lens_type ids)."""


def _lens_types(text):
    """--lens-types: an integer >= 1 or 'simulated'."""
    import argparse
    if text == 'simulated':
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_LENS_TYPES:
        raise argparse.ArgumentTypeError(f"expected an integer from 1 to {MAX_LENS_TYPES} or "
                                         f"'simulated', got {text!r}")
    return value


def check_lens_types(lens_types, camera_type, evidence):
    """InvalidInputError for --lens-types other than 1 (or none) on a ``camera_type``
    'conventional' camera: its micro-lenses are of one type (``evidence``: why it is one)."""
    if camera_type != 'focused' and lens_types not in (None, 1):
        raise InvalidInputError(
            f'--lens-types {lens_types}: a conventional camera ({evidence}) has one micro-lens '
            'type; expected --lens-types 1 or none (several types are told apart on focused '
            'cameras only)')


def _saved_lens_types(folder):
    """The ``lens_types`` a calibration session wrote into the folder's manifest, else 1."""
    from lf_mpc_calib.io.raw_dataset import LATEST, MANIFEST
    from lf_mpc_calib.io.yaml_file import read_yaml
    for path in (Path(folder) / MANIFEST, Path(folder) / LATEST / MANIFEST):
        if path.is_file():
            manifest = read_yaml(path, 'manifest')
            value = manifest.get('lens_types', 1) if isinstance(manifest, dict) else 1
            return value if isinstance(value, int) and value >= 1 else 1
    return 1
