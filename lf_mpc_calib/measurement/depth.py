"""
Metric depth and refocusing from a decoded light field through the calibrated MPC model.

Conventional (plenoptic 1.0) cameras only: focused cameras (virtual depth from micro-image
correspondences) are not handled here.

Geometry (NOTES §1, §3). A rectified pixel (u, v) of view (i, j) is the pixel whose measured
ray, after the radial part of Eq. 18, is x^u - k_3 s = k_u u + u_0 (y likewise): the radial
factor does not depend on (s, t), so one rectification map (that of the central view,
:func:`lf_mpc_calib.measurement.live.rectify_maps`) rectifies every view. The point at depth Z
on the ray of rectified central-view pixel (u_c, v_c) is X = (k_u u_c + u_0) Z; view (i, j)
(s = k_i i) sees it at (X - s) / Z = x^u, i.e. at the rectified pixel

    u = u_c - (k_i / k_u) i (1/Z + k_3),    v = v_c - (k_j / k_v) j (1/Z + k_4)

exactly (no pinhole approximation; k_3, k_4 the focus shear): a shift of each view that is
affine in the inverse depth w = 1/Z, zero at Z = -1/k_3 (the focus distance of an ideal camera).

Plane sweep (:class:`DepthEstimator`): for each of K inverse-depth hypotheses spread evenly
over the depth range, every used view is shifted by its exact sub-pixel offset (separable
bilinear interpolation with scalar weights: exact, not OpenCV's 1/32 px remap weights), the
cost is the variance across the views, box-filtered over a ``window`` x ``window``
neighbourhood; the depth is the arg-min refined by a parabola through the neighbouring costs.
Confidence = 1 - (minimum cost / mean cost over the hypotheses): 0 for a flat cost curve
(no texture), near 1 for a sharp unique minimum. Depth is NaN where the refined minimum falls
outside the range or more than half a step beyond its end hypothesis (the surface may lie
outside the range), where confidence < ``min_confidence``, and near
the border where shifted views leave the image.

Refocus (:func:`refocus`): the same shifts for one distance, averaged over the views.
"""

from dataclasses import dataclass, field
import math
import time

import cv2
import numpy as np

from lf_mpc_calib.camera.model import MPCModel
from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError, \
    check_memory
from lf_mpc_calib.measurement.live import central_view_intrinsics

STAGES = ('prepare', 'sweep', 'select')


def default_depth_range(model):
    """
    (near, far) metres = (0.5, 2) x the distance where views agree, -2 / (k_3 + k_4).

    Raises InvalidInputError when k_3 + k_4 >= 0 (focused at or beyond infinity): give the
    range explicitly then.
    """
    shear = model.k_3 + model.k_4
    if not shear < 0:
        raise InvalidInputError(
            f'cannot derive a depth range from k_3 = {model.k_3}, k_4 = {model.k_4} (a camera '
            'focused at a finite distance has both < 0); give the depth range (near, far) in m')
    z0 = -2.0 / shear
    return 0.5 * z0, 2.0 * z0


def check_depth_range(depth_range):
    """(near, far) as floats with 0 < near < far (far may be inf), else InvalidInputError."""
    try:
        near, far = (float(x) for x in depth_range)
    except (TypeError, ValueError):
        raise InvalidInputError(f'depth range must be (near, far) in metres, got '
                                f'{depth_range!r}') from None
    if not (math.isfinite(near) and near > 0.0):
        raise InvalidInputError(f'depth range near end must be > 0 m (in front of the camera), '
                                f'got {near}')
    if not (far > near):
        raise InvalidInputError(f'depth range is empty: far {far} m must exceed near {near} m')
    return near, far


def view_shifts(model, ij, inverse_depth):
    """
    Rectified-pixel offsets (K, N, 2) = (du, dv) of views ij (N, 2) for inverse depths (K,).

    A rectified central-view pixel (u, v) at depth 1/w is seen by view (i, j) at (u + du, v + dv)
    (module docstring).
    """
    ij = np.asarray(ij, dtype=float).reshape(-1, 2)
    w = np.asarray(inverse_depth, dtype=float).reshape(-1)
    du = -(model.k_i / model.k_u) * ij[None, :, 0] * (w[:, None] + model.k_3)
    dv = -(model.k_j / model.k_v) * ij[None, :, 1] * (w[:, None] + model.k_4)
    return np.stack([du, dv], axis=-1)


def inverse_depth_limits(model, ij, view_shape):
    """
    (w_min, w_max) 1/m: the inverse depths at which no view of ij (N, 2) moves by more than the
    view itself (view_shape (rows, cols) px; :func:`view_shifts`). Past them a view shares no
    pixel with the central one: a bound derived from the camera, not a stated cap.
    """
    ij = np.abs(np.asarray(ij, dtype=float).reshape(-1, 2))
    rows, cols = view_shape
    lo, hi = -math.inf, math.inf
    for rate, shear, size in ((abs(model.k_i / model.k_u) * ij[:, 0].max(), model.k_3, cols),
                              (abs(model.k_j / model.k_v) * ij[:, 1].max(), model.k_4, rows)):
        if rate > 0:
            lo, hi = max(lo, -shear - size / rate), min(hi, -shear + size / rate)
    return lo, hi


def _distance_text(w):
    return 'infinity' if w <= 0 else f'{1.0 / w:.3g} m'


def check_inverse_depths(model, ij, view_shape, w_near, w_far, what):
    """Refuse (InvalidInputError) inverse depths [w_far, w_near] 1/m outside
    :func:`inverse_depth_limits`, naming the distances this camera can resolve."""
    lo, hi = inverse_depth_limits(model, ij, view_shape)
    if lo <= w_far and w_near <= hi:
        return
    worst = view_shifts(model, ij, [w_near, w_far])
    moved = float(np.max(np.abs(worst)))
    rows, cols = view_shape
    raise InvalidInputError(
        f'{what}: the outer views would move by {moved:.3g} px, more than the {cols}x{rows} px '
        f'view; this camera\'s views overlap only from {_distance_text(hi)} to '
        f'{_distance_text(max(lo, 0.0))}')


def _rectify_padded(model, rows, cols, pad):
    """cv2.remap maps (float32 x2) from the padded rectified grid to decoded pixels, or None."""
    if model.k_1 == 0.0 and model.k_2 == 0.0:
        return None
    v, u = np.mgrid[-pad:rows + pad, -pad:cols + pad].astype(float)
    n = u.size
    stxy = np.column_stack([np.zeros(n), np.zeros(n), model.k_u * u.ravel() + model.u_0,
                            model.k_v * v.ravel() + model.v_0])
    measured = model.distort(stxy)
    mu = ((measured[:, 2] - model.u_0) / model.k_u).reshape(u.shape)
    mv = ((measured[:, 3] - model.v_0) / model.k_v).reshape(u.shape)
    bad = ~(np.isfinite(mu) & np.isfinite(mv))
    mu[bad], mv[bad] = -1e4, -1e4
    return mu.astype(np.float32), mv.astype(np.float32)


def _pad_views(views, maps, pad):
    """Views (N, rows, cols[, C]) -> padded rectified (N, rows + 2 pad, cols + 2 pad[, C])."""
    out = []
    for v in views:
        v = np.ascontiguousarray(v, dtype=np.float32)
        if maps is None:
            out.append(cv2.copyMakeBorder(v, pad, pad, pad, pad, cv2.BORDER_REPLICATE))
        else:
            out.append(cv2.remap(v, maps[0], maps[1], cv2.INTER_LINEAR,
                                 borderMode=cv2.BORDER_REPLICATE))
    return out


class _Shifter:
    """Exact bilinear shifts of padded images by scalar offsets, into preallocated buffers."""

    def __init__(self, rows, cols, pad, extra=()):
        self.rows, self.cols, self.pad = rows, cols, pad
        self._h = np.empty((rows + 1, cols) + tuple(extra), np.float32)
        self._out = np.empty((rows, cols) + tuple(extra), np.float32)

    def shift(self, padded, du, dv):
        """padded sampled at (u + du, v + dv) for every (u, v) of the unpadded grid."""
        rows, cols, p = self.rows, self.cols, self.pad
        fu, fv = math.floor(du), math.floor(dv)
        ax, ay = du - fu, dv - fv
        x0, y0 = p + fu, p + fv
        if abs(ax) < 1e-9 and abs(ay) < 1e-9:
            return padded[y0:y0 + rows, x0:x0 + cols]
        h = self._h
        band = padded[y0:y0 + rows + 1]
        if ax < 1e-9:
            h = band[:, x0:x0 + cols]
        else:
            cv2.addWeighted(band[:, x0:x0 + cols], 1.0 - ax, band[:, x0 + 1:x0 + 1 + cols], ax,
                            0.0, dst=h)
        if ay < 1e-9:
            return h[:rows]
        cv2.addWeighted(h[:rows], 1.0 - ay, h[1:], ay, 0.0, dst=self._out)
        return self._out


@dataclass(frozen=True, eq=False)
class DepthMap:
    """
    Depth of the rectified central view.

    depth (rows, cols) float32: metres along the optical axis (z of the optical frame), NaN
    where unknown; confidence (rows, cols) float32 in [0, 1]; model: the MPCModel;
    K (3, 3): the pinhole matrix of the rectified central view (its pixels are the depth's);
    views (N, 2) int: the (i, j) used; hypotheses (K,) metres swept; timings {stage: s}.
    """

    depth: np.ndarray
    confidence: np.ndarray
    model: MPCModel
    K: np.ndarray
    views: np.ndarray
    hypotheses: np.ndarray
    timings: dict = field(default_factory=dict)

    @property
    def valid_fraction(self):
        """Share of pixels with a depth."""
        return float(np.count_nonzero(np.isfinite(self.depth))) / max(1, self.depth.size)

    def points(self, step=1):
        """
        3-D points of the known pixels, every ``step``-th row and column, in the optical frame.

        Returns (points (P, 3) metres, pixels (P, 2) int (u, v)): X = (k_u u + u_0) Z,
        Y = (k_v v + v_0) Z (the central view's rays, s = t = 0).
        """
        step = int(step)
        if step < 1:
            raise InvalidInputError(f'step must be >= 1, got {step}')
        z = self.depth[::step, ::step]
        v, u = np.nonzero(np.isfinite(z))
        zz = z[v, u].astype(float)
        u, v = u * step, v * step
        m = self.model
        pts = np.column_stack([(m.k_u * u + m.u_0) * zz, (m.k_v * v + m.v_0) * zz, zz])
        return pts, np.column_stack([u, v])


MAX_DEPTH_PLANES = 2048
"""Most inverse-depth hypotheses a sweep may take (a stated cap)."""


class DepthEstimator:
    """
    Plane-sweep depth of the central view for one calibrated model and decoded view layout.

    model: MPCModel; view_shape (rows, cols); i_values (n_i,), j_values (n_j,) the decoded view
    indices; usable (n_j, n_i) bool (``Decoder.valid``); depth_range (near, far) metres (None:
    :func:`default_depth_range`); view_step: use the usable views whose i and j are multiples
    of it (1: all usable views); hypotheses: count of inverse-depth hypotheses (None: enough
    that the outermost used view moves at most ``max_step_px`` between two); window: odd size of
    the cost aggregation box; min_confidence: below it the depth is NaN.

    Raises InvalidInputError for a bad range or layout and DegenerateConfigurationError when
    the used views cannot resolve the range (fewer than two views, or less than 1 px of
    disparity across it at the outermost view).
    """

    def __init__(self, model, view_shape, i_values, j_values, usable, *, depth_range=None,
                 view_step=1, hypotheses=None, window=5, max_step_px=0.35,
                 min_confidence=0.3):
        if not isinstance(model, MPCModel):
            raise InvalidInputError(f'model must be an MPCModel, got {type(model).__name__}')
        self.model = model
        self.rows, self.cols = (int(x) for x in view_shape)
        self.i_values = np.asarray(i_values, dtype=int).ravel()
        self.j_values = np.asarray(j_values, dtype=int).ravel()
        usable = np.asarray(usable, dtype=bool)
        if usable.shape != (len(self.j_values), len(self.i_values)):
            raise InvalidInputError(f'usable must have shape ({len(self.j_values)}, '
                                    f'{len(self.i_values)}), got {usable.shape}')
        self.near, self.far = check_depth_range(
            default_depth_range(model) if depth_range is None else depth_range)
        window = int(window)
        most = 2 * (min(self.rows, self.cols) // 2) + 1
        if window < 1 or window % 2 == 0 or window > most:
            raise InvalidInputError(f'window must be an odd size from 1 to {most} px (the '
                                    f'{self.cols}x{self.rows} px view), got {window}')
        self.window = window
        step = int(view_step)
        if step < 1:
            raise InvalidInputError(f'view_step must be >= 1, got {view_step}')
        widest = int(max(np.abs(self.i_values).max(initial=0),
                         np.abs(self.j_values).max(initial=0)))
        step = min(step, widest + 1)        # past the outermost view: only view 0 (refused)
        if not 0.0 <= float(min_confidence) < 1.0:
            raise InvalidInputError(f'min_confidence must be in [0, 1), got {min_confidence}')
        self.min_confidence = float(min_confidence)
        jj, ii = np.nonzero(usable & (self.j_values[:, None] % step == 0)
                            & (self.i_values[None, :] % step == 0))
        self._positions = (jj, ii)
        self.views = np.column_stack([self.i_values[ii], self.j_values[jj]])
        if len(self.views) < 2:
            raise DegenerateConfigurationError(
                f'{len(self.views)} usable view(s) with i, j multiples of {step}; depth needs '
                'at least 2: lower view_step or decode more views')
        w_lo = 1.0 / self.far
        w_hi = 1.0 / self.near
        check_inverse_depths(model, self.views, (self.rows, self.cols), w_hi, w_lo,
                             f'depth range {self.near:.3g}-{self.far:.3g} m')
        ends = view_shifts(model, self.views, [w_lo, w_hi])
        span = float(np.max(np.abs(ends[1] - ends[0])))
        if span < 1.0:
            raise DegenerateConfigurationError(
                f'depth range {self.near:.3g}-{self.far:.3g} m spans {span:.2f} px of disparity '
                f'at the outermost used view; at least 1 px is needed to resolve it: widen the '
                f'range or use the outer views')
        n = int(math.ceil(span / float(max_step_px))) + 1 if hypotheses is None \
            else int(hypotheses)
        if n < 3:
            raise InvalidInputError(f'hypotheses must be >= 3, got {n}')
        if n > MAX_DEPTH_PLANES:
            raise InvalidInputError(
                f'depth range {self.near:.3g}-{self.far:.3g} m spans {span:.3g} px of '
                f'disparity: {n} depth planes at {max_step_px} px steps, more than the '
                f'{MAX_DEPTH_PLANES} allowed; narrow the range (--near / --far)')
        pad = float(np.max(np.abs(ends)))
        padded = (self.rows + 2 * pad + 2) * (self.cols + 2 * pad + 2)
        check_memory(4.0 * (len(self.views) * padded + n * self.rows * self.cols),
                     f'the sweep over {n} depth planes (shifts up to {pad:.3g} px)')
        self.inverse_depths = np.linspace(w_lo, w_hi, n)
        self.shifts = view_shifts(model, self.views, self.inverse_depths)   # (K, N, 2)
        self.pad = int(math.ceil(np.max(np.abs(self.shifts)))) + 1
        self._maps = _rectify_padded(model, self.rows, self.cols, self.pad)
        self._shifter = _Shifter(self.rows, self.cols, self.pad)
        self.K = central_view_intrinsics(model)
        self.baseline_views = int(np.ptp(self.views[:, 0]))

    @classmethod
    def for_decoder(cls, model, decoder, **options):
        """An estimator for the views of a :class:`~lf_mpc_calib.lenslet.decode.Decoder`."""
        return cls(model, decoder.view_shape, decoder.i_values, decoder.j_values,
                   decoder.valid, **options)

    @property
    def hypotheses(self):
        """Depths (K,) metres swept, far to near."""
        with np.errstate(divide='ignore'):
            return 1.0 / self.inverse_depths

    def relative_error_bound(self, depth, disparity_noise_px=0.05):
        """
        sigma_Z / Z (same shape as depth) from a disparity noise between the extreme views.

        The disparity between the two outermost used views along i (``baseline_views`` view
        steps apart) is |k_i / k_u| baseline (w + k_3) px; noise sigma_d px in it gives
        sigma_w = sigma_d / (|k_i / k_u| baseline) and sigma_Z / Z = Z sigma_w.
        """
        z = np.asarray(depth, dtype=float)
        rate = abs(self.model.k_i / self.model.k_u) * max(self.baseline_views, 1)
        return z * float(disparity_noise_px) / rate

    def _check(self, lightfield):
        v = lightfield.views
        if tuple(v.shape[2:4]) != (self.rows, self.cols) or not (
                np.array_equal(lightfield.i_values, self.i_values)
                and np.array_equal(lightfield.j_values, self.j_values)):
            raise InvalidInputError(
                f'light field has views {v.shape[:2]} of {v.shape[3]}x{v.shape[2]} px (i '
                f'{list(lightfield.i_values)}); the depth estimator was built for '
                f'{len(self.j_values)}x{len(self.i_values)} views of {self.cols}x{self.rows} px')

    def estimate(self, lightfield):
        """Depth of the rectified central view of a LightField: a :class:`DepthMap`."""
        self._check(lightfield)
        t0 = time.perf_counter()
        jj, ii = self._positions
        views = lightfield.views[jj, ii]
        if views.ndim == 4:
            views = views.mean(axis=3)
        padded = _pad_views(views, self._maps, self.pad)
        rows, cols, p = self.rows, self.cols, self.pad
        support = np.min([x[p:p + rows, p:p + cols] for x in padded], axis=0) > 0
        t1 = time.perf_counter()

        n_views = len(padded)
        k_count = len(self.inverse_depths)
        costs = np.empty((k_count, rows, cols), np.float32)
        s1 = np.empty((rows, cols), np.float32)
        s2 = np.empty((rows, cols), np.float32)
        ksize = (self.window, self.window)
        shifter = self._shifter
        for k in range(k_count):
            s1[...] = 0.0
            s2[...] = 0.0
            for n in range(n_views):
                du, dv = self.shifts[k, n]
                img = shifter.shift(padded[n], du, dv)
                cv2.accumulate(img, s1)
                cv2.accumulateSquare(img, s2)
            # variance across views: s2 / N - (s1 / N)^2
            cv2.multiply(s1, s1, dst=s1, scale=1.0 / (n_views * n_views))
            cv2.addWeighted(s2, 1.0 / n_views, s1, -1.0, 0.0, dst=s2)
            cv2.boxFilter(s2, -1, ksize, dst=costs[k], normalize=True,
                          borderType=cv2.BORDER_REPLICATE)
        t2 = time.perf_counter()

        best = np.argmin(costs, axis=0)
        inner = np.clip(best, 1, k_count - 2)
        c0 = np.take_along_axis(costs, (inner - 1)[None], 0)[0]
        c1 = np.take_along_axis(costs, inner[None], 0)[0]
        c2 = np.take_along_axis(costs, (inner + 1)[None], 0)[0]
        curv = c0 - 2.0 * c1 + c2
        with np.errstate(divide='ignore', invalid='ignore'):
            delta = np.where(curv > 0, 0.5 * (c0 - c2) / curv, 0.0)
            conf = 1.0 - c1 / costs.mean(axis=0)
        # position on the hypothesis axis: within half a step of an inner minimum; at an end
        # of the range only when the parabola through the three end costs puts the minimum
        # inside the range, within half a step of that end
        pos = np.where(best == inner, inner + np.clip(delta, -0.5, 0.5), inner + delta)
        inside = (pos >= 0.0) & (pos <= k_count - 1) & (np.abs(pos - best) <= 0.5)
        step_w = self.inverse_depths[1] - self.inverse_depths[0]
        w = self.inverse_depths[0] + pos * step_w
        conf = np.nan_to_num(np.clip(conf, 0.0, 1.0), nan=0.0).astype(np.float32)
        edge = p + self.window // 2
        support = cv2.erode(support.astype(np.uint8), np.ones((2 * edge + 1, 2 * edge + 1),
                                                              np.uint8)) > 0
        ok = support & inside & (conf >= self.min_confidence) & (w > 0)
        with np.errstate(divide='ignore'):
            depth = np.where(ok, 1.0 / w, np.nan).astype(np.float32)
        t3 = time.perf_counter()
        return DepthMap(depth, conf, self.model, self.K, self.views.copy(),
                        self.hypotheses.copy(),
                        {'prepare': t1 - t0, 'sweep': t2 - t1, 'select': t3 - t2})


def refocus(lightfield, model, distance, *, views=None):
    """
    The rectified central view refocused at ``distance`` metres: (rows, cols[, 3]) float32.

    Every usable view (``lightfield.valid``; or the (N, 2) (i, j) given as ``views``) is shifted
    by the model's exact offset for depth ``distance`` (:func:`view_shifts`) and the views are
    averaged: points at that depth are sharp, others blur with their disparity.
    """
    if not isinstance(model, MPCModel):
        raise InvalidInputError(f'model must be an MPCModel, got {type(model).__name__}')
    z = float(distance)
    if not (math.isfinite(z) and z > 0):
        raise InvalidInputError(f'refocus distance must be > 0 m (in front of the camera), got '
                                f'{distance!r}')
    i_values = np.asarray(lightfield.i_values)
    j_values = np.asarray(lightfield.j_values)
    if views is None:
        jj, ii = np.nonzero(lightfield.valid)
    else:
        ij = np.asarray(views, dtype=int).reshape(-1, 2)
        ii = np.array([int(np.flatnonzero(i_values == i)[0]) if np.any(i_values == i) else -1
                       for i in ij[:, 0]])
        jj = np.array([int(np.flatnonzero(j_values == j)[0]) if np.any(j_values == j) else -1
                       for j in ij[:, 1]])
        if np.any(ii < 0) or np.any(jj < 0):
            raise InvalidInputError(f'views {ij.tolist()} are not all among i {list(i_values)}, '
                                    f'j {list(j_values)}')
    if len(ii) == 0:
        raise DegenerateConfigurationError('no usable view to refocus')
    ij = np.column_stack([i_values[ii], j_values[jj]])
    rows, cols = lightfield.view_shape
    check_inverse_depths(model, ij, (rows, cols), 1.0 / z, 1.0 / z,
                         f'refocus distance {z:.3g} m')
    shifts = view_shifts(model, ij, [1.0 / z])[0]
    pad = int(math.ceil(np.max(np.abs(shifts)))) + 1
    maps = _rectify_padded(model, rows, cols, pad)
    extra = lightfield.views.shape[4:]
    shifter = _Shifter(rows, cols, pad, extra)
    total = np.zeros((rows, cols) + extra, np.float32)
    for n, (a, b) in enumerate(zip(jj, ii)):
        padded = _pad_views([lightfield.views[a, b]], maps, pad)[0]
        total += shifter.shift(padded, *shifts[n])
    return total / np.float32(len(ii))


__all__ = ['DepthEstimator', 'DepthMap', 'STAGES', 'check_depth_range', 'check_inverse_depths',
           'default_depth_range', 'inverse_depth_limits', 'refocus', 'view_shifts']
