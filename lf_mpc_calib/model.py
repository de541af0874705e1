"""
The multi-projection-center (MPC) camera model.

Conventions (see ``shared/paper/NOTES.md`` §1 and the README):

- Indexed pixels ``ijuv`` (N, 4). Conventional cameras: (i, j) is the sub-aperture view index
  counted from the central view (so the central view is (0, 0)), i along the image columns,
  j along the rows; (u, v) is the pixel in that view (x right, y down, integer = pixel centre).
  Focused cameras: (i, j) is the micro-image centre in raw pixels (absolute), (u, v) the raw
  pixel *relative* to that centre.
- Decoding (Eq. 11): s = k_i i, t = k_j j, x = k_u u + u_0, y = k_v v + v_0 gives the
  *measured* ray (s, t, x, y); Eq. 18 maps it to the undistorted ray
  x^u = (1 + k_1 r^2 + k_2 r^4) x + k_3 s, y^u = (1 + k_1 r^2 + k_2 r^4) y + k_4 t, r^2 = x^2 + y^2.
- A ray (s, t, x, y) passes (s, t, 0) with direction (x, y, 1) in the camera frame
  (x right, y down, z forward): X = s + x Z, Y = t + y Z.
- Parameter order of ``to_vector``: PARAMETER_NAMES.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.errors import InvalidInputError

INTRINSIC_NAMES = ('k_i', 'k_j', 'k_u', 'k_v', 'u_0', 'v_0')
DISTORTION_NAMES = ('k_1', 'k_2', 'k_3', 'k_4')
PARAMETER_NAMES = INTRINSIC_NAMES + DISTORTION_NAMES


def as_points(array, name, columns):
    """
    Return ``array`` as a finite float (N, columns) ndarray or raise InvalidInputError.

    A single row of shape (columns,) is promoted to (1, columns).
    """
    a = np.asarray(array, dtype=float)
    if a.ndim == 1 and a.shape[0] == columns:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] != columns:
        raise InvalidInputError(
            f'{name} must have shape (N, {columns}), got {np.shape(array)}')
    if not np.all(np.isfinite(a)):
        bad = int(np.count_nonzero(~np.isfinite(a).all(axis=1)))
        raise InvalidInputError(f'{name} contains NaN or inf in {bad} row(s)')
    return a


@dataclass(frozen=True, eq=False)
class MPCModel:
    """
    The six MPC intrinsics and the four distortion terms of Eq. 18.

    Units: k_i, k_j in metres per view step (conventional) or per raw pixel (focused);
    k_u, k_v per pixel; u_0, v_0, k_3, k_4 unitless per metre of view plane (k_3 s is
    added to x); k_1, k_2 radial terms on the normalised image plane.
    """

    k_i: float
    k_j: float
    k_u: float
    k_v: float
    u_0: float
    v_0: float
    k_1: float = 0.0
    k_2: float = 0.0
    k_3: float = 0.0
    k_4: float = 0.0

    def __post_init__(self):
        for name in PARAMETER_NAMES:
            value = getattr(self, name)
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise InvalidInputError(
                    f'{name} must be a real number, got {value!r}') from None
            if not np.isfinite(value):
                raise InvalidInputError(f'{name} must be finite, got {value}')
            object.__setattr__(self, name, value)
        for name in ('k_i', 'k_j', 'k_u', 'k_v'):
            if getattr(self, name) == 0.0:
                raise InvalidInputError(f'{name} must be non-zero, got 0')

    # ---- construction and conversion -------------------------------------------------------
    @classmethod
    def from_vector(cls, vector):
        """Build from a (6,) intrinsics-only or (10,) vector in PARAMETER_NAMES order."""
        v = np.asarray(vector, dtype=float).ravel()
        if v.shape not in ((6,), (10,)):
            raise InvalidInputError(
                f'parameter vector must have 6 or 10 entries, got shape {np.shape(vector)}')
        return cls(*v.tolist())

    def to_vector(self):
        """Return the (10,) vector in PARAMETER_NAMES order."""
        return np.array([getattr(self, n) for n in PARAMETER_NAMES])

    @classmethod
    def from_dict(cls, intrinsics, distortion=None):
        """Build from ``{k_i: ..}`` and optional ``{k_1: ..}`` mappings (calibration file)."""
        missing = [n for n in INTRINSIC_NAMES if n not in intrinsics]
        if missing:
            raise InvalidInputError(f'intrinsics lack {missing}; expected {INTRINSIC_NAMES}')
        values = {n: intrinsics[n] for n in INTRINSIC_NAMES}
        for n in DISTORTION_NAMES:
            values[n] = (distortion or {}).get(n, 0.0)
        return cls(**values)

    def intrinsics_dict(self):
        """Return ``{name: float}`` for the six intrinsics."""
        return {n: float(getattr(self, n)) for n in INTRINSIC_NAMES}

    def distortion_dict(self):
        """Return ``{name: float}`` for k_1..k_4."""
        return {n: float(getattr(self, n)) for n in DISTORTION_NAMES}

    def replace(self, **changes):
        """Return a copy with some parameters changed."""
        return dataclasses.replace(self, **changes)

    @property
    def principal_point(self):
        """The principal point of a view in pixels, (-u_0/k_u, -v_0/k_v)."""
        return np.array([-self.u_0 / self.k_u, -self.v_0 / self.k_v])

    # ---- decoding (Eq. 11 and Eq. 18) ----------------------------------------------------------
    def decode(self, ijuv):
        """Indexed pixels (N, 4) -> measured (distorted) rays (s, t, x, y) (N, 4), Eq. 11."""
        a = as_points(ijuv, 'ijuv', 4)
        return np.column_stack([
            self.k_i * a[:, 0], self.k_j * a[:, 1],
            self.k_u * a[:, 2] + self.u_0, self.k_v * a[:, 3] + self.v_0])

    def undistort(self, stxy):
        """Measured rays (N, 4) -> undistorted rays (N, 4), Eq. 18."""
        r = as_points(stxy, 'stxy', 4)
        s, t, x, y = r.T
        rr = x * x + y * y
        radial = 1.0 + self.k_1 * rr + self.k_2 * rr * rr
        return np.column_stack([s, t, radial * x + self.k_3 * s, radial * y + self.k_4 * t])

    def rays(self, ijuv):
        """Indexed pixels (N, 4) -> physical rays (s, t, x^u, y^u) (N, 4): decode + undistort."""
        return self.undistort(self.decode(ijuv))
