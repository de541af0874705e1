"""
``lf-mpc-calib verify``: measure held-out captures with a calibration file; exit 0 when it
passes, 1 when it does not.

    lf-mpc-calib verify CAL DATASET [--report DIR] [--robot-poses FILE]
        [--robot-accuracy MM]

DATASET: a raw data set folder (as ``simulate -o`` writes; decoded with the calibration's
lenslet grid and views) or an observation table (CSV). The observation table written beside
the calibration (``<name>_observations.csv``) tells the captures it used (counted apart) and
its board. Nothing is written but the report.
"""

from pathlib import Path
import sys

from lf_mpc_calib.cli.numbers import real


def register(subparsers):
    """Add the ``verify`` subcommand."""
    p = subparsers.add_parser(
        'verify', help='measure held-out captures with a calibration: passes or not',
        description='Fit the board pose of every capture with the calibration held, '
                    'triangulate its corners, and compare the RMS, square size, flatness '
                    'and (with arm poses) the board\'s spread in the base frame with what the '
                    'calibration predicts. Exit code 0: passes, 1: does not.')
    p.add_argument('calibration', help='calibration file (YAML)')
    p.add_argument('dataset', help='raw data set folder, or an observation table (CSV)')
    p.add_argument('--report', metavar='DIR', default=None,
                   help='write summary.txt, verification.yaml and plots into DIR')
    p.add_argument('--robot-poses', metavar='FILE', default=None,
                   help='robot poses base -> tool per frame (CSV or YAML; default: the data '
                        'set manifest\'s); with the calibration\'s hand_eye key they give the '
                        'board\'s spread in the base frame')
    p.add_argument('--robot-accuracy', type=real(0, 1000), default=None, metavar='MM',
                   help='RMS accuracy of the robot poses in mm, added to the predicted spread '
                        '(default: 0.1)')
    p.add_argument('--quiet', action='store_true', help='no progress per frame')
    p.set_defaults(func=run)


def implied_inputs(args):
    """The calibration's observation table beside it, read (never written)."""
    from lf_mpc_calib.io.observation_table import observations_path
    return [('the observation table beside the calibration',
             observations_path(args.calibration))]


def run(args):
    """Run verify; returns 0 (passes) or 1 (does not)."""
    from lf_mpc_calib.calibration.verification import ROBOT_ACCURACY_MM
    from lf_mpc_calib.io.calibration_file import load_calibration
    from lf_mpc_calib.pipeline.verification import arm_of, verify_calibration
    out = sys.stdout
    _check_report(args)
    cal = load_calibration(args.calibration)
    calibration_obs = _calibration_table(args.calibration)
    obs, frames, robot, indices = _held_out(args, cal, out)
    arm = arm_of(cal, robot, frames, obs.pose_ids, indices)
    accuracy = ROBOT_ACCURACY_MM if args.robot_accuracy is None else args.robot_accuracy
    v = verify_calibration(cal, obs, calibration_obs=calibration_obs, arm=arm,
                           robot_accuracy_mm=accuracy)
    header = [f'calibration {args.calibration} ({cal.camera_type}, RMS '
              f'{cal.errors["rms_reprojection_px"]:.4f} px, parameter spread from its '
              f'{v.covariance_source}); held out: {args.dataset}']
    if calibration_obs is None:
        header.append('no observation table beside the calibration: captures it used are '
                      'found by their poses only')
    if cal.hand_eye is not None and arm is None:
        header.append('the calibration has a hand-eye mount but the data set no robot poses: '
                      'no base-frame figure')
    for line in header + v.summary():
        print(line, file=out)
    if args.report:
        from lf_mpc_calib.report.verification import write_verification_report
        written = write_verification_report(v, args.report, title=Path(args.dataset).name,
                                            header=header)
        print(f'wrote report into {args.report} ({len(written)} files)', file=out)
    return 0 if v.passed else 1


def _check_report(args):
    """UsageError for a --report inside the data set folder: verify never writes into it."""
    import os
    from lf_mpc_calib.errors import UsageError
    folder = Path(args.dataset)
    if args.report and folder.is_dir():
        report, data = os.path.realpath(args.report), os.path.realpath(folder)
        if report == data or report.startswith(data.rstrip(os.sep) + os.sep):
            raise UsageError(f'--report {args.report} is inside the data set {args.dataset}; '
                             'write the report elsewhere (verify never writes into a data set)')


def _calibration_table(path):
    """The observation table beside the calibration file, or None."""
    from lf_mpc_calib.io.observation_table import observations_path, read_observations
    table = observations_path(path)
    return read_observations(table) if Path(table).is_file() else None


def _held_out(args, cal, out):
    """(Observations, frame names per pose id, RobotPoses or None, the frames' indices in the
    data set or None) of the data set."""
    from lf_mpc_calib.io.robot_poses import read_robot_poses
    path = Path(args.dataset)
    if path.is_file():
        from lf_mpc_calib.io.observation_table import read_observations
        obs = read_observations(path)
        robot = read_robot_poses(args.robot_poses) if args.robot_poses else None
        return obs, [str(int(p)) for p in obs.pose_ids], robot, None
    from lf_mpc_calib.pipeline.hand_eye import robot_poses_for_dataset
    from lf_mpc_calib.pipeline.offline import load_raw_dataset
    from lf_mpc_calib.pipeline.verification import raw_observations
    dataset = load_raw_dataset(path)

    def progress(k, total, frame, message):
        if not args.quiet:
            print(f'[{k + 1}/{total}] {frame.name}: {message}',
                  file=sys.stderr if message.startswith('skipped') else out, flush=True)
    obs, frames, _ = raw_observations(dataset, cal, progress)
    order = {str(p): k for k, p in enumerate(dataset.frames)}
    return (obs, frames, robot_poses_for_dataset(path, args.robot_poses),
            [order[str(f)] for f in frames])
