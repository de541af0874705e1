"""
The optical frame every output is given in, and the map into it from the model's frame.

The calibration model (:mod:`lf_mpc_calib.camera.model`) works in its MPC frame: a ray passes
(s, t, 0) with direction (x, y, 1). Users are given the camera's optical frame
``<camera>_optical_frame`` instead (x right, y down, z forward, metres, REP 103): the points
and clouds the decode node publishes, the board poses and mount the calibration node publishes,
the poses and mount of the calibration file, the reports and the logs. The two frames have the
same axes; only the origin differs:

- **conventional** camera: the same frame; its origin is the centre of the view plane, the
  main-lens plane, so every board in front of the camera has z > 0.
- **focused** camera: the MPC frame's origin is in the plane conjugate to the micro-lens array
  (1/k_3 in front of the main lens), where a board nearer than that plane would have z < 0.
  The optical frame's origin is the main lens' centre instead,
  C = (-u_0 / k_3, -v_0 / k_4, -(1 / k_3 + 1 / k_4) / 2) in the MPC frame (the point every
  micro-image's central ray passes, NOTES §3; C_z from the mean of 1/k_3 and 1/k_4, as the
  rendered image's pinhole, :func:`lf_mpc_calib.measurement.focused.rendered_pinhole`). Then
  z is the distance from the main lens along the axis and a board in front of the camera has
  z > 0 (with the k_3 + k_4 > 0 orientation, :mod:`lf_mpc_calib.calibration.focused`).

X_optical = X_mpc - C: points subtract C, board poses (board -> camera) have t - C, and a mount
(parent -> camera, X_parent = R X_camera + t) has t + R C. :class:`OpticalFrame` applies each
map in one place; the calibration keeps its own frame.
"""

from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.errors import InvalidInputError


def optical_origin(model, camera_type):
    """
    The optical frame's origin (3,) m in ``model``'s MPC frame: zeros for a conventional
    camera, the main lens' centre C (module docstring) for a focused one. A focused model
    with k_3 or k_4 = 0 has its main lens at infinity (no camera: such models occur only as
    test fixtures): its origin stays the MPC frame's (zeros).

    Raises InvalidInputError for another camera type.
    """
    if camera_type == 'conventional':
        return np.zeros(3)
    if camera_type != 'focused':
        raise InvalidInputError(f"camera_type must be 'conventional' or 'focused', got "
                                f'{camera_type!r}')
    k3, k4 = float(model.k_3), float(model.k_4)
    if k3 == 0.0 or k4 == 0.0:
        return np.zeros(3)
    return np.array([-model.u_0 / k3, -model.v_0 / k4, -0.5 * (1.0 / k3 + 1.0 / k4)])


def _vectors(a, name):
    v = np.asarray(a, dtype=float)
    if v.shape[-1:] != (3,):
        raise InvalidInputError(f'{name} must have shape (N, 3) or (3,), got {v.shape}')
    return v


@dataclass(frozen=True, eq=False)
class OpticalFrame:
    """
    The optical frame of one calibration: ``origin`` (3,) m, where it lies in the model's MPC
    frame (:func:`optical_origin`). Each method maps one kind of quantity from the model's
    frame to the optical frame (``to_model=True``: back); shapes are kept ((3,) or (N, 3)).
    """

    origin: np.ndarray

    @classmethod
    def of(cls, model, camera_type):
        """The optical frame of ``model`` (MPCModel) of ``camera_type``."""
        return cls(optical_origin(model, camera_type))

    @property
    def is_identity(self):
        """True when the two frames coincide (a conventional camera)."""
        return not np.any(self.origin)

    def points(self, points, *, to_model=False):
        """Points (N, 3) or (3,) m: X - C (to_model: X + C)."""
        p = _vectors(points, 'points')
        return p + self.origin if to_model else p - self.origin

    def depths(self, z, *, to_model=False):
        """Depths Z m (a number or any shape: board-centre depths, depth ranges, focus bands):
        Z - C_z (to_model: Z + C_z). Returns a float for a number, else an ndarray."""
        out = np.asarray(z, dtype=float) + (self.origin[2] if to_model else -self.origin[2])
        return float(out) if out.ndim == 0 else out

    def poses(self, rotation_vectors, translations, *, to_model=False):
        """Board -> camera poses (rotation vectors, translations (P, 3)): (w, t - C)."""
        return (np.array(rotation_vectors, dtype=float),
                self.points(translations, to_model=to_model))

    def mount(self, rotation_vector, translation, *, to_model=False):
        """A parent -> camera transform (w (3,) or (P, 3), t): (w, t + R C) (to_model:
        t - R C), so X_parent = R X_optical + t' for the same parent point."""
        w = _vectors(rotation_vector, 'rotation_vector')
        t = _vectors(translation, 'translation')
        from scipy.spatial.transform import Rotation   # not at import: the CLI's parser
        shift = Rotation.from_rotvec(w.reshape(-1, 3)).apply(self.origin).reshape(t.shape)
        return np.array(w), (t - shift if to_model else t + shift)

    def hand_eye(self, hand_eye, *, to_model=False):
        """A calibration file's ``hand_eye`` mapping with its mount (parent -> camera) mapped
        (:meth:`mount`); the board's pose in the base or tool frame and the sigmas as they are
        (the origin's own uncertainty is not added). None stays None."""
        if hand_eye is None or self.is_identity:
            return hand_eye
        w, t = self.mount(hand_eye['rotation_vector'], hand_eye['translation_m'],
                          to_model=to_model)
        return {**hand_eye, 'translation_m': [float(x) for x in t]}
