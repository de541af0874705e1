"""
``lf-mpc-calib calibrate``: calibrate an observation table and write the calibration file.

    lf-mpc-calib calibrate OBSERVATIONS.csv -o calibration.yaml [--no-distortion]
        [--fix k_1,k_2] [--method exact|paper] [--report DIR]
        [--camera-type conventional|focused] [--loss linear|soft_l1|huber]
        [--format table|r12] [--robot-poses ROBOT.csv [--setup eye-in-hand|eye-to-hand]]

``--format r12`` reads the Raytrix R12 data set's CSV (see :mod:`lf_mpc_calib.io.raytrix_r12`)
instead of an observation table; ``--save-observations`` writes the converted table.
"""

import sys
import time

import numpy as np

from lf_mpc_calib.cli.calibrate_raw import add_model_arguments, check_hand_eye_options, \
    distortion_option, pose_jackknife_of
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.camera.model import PARAMETER_NAMES
from lf_mpc_calib.camera.observations import guess_camera_type
from lf_mpc_calib.cli.numbers import integer, real

LOSSES = ('linear', 'soft_l1', 'huber', 'cauchy', 'arctan')
LENS_TYPE_TERM_CHOICES = ('none', 'offset', 'affine', 'affine-radial', 'affine-view',
                          'affine-radial-view', 'affine-slope', 'affine-radial-slope')
"""calibration.type_terms.LENS_TYPE_TERMS, spelt out: building the parser imports no
calibration module (``--help`` stays fast; test_cli_calibrate checks the two agree)."""


def register(subparsers):
    """Add the ``calibrate`` subcommand."""
    p = subparsers.add_parser(
        'calibrate', help='calibrate an observation table (CSV) into a calibration file',
        description='Closed-form initial solution and least-squares refinement of the MPC '
                    'model from an observation table (pose,point,X,Y,Z,i,j,u,v).')
    p.add_argument('observations',
                   help='observation table CSV (or the R12 CSV with --format r12)')
    p.add_argument('-o', '--output', default='calibration.yaml',
                   help='calibration file to write (default: %(default)s)')
    p.add_argument('--format', choices=('table', 'r12'), default='table',
                   help='input format: the observation table, or the Raytrix R12 data set CSV')
    add_model_arguments(p, 'comma-separated parameters held at their closed-form values '
                           '(k_1, k_2: 0; k_3, k_4: the closed form\'s shear estimate), of '
                           + ','.join(PARAMETER_NAMES))
    p.add_argument('--method', choices=('exact', 'paper'), default='exact',
                   help='closed-form initial solution (default: %(default)s)')
    p.add_argument('--camera-type', choices=('conventional', 'focused'), default=None,
                   help='written to the file; default: focused for --format r12, else guessed '
                        'from (i, j) (integers in a small range: conventional)')
    p.add_argument('--loss', choices=LOSSES, default='linear',
                   help='robust loss of the refinement (default: %(default)s)')
    p.add_argument('--f-scale', type=real(0, 1e3, low_open=True), default=1.0,
                   help='soft margin of the robust loss in pixels (default: %(default)s)')
    p.add_argument('--max-iterations', type=integer(1, 100000),
                   default=500,   # refine.MAX_ITERATIONS
                   help='refinement iterations at most (default: %(default)s)')
    p.add_argument('--image-size', type=integer(1, 100000), nargs=2, metavar=('W', 'H'),
                   default=None,
                   help='image size written to the file (view or raw image)')
    p.add_argument('--report', metavar='DIR', default=None,
                   help='write a report (summary.txt and PNG plots) into DIR')
    p.add_argument('--lens-type-terms', choices=LENS_TYPE_TERM_CHOICES, default=None,
                   help='per-micro-lens-type terms of (u, v): offset, scale + offset, or those '
                        'and a radial term about the micro-image centre; -view: and a '
                        'per-type scale of (i, j) about the optical axis (focused) '
                        '(lf_mpc_calib.calibration.type_terms; default affine-radial for '
                        '--format r12, affine for a table with a lens_type column)')
    p.add_argument('--save-observations', metavar='CSV', default=None,
                   help='also write the (converted) observation table')
    from lf_mpc_calib.cli.calibrate_raw import add_hand_eye_arguments
    add_hand_eye_arguments(p, 'the pose id of the observation table')
    p.add_argument('--quiet', action='store_true', help='do not show solver progress')
    p.set_defaults(func=run)


def parse_fix(text):
    """Split ``'k_1,k_2'`` into a tuple of names, checking each is a parameter."""
    names = tuple(n.strip() for n in text.split(',') if n.strip())
    bad = [n for n in names if n not in PARAMETER_NAMES]
    if bad:
        raise InvalidInputError(f'--fix got unknown parameter(s) {bad}; expected names from '
                                f'{",".join(PARAMETER_NAMES)}')
    return names


class ProgressPrinter:
    """Print solver progress lines to stderr (the core reports through a callback)."""

    def __init__(self, stream=None):
        self.stream = stream            # None: sys.stderr when printing (as redirected then)
        self.start = time.perf_counter()

    def __call__(self, *args, **kwargs):
        """Print what the solver reports, labelled, with the elapsed time: the refinement
        reports (iteration, cost), the cost being half the sum of squared residuals in px^2."""
        if len(args) == 2 and not kwargs:
            args = (f'iteration {args[0]}', f'cost {_fmt(float(args[1]))} px^2 (half the sum '
                    'of squared residuals)')
        parts = [str(a) for a in args] + [f'{k}={_fmt(v)}' for k, v in kwargs.items()]
        elapsed = time.perf_counter() - self.start
        print(f'  [{elapsed:7.2f} s] ' + ' '.join(parts), file=self.stream or sys.stderr,
              flush=True)


MAX_IMAGE_SIDE = 1 << 16
"""Largest image side accepted (px): beyond any sensor, far below what overflows."""


def check_image_size(size):
    """(W, H) of --image-size checked to be 1..MAX_IMAGE_SIDE each, or None."""
    if size is None:
        return None
    if not all(1 <= int(s) <= MAX_IMAGE_SIDE for s in size):
        raise InvalidInputError(f'--image-size W H must be whole pixels from 1 to '
                                f'{MAX_IMAGE_SIDE}, got {size[0]} {size[1]}')
    return tuple(int(s) for s in size)


def check_rays_inside(obs, size):
    """InvalidInputError when rays lie outside --image-size W H (pixel centres 0 to W - 1)
    by more than RAY_MARGIN of its sides (noisy corners near an edge may step past it): the
    size would be written into the calibration file."""
    u, v = obs.ijuv[:, 2], obs.ijuv[:, 3]
    mu, mv = RAY_MARGIN * size[0] + 0.5, RAY_MARGIN * size[1] + 0.5
    outside = (u < -mu) | (u > size[0] - 1 + mu) | (v < -mv) | (v > size[1] - 1 + mv)
    if outside.any():
        raise InvalidInputError(
            f'--image-size {size[0]} {size[1]}: {int(outside.sum())} of {len(obs)} rays lie '
            f'outside it (u {u.min():.1f} to {u.max():.1f}, v {v.min():.1f} to {v.max():.1f} '
            'px); expected the size of the image the rays were measured in')


RAY_MARGIN = 0.05
"""How far past the image's sides (a share of each) a ray may lie before --image-size is
refused as not the image the rays were measured in."""


def _fmt(v):
    if isinstance(v, float):
        return f'{v:.6g}'
    return str(v)


def load_input(args):
    """Return (observations, extra) where extra holds image_size / lenslet_grid / camera_type."""
    extra = {}
    if args.format == 'r12':
        from lf_mpc_calib.io.raytrix_r12 import read_r12
        data = read_r12(args.observations)
        obs = data.observations
        extra.update(image_size=data.image_size, lenslet_grid=data.lenslet_grid,
                     camera_type='focused', r12=data)
    else:
        from lf_mpc_calib.io.observation_table import read_observations
        obs = read_observations(args.observations)
    return obs, extra


def run(args):
    """Run the calibration and print parameters, standard deviations and errors."""
    from lf_mpc_calib.calibration.hand_eye_joint import published_result
    from lf_mpc_calib.io.calibration_file import CalibrationFile, save_calibration
    from lf_mpc_calib.report.calibration import summary_text

    image_size = check_image_size(args.image_size)
    check_hand_eye_options(args, args.robot_poses)
    obs, extra = load_input(args)
    if image_size is not None:
        check_rays_inside(obs, image_size)
    fix = parse_fix(args.fix)
    camera_type = args.camera_type or extra.get('camera_type') or guess_camera_type(obs)
    print(f'{args.observations}: {len(obs)} rays, {len(obs.pose_ids)} poses; '
          f'camera type {camera_type}; closed form {args.method}; '
          f'distortion {"off" if args.no_distortion else "on"}'
          + (f'; fixed {",".join(fix)}' if fix else ''))
    options = dict(method=args.method, distortion=distortion_option(args), fix=fix,
                   loss=args.loss, f_scale=args.f_scale, max_iterations=args.max_iterations,
                   camera_type=camera_type)
    result, obs, lens_types = _calibrated(args, obs, extra, options, camera_type)
    print(summary_text(result), end='')
    jackknife = pose_jackknife_of(args, obs, result, camera_type)
    for line in [] if jackknife is None else jackknife.summary():
        print(line)
    if lens_types is not None:
        _print_lens_types(result)
    he, mapping = _hand_eye(args, obs, result, camera_type)
    cal = CalibrationFile.from_result(published_result(result, he), camera_type=camera_type,
                                      image_size=image_size or extra.get('image_size'),
                                      lenslet_grid=extra.get('lenslet_grid'),
                                      lens_types=lens_types, hand_eye=mapping)
    # the report first: a report that cannot be written leaves the old calibration file
    if args.report:
        _write_report(args, obs, result, he, jackknife, camera_type)
    if args.save_observations:
        from lf_mpc_calib.io.observation_table import write_observations
        write_observations(args.save_observations, obs)
        print(f'wrote {args.save_observations}')
    save_calibration(args.output, cal)      # last: written only when everything else was
    print(f'wrote {args.output}')
    if not result.converged:
        print(f'warning: the refinement did not converge: {result.message}', file=sys.stderr)
        return 3
    return 0


def _calibrated(args, obs, extra, options, camera_type):
    """(CalibrationResult, the Observations it fits, lens-type terms as a mapping or None):
    an R12 table with its lens-type terms, else ``calibrate`` (focused: in calibrate-raw's
    orientation, k_3 + k_4 > 0: the rays alone do not tell it from its point reflection)."""
    from lf_mpc_calib.calibration import calibrate
    progress = None if args.quiet else ProgressPrinter()
    terms = args.lens_type_terms
    if terms is not None and 'r12' not in extra and obs.lens_type is None:
        raise InvalidInputError('--lens-type-terms needs lens types: --format r12 (from the '
                                'micro-image indices) or a table with a lens_type column')
    if 'r12' in extra and (terms or 'affine-radial') != 'none':
        from lf_mpc_calib.calibration.lens_types import calibrate_r12
        r12 = calibrate_r12(extra['r12'], lens_type_terms=terms or 'affine-radial',
                            progress=progress, **options)
        return r12.result, r12.observations, r12.lens_types_dict()
    if terms is not None:
        options = dict(options, lens_type_terms=terms)
    result = calibrate(obs, progress=progress, **options)
    if camera_type == 'focused':
        from lf_mpc_calib.calibration.focused import orient_focused
        result = orient_focused(result)
    return result, obs, None if result.lens_types is None else result.lens_types.to_dict()


def _print_lens_types(result):
    """The lens-type terms with their sigmas and the RMS in raw pixels with them."""
    lt = result.lens_types
    print(f'lens-type terms ({lt.terms}, estimated with the model): scale '
          + ', '.join(f'{x:+.5f} ± {s:.5f}' for x, s in zip(lt.scale, lt.scale_std))
          + '; offset px '
          + ', '.join(f'({x:+.4f}, {y:+.4f}) ± ({sx:.4f}, {sy:.4f})'
                      for (x, y), (sx, sy) in zip(lt.offset_px, lt.offset_std_px))
          + ('' if not lt.terms.startswith('affine-radial') else '; radial (q1, q2) '
             + ', '.join(f'({q1:+.4f}, {q2:+.4f}) ± ({s1:.4f}, {s2:.4f})'
                         for (q1, q2), (s1, s2) in zip(lt.radial, lt.radial_std)))
          + ''.join(f'; type {t}' + lt.view_text(t) for t in range(lt.n_types)
                    if lt.view_text(t)))
    print(f'RMS reprojection error in raw pixels with lens-type terms: '
          f'{result.rms_reprojection_px:.6g} px')


def _hand_eye(args, obs, result, camera_type):
    """(HandEyeResult, its file mapping) with --robot-poses, else (None, None)."""
    if not args.robot_poses:
        return None, None
    from lf_mpc_calib.cli.calibrate_raw import print_joint_calibration, solve_hand_eye
    from lf_mpc_calib.io.robot_poses import read_robot_poses
    he, mapping = solve_hand_eye(args, obs, result, read_robot_poses(args.robot_poses),
                                 [str(int(p)) for p in result.pose_ids], sys.stdout,
                                 camera_type=camera_type)
    if he is not None and 'joint_calibration' in he.extras:
        print_joint_calibration(he, sys.stdout)
    return he, mapping


def _write_report(args, obs, result, he, jackknife, camera_type):
    """The --report folder: the calibration's plots, and the hand-eye's with an arm."""
    from lf_mpc_calib.report.calibration import write_report
    board = np.unique(obs.board, axis=0)
    paths = write_report(result, args.report, board=board,
                         title=f'{args.observations} ({camera_type})', jackknife=jackknife,
                         camera_type=camera_type)
    if he is not None:
        from lf_mpc_calib.cli.calibrate_raw import optical_hand_eye
        from lf_mpc_calib.report.hand_eye import write_hand_eye_report
        paths += write_hand_eye_report(optical_hand_eye(he, camera_type), args.report,
                                       board_points=board, calibration=result)
    print(f'wrote report: {", ".join(str(p) for p in paths)}')
