"""
Hand-eye calibration after an offline calibration: match robot poses to captures, solve.

    robot = read_robot_poses('robot.csv')                 # or from the dataset's manifest
    he = hand_eye_for_frames(run.observations, run.result, robot, run.pose_frames,
                             setup='eye-in-hand')
    write_outputs(run, 'calibration.yaml', hand_eye=hand_eye_mapping(he, robot),
                  hand_eye_result=he)          # saves he's joint calibration
"""

from pathlib import Path

import numpy as np

from lf_mpc_calib.calibration.hand_eye import calibrate_hand_eye, SETUPS
from lf_mpc_calib.calibration.hand_eye_joint import attach_joint_calibration, \
    refines_intrinsics
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.calibration_file import default_frames
from lf_mpc_calib.io.robot_poses import read_robot_poses, robot_poses_from_mapping

DEFAULT_BASE_FRAME = 'base_link'
DEFAULT_TOOL_FRAME = 'tool0'


def robot_poses_for_dataset(folder, path=None):
    """
    Robot poses given by ``path`` (CSV / YAML), else those in ``folder``'s manifest.yaml, else
    None.
    """
    if path is not None:
        return read_robot_poses(path)
    manifest = Path(folder) / 'manifest.yaml'
    if Path(folder).is_dir() and manifest.is_file():
        from lf_mpc_calib.io.yaml_file import read_yaml
        doc = read_yaml(manifest, 'manifest')
        if isinstance(doc, dict) and 'robot_poses' in doc:
            return robot_poses_from_mapping(doc, str(manifest))
    return None


def resolve_setup(setup, robot):
    """The set-up asked for, else the robot poses' (a manifest's), else 'eye-in-hand'."""
    setup = setup or robot.setup or 'eye-in-hand'
    if setup not in SETUPS:
        raise InvalidInputError(f'hand-eye set-up must be one of {SETUPS}, got {setup!r}')
    if robot.setup is not None and robot.setup != setup:
        raise InvalidInputError(
            f'the robot poses were recorded {robot.setup}, but {setup} was asked for')
    return setup


def hand_eye_for_frames(obs, result, robot, frames, *, setup=None, frame_indices=None,
                        **options):
    """
    Solve the hand-eye calibration of a calibrated observation table.

    result: its CalibrationResult; robot: RobotPoses; frames: one name (str or Path) per pose
    id of ``result`` in pose-id order (``run.pose_frames``; for an observation table the pose
    ids themselves). Captures without a robot pose are left out (their number is in
    ``extras['captures_without_robot_pose']``). ``options``: of
    :func:`~lf_mpc_calib.calibration.hand_eye.calibrate_hand_eye`. With the intrinsics refined
    (the default, unless ``result`` has lens-type terms) ``extras['joint_calibration']`` is
    the calibration to save beside the mount and ``extras['intrinsics_shift']`` how far it
    moved from ``result`` (:func:`~lf_mpc_calib.calibration.hand_eye_joint.
    attach_joint_calibration`).
    """
    setup = resolve_setup(setup, robot)
    ids = np.asarray(result.pose_ids)
    if len(frames) != len(ids):
        raise InvalidInputError(f'{len(frames)} frame names for {len(ids)} calibrated poses')
    idx, rv, tv = robot.match(frames, frame_indices)
    if len(idx) == 0:
        raise InvalidInputError(
            f'none of the robot poses ({", ".join(robot.frames[:5])}'
            f'{", ..." if len(robot.frames) > 5 else ""}) names a calibrated frame '
            f'({", ".join(Path(str(f)).name for f in frames[:5])}'
            f'{", ..." if len(frames) > 5 else ""})')
    options = dict({'refine_intrinsics': refines_intrinsics(result)}, **options)
    he = calibrate_hand_eye(obs, result, rv, tv, setup=setup, robot_pose_ids=ids[idx],
                            **options)
    attach_joint_calibration(he, obs, result)
    he.extras['captures_without_robot_pose'] = [str(frames[k]) for k in range(len(frames))
                                                if k not in set(idx.tolist())]
    he.extras['frames'] = [str(frames[k]) for k in idx]
    return he


def hand_eye_mapping(he, robot=None, *, base_frame=None, tool_frame=None, camera='camera'):
    """The calibration file's ``hand_eye`` mapping of ``he`` with the frame names resolved."""
    base = base_frame or (robot.base_frame if robot is not None else None) or DEFAULT_BASE_FRAME
    tool = tool_frame or (robot.tool_frame if robot is not None else None) or DEFAULT_TOOL_FRAME
    return he.to_dict(base_frame=base, tool_frame=tool,
                      optical_frame=default_frames(camera)['optical'])
