"""
The observation table in memory: one row per ray, the interchange format between feature
detection and calibration (read and written as CSV by :mod:`lf_mpc_calib.io.observation_table`).

Columns ``pose,point,X,Y,Z,i,j,u,v`` — pose index, board point index, the board point in the board
frame in metres (Z = 0 for a planar board) and the indexed pixel (i, j, u, v) in the
convention of :mod:`lf_mpc_calib.camera.model` (conventional: view index from the central
view and pixel in that view; focused: absolute micro-image centre and raw pixel relative to it).
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.camera.model import as_points
from lf_mpc_calib.errors import InvalidInputError

COLUMNS = ('pose', 'point', 'X', 'Y', 'Z', 'i', 'j', 'u', 'v')
CAMERA_TYPES = ('conventional', 'focused')


def guess_camera_type(obs):
    """Return 'conventional' if (i, j) are integers spanning < 100 values, else 'focused'."""
    if not len(obs):
        return 'focused'
    for ij in (obs.ijuv[:, 0], obs.ijuv[:, 1]):   # column by column: np.ptp(axis=0) is slow
        if not (ij.max() - ij.min() < 100 and np.all(ij == np.round(ij))):
            return 'focused'
    return 'conventional'


@dataclass(frozen=True, eq=False)
class Observations:
    """
    Rays observed of known board points.

    pose (N,) int, point (N,) int, board (N, 3) float metres, ijuv (N, 4) float;
    lens_type (N,) int >= 0 or None: the micro-lens type of each ray's micro-image (focused
    multi-focus cameras; :mod:`lf_mpc_calib.calibration.type_terms`).
    """

    pose: np.ndarray
    point: np.ndarray
    board: np.ndarray
    ijuv: np.ndarray
    lens_type: np.ndarray = None

    def __post_init__(self):
        board = as_points(self.board, 'board', 3)
        ijuv = as_points(self.ijuv, 'ijuv', 4)
        n = board.shape[0]
        pose = np.asarray(self.pose)
        point = np.asarray(self.point)
        for name, arr in (('pose', pose), ('point', point)):
            if arr.shape != (n,):
                raise InvalidInputError(f'{name} must have shape ({n},), got {arr.shape}')
            if arr.dtype.kind in 'iu':
                continue                    # whole and finite by type
            if arr.size and not np.all(np.isfinite(arr.astype(float))):
                raise InvalidInputError(f'{name} contains NaN or inf')
            if arr.size and np.any(arr.astype(float) != np.round(arr.astype(float))):
                raise InvalidInputError(f'{name} must hold integers')
        if ijuv.shape[0] != n:
            raise InvalidInputError(
                f'ijuv must have {n} rows like board, got {ijuv.shape[0]}')
        object.__setattr__(self, 'board', board)
        object.__setattr__(self, 'ijuv', ijuv)
        object.__setattr__(self, 'pose', pose.astype(np.int64))
        object.__setattr__(self, 'point', point.astype(np.int64))
        if self.lens_type is not None:
            lt = np.asarray(self.lens_type)
            if lt.shape != (n,):
                raise InvalidInputError(f'lens_type must have shape ({n},), got {lt.shape}')
            ltf = lt.astype(float)
            if lt.size and not (np.all(np.isfinite(ltf)) and np.all(ltf == np.round(ltf))
                                and ltf.min() >= 0):
                raise InvalidInputError('lens_type must hold integers >= 0')
            object.__setattr__(self, 'lens_type', lt.astype(np.int64))

    def __len__(self):
        return self.board.shape[0]

    @property
    def pose_ids(self):
        """Sorted distinct pose indices (P,)."""
        # by sorting: np.unique without return_* imports numpy.ma (~5 ms of a CLI run)
        pose = np.sort(self.pose)
        first = np.ones(len(pose), dtype=bool)
        first[1:] = pose[1:] != pose[:-1]
        return pose[first]

    def select(self, mask):
        """Return the rows where ``mask`` (N,) bool (or an index array) holds."""
        return Observations(self.pose[mask], self.point[mask], self.board[mask], self.ijuv[mask],
                            None if self.lens_type is None else self.lens_type[mask])

    @classmethod
    def concatenate(cls, parts):
        """Stack several tables (same convention) into one (lens types: all or none)."""
        parts = list(parts)
        if not parts:
            raise InvalidInputError('need at least one observation table to concatenate')
        typed = [p.lens_type is not None for p in parts]
        if any(typed) and not all(typed):
            raise InvalidInputError('cannot concatenate tables with and without lens types')
        return cls(np.concatenate([p.pose for p in parts]),
                   np.concatenate([p.point for p in parts]),
                   np.concatenate([p.board for p in parts]),
                   np.concatenate([p.ijuv for p in parts]),
                   np.concatenate([p.lens_type for p in parts]) if all(typed) else None)
