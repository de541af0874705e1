"""
The robot arm's part of pose planning: where the tool may go, what a capture tells of the mount.

- :class:`ArmConstraints`: a workspace box for the tool's origin and a tilt limit of the tool's
  axis from a direction, both in the robot's base frame, checked on the base -> tool pose
  that brings the camera (eye-in-hand) or the board (eye-to-hand) to a board pose in the
  optical frame (:meth:`ArmConstraints.tool_poses`, from G M C = B of
  :mod:`~lf_mpc_calib.calibration.hand_eye` with the mount and board pose known so far).
- :func:`joint_informations`: the Fisher information each capture adds to the joint hand-eye
  problem (mount, board pose, free intrinsics: the parameters of
  :class:`~lf_mpc_calib.calibration.hand_eye.HandEyeProblem`), from that problem's own
  Jacobian. The arm ties every capture's board pose to these 12 parameters, so no pose is
  eliminated: the informations add over captures.

Transforms: :mod:`lf_mpc_calib.camera.transforms` (T_a_b maps b coordinates to a).
"""

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from lf_mpc_calib.calibration.hand_eye import HandEyeProblem, check_setup
from lf_mpc_calib.calibration.refine import group_by_pose
from lf_mpc_calib.camera import transforms
from lf_mpc_calib.camera.model import PARAMETER_NAMES
from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import InvalidInputError

MOUNT_NAMES = tuple(f'{part}_{c}' for part in ('mount_w', 'mount_t', 'board_w', 'board_t')
                    for c in 'xyz')
"""The 12 arm parameters ahead of the free intrinsics (HandEyeProblem's order)."""


def _vector(value, name, size=3):
    v = np.asarray(value, float).reshape(-1)
    if v.shape != (size,) or not np.all(np.isfinite(v)):
        raise InvalidInputError(f'{name}: expected {size} finite numbers, got {value!r}')
    return v


@dataclass(frozen=True, eq=False)
class ArmConstraints:
    """
    Where the tool may go, in the robot's base frame (metres, degrees).

    setup: 'eye-in-hand' | 'eye-to-hand'; mount (w (3,), t (3,)): T_tool_optical
    (eye-in-hand) or T_base_optical (eye-to-hand), and board (w, t): T_base_board or
    T_tool_board: the estimates the tool poses are computed with (a solved hand-eye);
    workspace_box (6,) [x_min, y_min, z_min, x_max, y_max, z_max] of the tool's origin, or None;
    tool_axis (3,): the tool's axis in the tool frame (default its z); tilt_reference (3,): the
    base-frame direction it is measured from (default down, -z); max_tool_tilt_deg: the
    largest angle allowed between them (180: no limit).
    """

    setup: str
    mount: tuple
    board: tuple
    workspace_box: tuple = None
    tool_axis: tuple = (0.0, 0.0, 1.0)
    tilt_reference: tuple = (0.0, 0.0, -1.0)
    max_tool_tilt_deg: float = 180.0

    def __post_init__(self):
        check_setup(self.setup)
        for name in ('mount', 'board'):
            w, t = getattr(self, name)
            object.__setattr__(self, name, (_vector(w, f'{name} rotation vector'),
                                            _vector(t, f'{name} translation')))
        if self.workspace_box is not None:
            box = _vector(self.workspace_box, 'workspace_box', 6)
            if not np.all(box[:3] < box[3:]):
                raise InvalidInputError(f'workspace_box: expected [x_min, y_min, z_min, x_max, '
                                        f'y_max, z_max] with each min < max, got {box.tolist()}')
            object.__setattr__(self, 'workspace_box', box)
        for name in ('tool_axis', 'tilt_reference'):
            v = _vector(getattr(self, name), name)
            if not np.linalg.norm(v) > 0:
                raise InvalidInputError(f'{name}: expected a non-zero direction, got {v}')
            object.__setattr__(self, name, v / np.linalg.norm(v))
        if not 0.0 < self.max_tool_tilt_deg <= 180.0:
            raise InvalidInputError(f'max_tool_tilt_deg: expected 0-180, got '
                                    f'{self.max_tool_tilt_deg}')

    def chains(self, rotation_vectors, translations):
        """G (w (P, 3), t (P, 3)) of board -> optical poses (P, 3): T_base_tool (eye-in-hand)
        or T_tool_base (eye-to-hand), the hand-eye problem's robot chain, G = B C^-1 M^-1."""
        c = (np.asarray(rotation_vectors, float).reshape(-1, 3),
             np.asarray(translations, float).reshape(-1, 3))
        return transforms.compose(transforms.compose(self.board, transforms.invert(c)),
                                  transforms.invert(self.mount))

    def tool_poses(self, rotation_vectors, translations):
        """Base -> tool poses (w (P, 3), t (P, 3)) that put the board at these optical poses."""
        g = self.chains(rotation_vectors, translations)
        return g if self.setup == 'eye-in-hand' else transforms.invert(g)

    def tool_tilt_deg(self, tool_rotation_vectors):
        """(P,) angle of the tool's axis from tilt_reference, degrees."""
        axis = Rotation.from_rotvec(np.asarray(tool_rotation_vectors, float).reshape(-1, 3)) \
            .apply(self.tool_axis)
        return np.degrees(np.arccos(np.clip(axis @ self.tilt_reference, -1.0, 1.0)))

    def violations(self, tool_rotation_vectors, tool_translations):
        """(outside the workspace box (P,) bool, tilt over the limit (P,) bool)."""
        t = np.asarray(tool_translations, float).reshape(-1, 3)
        if self.workspace_box is None:
            outside = np.zeros(len(t), bool)
        else:
            outside = np.any((t < self.workspace_box[:3]) | (t > self.workspace_box[3:]),
                             axis=1)
        tilted = self.tool_tilt_deg(tool_rotation_vectors) > self.max_tool_tilt_deg
        return outside, tilted

    def describe(self):
        """One line: the limits."""
        box = ('no workspace box' if self.workspace_box is None else
               'workspace box [' + ', '.join(f'{v:g}' for v in self.workspace_box) + '] m')
        return (f'{box}, tool axis within {self.max_tool_tilt_deg:g} deg of '
                f'{np.round(self.tilt_reference, 3).tolist()} (base frame)')


def joint_informations(model, rows, chains, mount, board, *, fix=()):
    """
    Unit-noise information (P, n, n) of each capture in the joint hand-eye problem, n = 12 +
    the free intrinsics: (names (n,), informations). rows: P Observations (one capture
    each); chains: G (w (P, 3), t (P, 3)) of the captures (hand-eye order); mount, board
    (w, t): where the Jacobian is evaluated; fix: intrinsics held.
    """
    free = np.array([n not in fix for n in PARAMETER_NAMES])
    obs = Observations.concatenate([Observations(np.full(len(o), k), o.point, o.board, o.ijuv)
                                    for k, o in enumerate(rows)])
    problem = HandEyeProblem(obs, model, chains, free, grouped=group_by_pose(obs))
    x = np.concatenate([mount[0], mount[1], board[0], board[1],
                        model.to_vector()[problem.free_idx]])
    _, jac = problem.evaluate(x)
    pose = problem.pb.pose_index
    n = problem.n_params
    out = np.zeros((len(rows), n, n))
    for p in range(len(rows)):
        j = jac[:, pose == p].reshape(-1, n)
        out[p] = j.T @ j
    names = MOUNT_NAMES + tuple(n for n, f in zip(PARAMETER_NAMES, free) if f)
    return names, out
