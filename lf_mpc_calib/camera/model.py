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
  x^u = (1 + k_1 r^2 + k_2 r^4) x + k_3 s, y^u = (1 + k_1 r^2 + k_2 r^4) y + k_4 t,
  r^2 = x^2 + y^2.
- A ray (s, t, x, y) passes (s, t, 0) with direction (x, y, 1) in the camera frame
  (x right, y down, z forward): X = s + x Z, Y = t + y Z.
- Parameter order of ``to_vector``: PARAMETER_NAMES.
- Projection (:meth:`MPCModel.project`) goes the other way: a camera-frame point seen from view
  (i, j) gives the undistorted ray (s, t, (X - s)/Z, (Y - t)/Z); :meth:`MPCModel.distort`
  inverts Eq. 18 for the measured (x, y) (Newton on the radius, to 1e-10), and
  u = (x - u_0)/k_u, v = (y - v_0)/k_v.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError

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
            if isinstance(value, (bool, np.bool_, str, bytes)):     # YAML true, '1.5'
                raise InvalidInputError(f'{name} must be a real number, got {value!r}')
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

    def unproject(self, ijuv):
        """Alias of :meth:`rays`: indexed pixels (N, 4) -> undistorted rays (N, 4)."""
        return self.rays(ijuv)

    # ---- projection (Eq. 1 and the inverse of Eq. 18) ----------------------------------------
    def distort(self, stxy_u):
        """
        Undistorted rays (N, 4) -> measured rays (N, 4): the inverse of Eq. 18.

        Solves (1 + k_1 r^2 + k_2 r^4) (x, y) = (x^u - k_3 s, y^u - k_4 t) for (x, y) by Newton
        on the radius r = |(x, y)| (the radial factor scales along the direction of the
        right-hand side), to a residual below 1e-10 of Eq. 18. Rows where no root is found
        (beyond the radius where the radial factor folds back) come back as NaN.
        """
        r = as_points(stxy_u, 'stxy_u', 4)
        x, y, _ = self._distort_xy(r[:, 0], r[:, 1], r[:, 2], r[:, 3])
        return np.column_stack([r[:, 0], r[:, 1], x, y])

    def _distort_xy(self, s, t, xu, yu):
        """Inverse of Eq. 18 on (N,) arrays; returns x, y and a (N,) bool 'solved' mask."""
        return self._distort_q(xu - self.k_3 * s, yu - self.k_4 * t)

    def _distort_q(self, bx, by, radial=False):
        """
        Solve (1 + k_1 r^2 + k_2 r^4) (x, y) = (bx, by) on (N,) arrays (:meth:`distort`).

        Returns x, y and a (N,) bool 'solved' mask; with ``radial``, also r^2 = x^2 + y^2 and
        the radial factor 1 + k_1 r^2 + k_2 r^4 (NaN where not solved).
        """
        if self.k_1 == 0.0 and self.k_2 == 0.0:
            solved = np.ones(bx.shape, dtype=bool)
            if not radial:
                return bx, by, solved
            return bx, by, solved, bx * bx + by * by, np.ones(bx.shape)
        rb = np.hypot(bx, by)
        rho = rb.copy()
        k1, k2 = self.k_1, self.k_2
        scale = np.maximum(1.0, rb)
        tol = 1e-15 * scale
        for _ in range(50):
            r2 = rho * rho
            f = rho * (1.0 + r2 * (k1 + k2 * r2)) - rb
            df = 1.0 + r2 * (3.0 * k1 + 5.0 * k2 * r2)
            step = f / np.where(df == 0.0, 1.0, df)
            rho -= step
            if np.all(np.abs(step) <= tol):
                break
        r2 = rho * rho
        factor = 1.0 + k1 * r2 + k2 * r2 * r2
        ok = np.abs(rho * factor - rb) <= 1e-10 * scale
        ok &= np.isfinite(rho) & (rho >= 0.0)
        if rb.min() > 0:
            q = rho / rb
        else:
            q = np.where(rb > 0, rho / np.where(rb > 0, rb, 1.0), 1.0)
        if not ok.all():
            q, r2, factor = (np.where(ok, a, np.nan) for a in (q, r2, factor))
        if not radial:
            return q * bx, q * by, ok
        return q * bx, q * by, ok, r2, factor

    def project(self, points_cam, ij):
        """
        Measured pixels (N, 2) = (u, v) of camera-frame points (N, 3) seen from views ij (N, 2).

        Conventional cameras: ij is the view index; focused cameras: the micro-image centre.
        Eq. 1 gives the undistorted ray through (k_i i, k_j j, 0) and the point; Eq. 18 is
        inverted (:meth:`distort`) and the pixel is u = (x - u_0)/k_u, v = (y - v_0)/k_v.
        Points on the view plane (Z = 0) raise InvalidInputError; rows where Eq. 18 cannot be
        inverted are NaN.
        """
        p = as_points(points_cam, 'points_cam', 3)
        v = as_points(ij, 'ij', 2)
        if v.shape[0] != p.shape[0]:
            raise InvalidInputError(
                f'ij must have {p.shape[0]} rows like points_cam, got {v.shape[0]}')
        if np.any(p[:, 2] == 0.0):
            raise InvalidInputError('points_cam must have Z != 0 (points on the view plane)')
        s = self.k_i * v[:, 0]
        t = self.k_j * v[:, 1]
        x, y, _ = self._distort_xy(s, t, (p[:, 0] - s) / p[:, 2], (p[:, 1] - t) / p[:, 2])
        return np.column_stack([(x - self.u_0) / self.k_u, (y - self.v_0) / self.k_v])

    # ---- triangulation (Eq. 2-5) and ray distances ---------------------------------------
    @staticmethod
    def triangulate(rays, groups):
        """Least-squares points (G, 3) from undistorted rays (N, 4): :func:`triangulate`."""
        return triangulate(rays, groups)

    @staticmethod
    def triangulate_point(rays):
        """Least-squares point (3,) from undistorted rays (N, 4): :func:`triangulate_point`."""
        return triangulate_point(rays)

    @staticmethod
    def point_ray_distance(points, rays):
        """Distances (N,) in metres of points (N, 3) from rays (N, 4): see the function."""
        return point_ray_distance(points, rays)


def triangulate(rays, groups):
    """
    Least-squares 3-D points (G, 3) from undistorted rays (N, 4) grouped by ``groups`` (N,).

    Each ray (s, t, x, y) gives the two equations of Eq. 2 (with f = 1), X - x Z = s and
    Y - y Z = t; the point of a group minimises their sum of squares over its rays (any number
    >= 2 with distinct directions). Groups are returned in the order of ``np.unique(groups)``.
    Raises DegenerateConfigurationError for a group whose rays are all parallel (or single).
    """
    r = as_points(rays, 'rays', 4)
    g = np.asarray(groups)
    if g.shape != (r.shape[0],):
        raise InvalidInputError(f'groups must have shape ({r.shape[0]},), got {g.shape}')
    _, inv = np.unique(g, return_inverse=True)
    inv = inv.ravel()
    n_g = int(inv.max()) + 1 if inv.size else 0
    s, t, x, y = r.T

    def total(values):
        return np.bincount(inv, weights=values, minlength=n_g)

    n = np.bincount(inv, minlength=n_g).astype(float)
    sx, sy = total(x), total(y)
    a = np.zeros((n_g, 3, 3))
    a[:, 0, 0] = n
    a[:, 1, 1] = n
    a[:, 0, 2] = a[:, 2, 0] = -sx
    a[:, 1, 2] = a[:, 2, 1] = -sy
    a[:, 2, 2] = total(x * x + y * y)
    b = np.column_stack([total(s), total(t), -total(x * s + y * t)])
    # parallel rays: the Z row is a combination of the X, Y rows (zero Schur complement)
    schur = a[:, 2, 2] - (sx * sx + sy * sy) / np.maximum(n, 1.0)
    bad = schur <= 1e-14 * np.maximum(a[:, 2, 2], 1e-300)
    if np.any(bad):
        raise DegenerateConfigurationError(
            f'{int(bad.sum())} group(s) have fewer than 2 rays of distinct direction; '
            f'cannot triangulate them (first: {np.unique(g)[np.argmax(bad)]!r})')
    return np.linalg.solve(a, b[:, :, None])[:, :, 0]


def triangulate_point(rays):
    """Least-squares 3-D point (3,) from undistorted rays (N, 4), N >= 2 (Eq. 2-5)."""
    r = as_points(rays, 'rays', 4)
    return triangulate(r, np.zeros(r.shape[0], dtype=int))[0]


def point_ray_distance(points, rays):
    """
    3-D distance (N,) in metres between points (N, 3) and rays (N, 4), row by row.

    The ray (s, t, x, y) passes (s, t, 0) with direction (x, y, 1); with undistorted rays from
    :meth:`MPCModel.rays` and the board points in the camera frame this is the ray
    re-projection error of Dansereau et al.
    """
    p = as_points(points, 'points', 3)
    r = as_points(rays, 'rays', 4)
    if p.shape[0] != r.shape[0]:
        raise InvalidInputError(f'points ({p.shape[0]} rows) and rays ({r.shape[0]} rows) differ')
    w = np.column_stack([p[:, 0] - r[:, 0], p[:, 1] - r[:, 1], p[:, 2]])
    d = np.column_stack([r[:, 2], r[:, 3], np.ones(r.shape[0])])
    return np.linalg.norm(np.cross(w, d), axis=1) / np.linalg.norm(d, axis=1)
