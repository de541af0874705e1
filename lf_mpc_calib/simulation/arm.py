"""
A simulated robot arm carrying the light-field camera (eye-in-hand) or the board (eye-to-hand).

The mount (T_tool_optical, or T_base_optical for eye-to-hand) and the board's pose (T_base_board,
or T_tool_board) are known only to the :class:`ArmSetup`; the arm is driven to robot poses
(base -> tool) that put the board at chosen board -> optical poses (so every capture sees the
board), and the simulators render what the camera sees there:

- :func:`arm_scene`: observation tables (fast; :mod:`lf_mpc_calib.simulation.observations`);
- :func:`write_arm_dataset`: raw frames (:mod:`lf_mpc_calib.simulation.dataset`) with the robot
  pose of every frame in the manifest (key ``robot_poses``, and ``arm`` with the set-up and
  frame names) and the ``hand_eye`` key in ``ground_truth.yaml``.

Transforms: :mod:`lf_mpc_calib.camera.transforms` (T_a_b maps b coordinates to a).
"""

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

from lf_mpc_calib.io.atomic import write_text_atomically
from lf_mpc_calib.calibration.closed_form import aligned_truth
from lf_mpc_calib.calibration.hand_eye import check_setup, hand_eye_dict, mount_frames
from lf_mpc_calib.camera import transforms
from lf_mpc_calib.camera.rotations import rotation_matrix, rotation_vector
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.yaml_file import read_yaml

DEFAULT_BASE_FRAME = 'base_link'
DEFAULT_TOOL_FRAME = 'tool0'
#: manifest keys added by :func:`write_arm_dataset`
ARM_KEY = 'arm'
ROBOT_POSES_KEY = 'robot_poses'


@dataclass(frozen=True, eq=False)
class ArmSetup:
    """
    The ground truth of an arm set-up.

    setup: 'eye-in-hand' | 'eye-to-hand'; mount (w (3,), t (3,)): T_tool_optical (eye-in-hand)
    or T_base_optical (eye-to-hand); board (w, t): T_base_board (eye-in-hand) or T_tool_board
    (eye-to-hand); base_frame, tool_frame: TF frame names.
    """

    setup: str
    mount: tuple
    board: tuple
    base_frame: str = DEFAULT_BASE_FRAME
    tool_frame: str = DEFAULT_TOOL_FRAME

    def __post_init__(self):
        check_setup(self.setup)
        for name in ('mount', 'board'):
            w, t = getattr(self, name)
            w = np.asarray(w, float).reshape(3)
            t = np.asarray(t, float).reshape(3)
            if not (np.all(np.isfinite(w)) and np.all(np.isfinite(t))):
                raise InvalidInputError(f'{name} must be finite, got {w}, {t}')
            object.__setattr__(self, name, (w, t))

    def _chain(self, robot):
        return robot if self.setup == 'eye-in-hand' else transforms.invert(robot)

    def robot_poses(self, board_rvecs, board_tvecs):
        """Base -> tool poses (w (P, 3), t (P, 3)) that put the board at these optical poses."""
        c = (np.asarray(board_rvecs, float).reshape(-1, 3),
             np.asarray(board_tvecs, float).reshape(-1, 3))
        g = transforms.compose(transforms.compose(self.board, transforms.invert(c)),
                               transforms.invert(self.mount))
        return self._chain(g)

    def board_poses(self, robot_rvecs, robot_tvecs):
        """Board -> optical poses (w (P, 3), t (P, 3)) at these base -> tool poses."""
        g = self._chain((np.asarray(robot_rvecs, float).reshape(-1, 3),
                         np.asarray(robot_tvecs, float).reshape(-1, 3)))
        return transforms.compose(transforms.compose(transforms.invert(self.mount),
                                                     transforms.invert(g)), self.board)

    def truth_dict(self, optical_frame='camera_optical_frame'):
        """The ``hand_eye`` mapping of the ground truth (no stddev)."""
        parent, board_parent = mount_frames(self.setup, base_frame=self.base_frame,
                                            tool_frame=self.tool_frame)
        return hand_eye_dict(self.setup, self.mount, parent_frame=parent,
                             child_frame=optical_frame, board=self.board,
                             board_parent_frame=board_parent)

    def in_optical_frame(self, frame):
        """This set-up with its mount parent -> the optical frame ``frame`` (an
        :class:`~lf_mpc_calib.camera.optical_frame.OpticalFrame` of the truth model in the
        frame of :attr:`mount`: a focused camera's main lens, not the MPC frame's origin)."""
        return replace(self, mount=frame.mount(*self.mount))

    def in_calibrated_frame(self, truth_model, estimated_model):
        """
        This set-up with the optical frame of a calibration (``estimated_model``).

        A planar board leaves the signs of the camera axes to convention
        (:func:`lf_mpc_calib.calibration.closed_form.sign_change`); the calibrated frame is
        diag(s) of the truth's. Raises InvalidInputError when diag(s) is a reflection (no
        rigid mount relates the two frames).
        """
        _, _, s = aligned_truth(truth_model, estimated_model, np.eye(3)[None], np.ones((1, 3)))
        s = s[0]                                      # X_calibrated = diag(s) X_truth
        if np.prod(s) < 0:
            raise InvalidInputError(
                f'the calibrated camera frame is a reflection diag({s.tolist()}) of the truth\'s')
        rm = rotation_matrix(self.mount[0]) @ np.diag(s)
        return ArmSetup(self.setup, (rotation_vector(rm), self.mount[1]), self.board,
                        self.base_frame, self.tool_frame)


def default_arm(setup, *, distance=0.4, base_frame=DEFAULT_BASE_FRAME,
                tool_frame=DEFAULT_TOOL_FRAME):
    """
    A plausible set-up: the camera ~8 cm off the flange, turned (eye-in-hand), or fixed above
    the workspace ``distance`` from the board held 5 cm beyond the flange (eye-to-hand).
    """
    if check_setup(setup) == 'eye-in-hand':
        mount = (np.array([0.12, -0.25, 1.4]), np.array([0.035, -0.048, 0.082]))
        board = (np.array([2.9, 0.35, -0.2]), np.array([0.62, 0.11, 0.04]))
    else:
        mount = (np.array([2.8, 0.9, 0.3]), np.array([0.55, -0.35, 0.95]))
        board = (np.array([0.2, -0.15, 0.6]), np.array([0.012, -0.02, 0.05]))
    return ArmSetup(setup, mount, board, base_frame, tool_frame)


@dataclass(frozen=True, eq=False)
class ArmScene:
    """
    One simulated arm session at observation level.

    model: the true MPCModel; arm: ArmSetup; board (M, 3) board points; views (V, 2);
    robot_rvecs, robot_tvecs (P, 3) base -> tool; board_rvecs, board_tvecs (P, 3)
    board -> optical; obs: Observations (pose p = capture p).
    """

    model: object
    arm: ArmSetup
    board: np.ndarray
    views: np.ndarray
    robot_rvecs: np.ndarray
    robot_tvecs: np.ndarray
    board_rvecs: np.ndarray
    board_tvecs: np.ndarray
    obs: object


def arm_scene(setup, *, n_captures=8, noise_px=0.1, rng, model=None, arm=None, board=None,
              views=None, distance=None, max_angle_deg=30.0, image_size=None):
    """
    Simulate an arm session: random board views (tilts up to ``max_angle_deg`` about x, y, z),
    the robot poses that produce them, and the observation table with ``noise_px`` noise.

    Defaults: the paper camera, its 12 x 12 board at its distance and 7 x 7 views
    (:mod:`lf_mpc_calib.simulation.observations`); arm: :func:`default_arm`.
    """
    from lf_mpc_calib.simulation import observations as sim
    model = sim.paper_camera() if model is None else model
    board = sim.board_points() if board is None else np.asarray(board, float)
    views = sim.view_grid(7) if views is None else np.asarray(views, float)
    distance = sim.PAPER_DISTANCE_M if distance is None else float(distance)
    arm = default_arm(setup) if arm is None else arm
    if arm.setup != setup:
        raise InvalidInputError(f'arm is {arm.setup}, asked for {setup}')
    offset = 0.1 * float(np.ptp(board[:, 0]))
    rv, tv = sim.random_poses(n_captures, rng=rng, board=board, max_angle_deg=max_angle_deg,
                              distance=distance, max_offset=offset)
    robot = arm.robot_poses(rv, tv)
    obs = sim.simulate_observations(model, rv, tv, board, views, noise_px=noise_px, rng=rng,
                                    image_size=image_size)
    return ArmScene(model, arm, board, views, robot[0], robot[1], rv, tv, obs)


def write_arm_dataset(directory, camera, board, arm, board_rvecs, board_tvecs, **options):
    """
    Render a raw dataset (:func:`lf_mpc_calib.simulation.dataset.write_dataset`, ``options``
    are its keyword arguments) of an arm session; returns the manifest path.

    board_rvecs, board_tvecs (P, 3): board -> optical poses of the captures; the robot poses
    follow from ``arm``. Adds to the manifest ``arm: {setup, base_frame, tool_frame}`` and
    ``robot_poses: [{frame, rotation_vector, translation_m}]`` (base -> tool, one per frame),
    and to ``ground_truth.yaml`` the ``hand_eye`` mapping (:meth:`ArmSetup.truth_dict`).
    """
    from lf_mpc_calib.io.calibration_file import load_calibration, save_calibration
    from lf_mpc_calib.simulation.dataset import GROUND_TRUTH, write_dataset
    import dataclasses
    path = write_dataset(directory, camera, board, board_rvecs, board_tvecs, **options)
    rv, tv = arm.robot_poses(board_rvecs, board_tvecs)
    manifest = read_yaml(path, 'manifest')
    manifest[ARM_KEY] = {'setup': arm.setup, 'base_frame': arm.base_frame,
                         'tool_frame': arm.tool_frame}
    manifest[ROBOT_POSES_KEY] = [
        {'frame': str(name), 'rotation_vector': [float(x) for x in r],
         'translation_m': [float(x) for x in t]}
        for name, r, t in zip(manifest['frames'], rv, tv)]
    write_text_atomically(path, yaml.safe_dump(manifest, sort_keys=False, default_flow_style=None))
    gt_path = Path(path).parent / GROUND_TRUTH
    truth = load_calibration(gt_path)
    truth = dataclasses.replace(truth, hand_eye=arm.truth_dict(truth.frames['optical']))
    save_calibration(gt_path, truth)
    return path
