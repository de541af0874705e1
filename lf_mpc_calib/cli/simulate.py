"""
``lf-mpc-calib simulate``: render a raw light-field dataset with its ground truth.

    lf-mpc-calib simulate --preset lytro --poses 6 --seed 0 -o DIR [--scale 0.2]
        [--noise SIGMA] [--poses-file POSES.yaml] [--board 8x6 --square 0.02]
        [--samples 4] [--bayer rggb] [--bit-depth 16] [--upright] [--scene planes]
        [--arm eye-in-hand|eye-to-hand]
        [--lattice-layout rows|columns] [--lattice-rotation DEG] [--portrait]

Writes DIR/manifest.yaml, DIR/white.png, DIR/frame_NNN.png and DIR/ground_truth.yaml (the
calibration-file format; see :mod:`lf_mpc_calib.simulation.dataset`). DIR must be new or
empty; ``--overwrite`` replaces the data set it holds, leaving no frame of it behind
(:func:`lf_mpc_calib.cli.paths.dataset_output`). Poses come from
--poses-file (a list of {rotation_vector, translation_m}, board -> the optical frame: a
focused camera's z from the main lens, as a calibration file holds them; or a calibration
file, e.g. another data set's ground_truth.yaml), or are a careful user's set (conventional
presets: boards at 0.6-1.5 x the focus distance alternating near and far; focused presets:
spread 1.4 x or more in depth on the side of the plane conjugate to the micro-lenses where they
focus; tilted 30 degrees about both axes in turn:
:func:`~lf_mpc_calib.simulation.dataset.capture_poses`), or with --random-poses are drawn at
random (tilts up to --max-tilt degrees, board in view). The board is sized as
the guidance asks (:func:`~lf_mpc_calib.simulation.dataset.capture_board`: for a focused
camera up to 16 x 11 corners filling 0.9 of the view at the nearest pose; focused presets
render 10 poses at 64 rays per pixel: ``FOCUSED_CAPTURE_POSES``, ``FOCUSED_SAMPLES``), so that
``simulate`` and ``calibrate-raw`` with their defaults give a calibration the project trusts.
``--scene planes`` renders instead textured planes at 0.55-1.9 x the focus distance, one
slanted, with the board among them, and writes beside each frame_NNN.png its ground-truth depth
of the central view depth_NNN.npy (float32 metres, NaN where no surface; see
:mod:`lf_mpc_calib.simulation.scene_dataset`); --poses is then the number of frames. Focused
presets: three textured planes (a back wall, a slanted plane, a near plane) within 0.06 of the
scene distance's inverse virtual depth w, the depth truth in the pixels of the image rendered
at that w (the manifest's ``render_w``: pass it to ``depth --render-w``).
``--arm`` simulates a robot arm (:mod:`lf_mpc_calib.simulation.arm`) that moves the camera (or
the board) to those poses: the manifest gets ``arm`` and ``robot_poses`` (base -> tool per
frame), ground_truth.yaml the ``hand_eye`` key.
``--lattice-layout columns`` turns the preset's micro-lens array by 90 degrees (a hexagonal
lattice shifted along the image columns), ``--lattice-rotation`` by up to 10 degrees more either
way, ``--portrait`` turns the whole camera by 90 degrees (sensor width and height swapped):
:func:`~lf_mpc_calib.simulation.lattice_turn.turn_lattice`.
"""

from pathlib import Path
import re
import sys
import time

import numpy as np

from lf_mpc_calib.errors import InvalidInputError, UsageError
from lf_mpc_calib.cli.numbers import integer, real, SEED
from lf_mpc_calib.cli.paths import add_dataset_output_arguments
from lf_mpc_calib.simulation.names import BAYER_PATTERNS, PRESETS


def register(subparsers):
    """Add the ``simulate`` subcommand."""
    p = subparsers.add_parser(
        'simulate', help='render raw frames, a white image and ground truth of a preset camera',
        description='Ray-trace a checkerboard seen by a simulated plenoptic camera and write a '
                    'dataset folder (manifest, white image, raw frames, ground truth).')
    p.add_argument('--preset', choices=PRESETS, default='lytro',
                   help='camera preset (default: %(default)s)')
    p.add_argument('--poses', type=integer(1, 1000), default=None,
                   help='number of board poses (default: 6, focused presets 10: their '
                        'principal point averages over poses; --scene planes: frames, 6)')
    p.add_argument('--seed', type=SEED, default=0,
                   help='seed of the poses and the noise (default: %(default)s)')
    add_dataset_output_arguments(p)
    p.add_argument('--scale', type=real(0, 1, low_open=True), default=1.0,
                   help='sensor crop factor in (0, 1]: fewer lenses, same optics '
                        '(default: %(default)s)')
    p.add_argument('--noise', type=real(0, 1), default=None, metavar='SIGMA',
                   help='Gaussian noise sigma as a fraction of full scale (default: 0)')
    p.add_argument('--poses-file', default=None, metavar='YAML',
                   help='board poses to render instead of random ones')
    p.add_argument('--board', default=None, metavar='COLSxROWS',
                   help='inner corners (default: sized to the field of view)')
    p.add_argument('--square', type=real(0, 10, low_open=True), default=None, metavar='METRES',
                   help='square size (default: sized to the field of view)')
    add_board_type_arguments(p)
    p.add_argument('--partial', action='store_true',
                   help='a partial-view pose set: every board pushed 30-60 %% out of view into '
                        'an image corner or side, corners in turn (for --board-type charuco; '
                        'the same number of poses, depths and tilts as the default set)')
    p.add_argument('--random-poses', action='store_true',
                   help='draw the poses at random (default for conventional presets: boards '
                        'at 0.6-1.5 x the focus distance tilted about both axes in turn)')
    p.add_argument('--max-tilt', type=real(0, 89), default=30.0, metavar='DEG',
                   help='largest random tilt of the board (default: %(default)s)')
    p.add_argument('--samples', type=integer(1, 256), default=None,
                   help='rays per pixel (anti-aliasing; default: 4, focused presets 64 (16 '
                        'with --scene planes): the detector reads defocused micro-images up '
                        'to their rims)')
    p.add_argument('--bayer', choices=BAYER_PATTERNS, default=None,
                   help='write a Bayer mosaic (default: monochrome)')
    p.add_argument('--bit-depth', type=int, choices=(8, 16), default=None,
                   help="PNG bit depth (default: the preset's)")
    p.add_argument('--upright', action='store_true',
                   help='read the sensor out turned by 180 degrees (upright raw image)')
    p.add_argument('--ideal', action='store_true',
                   help='an ideal camera: the irradiance itself (no shot or read noise, PRNU, '
                        'black level, hot pixels, dust or lens jitter; no dark frame). '
                        'Default: the '
                        'realistic sensor and lenses of the presets (every lens off its '
                        'lattice point and focal length; docs/simulation.md)')
    p.add_argument('--scene', choices=('board', 'planes'), default='board',
                   help='board: the checkerboard at --poses poses; planes: textured planes and '
                        'the board with depth truth per frame (default: %(default)s)')
    p.add_argument('--arm', choices=('eye-in-hand', 'eye-to-hand'), default=None,
                   help='simulate a robot arm carrying the camera (eye-in-hand) or the board '
                        '(eye-to-hand): the manifest lists the robot pose (base -> tool) of '
                        'every frame and ground_truth.yaml the hand_eye mount')
    p.add_argument('--lattice-layout', choices=('rows', 'columns'), default='rows',
                   help="rows: the preset's micro-lens array; columns: turned by 90 degrees, its "
                        'half-pitch shift along the image columns (default: %(default)s)')
    p.add_argument('--lattice-rotation', type=real(-10, 10), default=0.0, metavar='DEG',
                   help='turn the micro-lens array by this many degrees more, from -10 to 10 '
                        '(default: %(default)s)')
    p.add_argument('--portrait', action='store_true',
                   help='a camera mounted in portrait: sensor and array turned by 90 degrees')
    p.add_argument('--quiet', action='store_true', help='no progress lines')
    p.set_defaults(func=run)


def _board(args, camera):
    from lf_mpc_calib.simulation.dataset import capture_board
    from lf_mpc_calib.simulation.optics import Checkerboard
    board = capture_board(camera)
    if args.board is None and args.square is None:
        return board
    cols, rows = board.cols, board.rows
    if args.board is not None:
        m = re.fullmatch(r'\s*(\d+)\s*[xX]\s*(\d+)\s*', args.board)
        if not m:
            raise InvalidInputError(
                f'--board must be COLSxROWS inner corners (e.g. 8x6), got {args.board!r}')
        cols, rows = int(m.group(1)), int(m.group(2))
        if args.board_type != 'charuco':
            from lf_mpc_calib.features.corners import check_detectable
            check_detectable(Checkerboard(cols, rows, board.square), '--board')
    square = board.square if args.square is None else args.square
    return Checkerboard(cols, rows, square)


def _board_of_type(args, camera):
    """The simulated board of --board/--square, a ChArUco one with --board-type charuco."""
    board = _board(args, camera)
    if args.board_type != 'charuco':
        return board
    from lf_mpc_calib.simulation.optics import CharucoBoard
    return CharucoBoard(board.cols, board.rows, board.square, **charuco_options(args))


def add_board_type_arguments(p):
    """--board-type, --dictionary, --marker, --charuco-layout (simulate, calibrate-raw)."""
    from lf_mpc_calib.camera.board import BOARD_TYPES, CHARUCO_LAYOUTS, DEFAULT_DICTIONARY
    p.add_argument('--board-type', choices=BOARD_TYPES, default=None,
                   help='checkerboard, or charuco: ArUco markers in the white squares name '
                        'every corner, so a board partly out of view counts (default: '
                        'checkerboard, or the data set manifest\'s)')
    p.add_argument('--dictionary', default=None, metavar='DICT_NAME',
                   help=f'ChArUco markers\' ArUco dictionary (default: {DEFAULT_DICTIONARY})')
    p.add_argument('--marker', type=real(0, 10, low_open=True), default=None,
                   metavar='METRES', help='ChArUco marker side (default: 0.75 square)')
    p.add_argument('--charuco-layout', choices=CHARUCO_LAYOUTS, default=None,
                   help='opencv: the squares of OpenCV >= 4.7; legacy: those of boards made '
                        'before 4.6 (CharucoBoard.setLegacyPattern) (default: opencv)')


def charuco_options(args):
    """{dictionary, marker, layout} keyword arguments of a CharucoBoard from the options."""
    from lf_mpc_calib.camera.board import DEFAULT_DICTIONARY
    return {'dictionary': args.dictionary or DEFAULT_DICTIONARY, 'marker': args.marker,
            'layout': args.charuco_layout or 'opencv'}


MAX_POSES = 1000
"""Most frames one simulate run renders (a stated cap: a calibration uses 5-30)."""
MAX_SAMPLES = 256
"""Most rays per pixel (anti-aliasing saturates long before)."""


def check_counts(args):
    """Refuse (InvalidInputError) --poses, --samples, --noise, --square outside their bounds."""
    import math
    if args.poses is not None and not 1 <= args.poses <= MAX_POSES:
        raise InvalidInputError(f'--poses must be a whole number from 1 to {MAX_POSES}, got '
                                f'{args.poses}')
    if args.samples is not None and not 1 <= args.samples <= MAX_SAMPLES:
        raise InvalidInputError(f'--samples must be a whole number from 1 to {MAX_SAMPLES}, '
                                f'got {args.samples}')
    if args.noise is not None and not (math.isfinite(args.noise) and 0 <= args.noise <= 1):
        raise InvalidInputError(f'--noise must be a fraction of full scale in [0, 1], got '
                                f'{args.noise}')
    if args.square is not None and not (math.isfinite(args.square) and 0 < args.square <= 10):
        raise InvalidInputError(f'--square must be metres in (0, 10], got {args.square}')


def run(args):
    """Render the dataset; returns the exit code."""
    import math
    from lf_mpc_calib.errors import InvalidInputError
    if not 0 <= args.seed < 2 ** 63:
        raise InvalidInputError(f'--seed must be a whole number from 0 to 2^63 - 1, got '
                                f'{args.seed}')
    if not (math.isfinite(args.max_tilt) and 0 <= args.max_tilt < 90):
        raise InvalidInputError(f'--max-tilt must be degrees in [0, 90), got {args.max_tilt}')
    check_counts(args)
    from lf_mpc_calib.cli.paths import check_dataset_output, dataset_output
    check_dataset_output(args.output, args.overwrite)       # before any rendering
    from lf_mpc_calib.simulation.dataset import (
        FOCUSED_CAPTURE_POSES, FOCUSED_SAMPLES, write_dataset)
    camera = _camera(args)
    focused = camera.camera_type == 'focused'
    board_capture = focused and args.scene != 'planes'   # planes: 6 frames, 16 rays
    if args.samples is None:
        args.samples = FOCUSED_SAMPLES if board_capture else 16 if focused else 4
    board = _board_of_type(args, camera)
    if args.poses is None:
        args.poses = FOCUSED_CAPTURE_POSES if board_capture else 6
    if args.scene == 'planes':
        if args.arm:
            raise InvalidInputError('--arm simulates a board on or before a robot arm; it does '
                                    'not apply to --scene planes')
        return _run_planes(args, camera, board)
    rvecs, tvecs = _poses(args, camera, board)
    w, h = camera.sensor.size
    if not args.quiet:
        print(f'{camera.name} ({camera.camera_type}) {w}x{h} px, '
              f'{camera.micro_image_pitch:.2f} px per micro-image, board '
              f'{board.cols}x{board.rows} x {board.square * 1e3:.2f} mm, {len(rvecs)} poses',
              file=sys.stderr)
    progress = render_progress(args.quiet)
    with dataset_output(args.output, args.overwrite) as folder:
        if args.arm:
            from lf_mpc_calib.simulation.arm import default_arm, write_arm_dataset
            write_arm_dataset(folder, camera, board, default_arm(args.arm), rvecs, tvecs,
                              seed=args.seed, samples=args.samples, progress=progress)
        else:
            write_dataset(folder, camera, board, rvecs, tvecs, seed=args.seed,
                          samples=args.samples, progress=progress)
    out = Path(args.output)
    print(f'wrote {out} ({len(rvecs)} frames, ground truth in {out / "ground_truth.yaml"})')
    return 0


def _camera(args):
    """The preset camera with the sensor options (--noise, --bayer, --bit-depth, --upright,
    --ideal) and the lattice turned as --lattice-layout, --lattice-rotation and --portrait
    say (UsageError naming --lattice-rotation when it cannot be)."""
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.simulation.optics import preset
    overrides = {}
    if args.noise is not None:
        overrides['sensor__noise'] = args.noise
    if args.bayer is not None:
        overrides['sensor__bayer'] = args.bayer
    if args.bit_depth is not None:
        overrides['sensor__bit_depth'] = args.bit_depth
    if args.upright:
        overrides['sensor__upright'] = True
    if args.ideal:                  # the presets: realistic sensor and lenses
        from lf_mpc_calib.simulation.optics import IDEAL
        overrides.update(IDEAL)
    camera = preset(args.preset, scale=args.scale, **overrides)
    if args.lattice_layout == 'rows' and args.lattice_rotation == 0.0 and not args.portrait:
        return camera
    from lf_mpc_calib.simulation.lattice_turn import turn_lattice
    try:
        return turn_lattice(camera, layout=args.lattice_layout,
                            degrees=args.lattice_rotation, portrait=args.portrait)
    except InvalidInputError as exc:
        raise UsageError(f'--lattice-rotation: {exc}') from None


def _poses(args, camera, board):
    """The board poses (rvecs, tvecs (P, 3)) to render: --poses-file's, or --poses drawn at
    random (--random-poses), pushed partly out of view (--partial) or a careful user's."""
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.simulation.dataset import capture_poses, load_poses, random_poses
    if args.poses_file:
        if args.random_poses:
            raise InvalidInputError('--random-poses and --poses-file both choose the poses: '
                                    'expected one of them, got both')
        rvecs, tvecs = load_poses(args.poses_file, camera)   # optical -> the optics' frame
        if len(rvecs) > MAX_POSES:
            raise InvalidInputError(f'--poses-file {args.poses_file} lists {len(rvecs)} poses, '
                                    f'more than the {MAX_POSES} one run renders')
        return rvecs, tvecs
    rng = np.random.default_rng(args.seed)
    if args.random_poses:
        return random_poses(camera, board, args.poses, rng=rng, max_tilt_deg=args.max_tilt)
    if args.partial:
        from lf_mpc_calib.simulation.dataset import capture_board
        from lf_mpc_calib.simulation.partial_poses import partial_poses
        return partial_poses(camera, board, args.poses, rng=rng,
                             base_board=capture_board(camera))
    return capture_poses(camera, board, args.poses, rng=rng)


def render_progress(quiet=False):
    """progress(done, total) for the data set writers (write_dataset, append_frames, ...): a
    line on stderr per image rendered (done 0: the white image) with the seconds since this
    call; None when ``quiet``."""
    if quiet:
        return None
    start = time.perf_counter()

    def progress(done, total):
        what = 'white image' if done == 0 else f'frame {done}/{total}'
        print(f'  {what} rendered ({time.perf_counter() - start:.1f} s)', file=sys.stderr,
              flush=True)
    return progress


def _run_planes(args, camera, board):
    from lf_mpc_calib.cli.paths import dataset_output
    from lf_mpc_calib.simulation.scene_dataset import write_planes_dataset
    if args.poses_file:
        raise InvalidInputError('--poses-file does not apply to --scene planes (the scenes are '
                                'drawn from --seed)')
    with dataset_output(args.output, args.overwrite) as folder:
        write_planes_dataset(folder, camera, board, args.poses, seed=args.seed,
                             samples=args.samples, progress=render_progress(args.quiet))
    out = Path(args.output)
    print(f'wrote {out} ({args.poses} frames of textured planes with depth_NNN.npy, '
          f'ground truth in {out / "ground_truth.yaml"})')
    return 0
