"""
Whether a calibrated MPC model describes a camera at all, given the images it decodes.

A calibration file holds numbers only; ``k_i = 1e-300`` or ``k_u = -1e300`` load as well as
real ones and give a plausible-looking depth map. :func:`check_plausible` traces the rays of
the extreme pixels of the image the calibration is for and refuses (InvalidInputError, naming
the value and the bound) a model whose rays leave a sane field of view, or whose projection
centres span no baseline or an absurd one:

- every ray within MAX_HALF_ANGLE_DEG of the optical axis (a field of view under 170 degrees);
- the pixels of one view (conventional) or micro-image (focused) spanning at least
  MIN_VIEW_SPAN_DEG;
- the projection centres (s, t) spanning MIN_BASELINE_M to MAX_BASELINE_M over the views the
  micro-image size allows (conventional) or the micro-images of the sensor (focused).

Whatever the file gives (a file with neither ``image_size`` nor a lenslet grid included), the
six intrinsics alone are bounded too: the rays of the pixels every image has (u, v = 0, 1 of
view (0, 0); focused: -1, 0, 1 around a micro-image's centre) within the field of view above;
one step of i, j between MIN_BASELINE_M / MAX_INDEX_SPAN and MAX_BASELINE_M metres and one
pixel of u, v at least MIN_VIEW_SPAN_DEG / MAX_INDEX_SPAN (no image spans more than
MAX_INDEX_SPAN steps); |k_i / k_j| and |k_u / k_v| within 1 / MAX_ASPECT .. MAX_ASPECT.
"""

import math

import numpy as np

from lf_mpc_calib.errors import InvalidInputError

MAX_HALF_ANGLE_DEG = 85.0
"""Rays at most this far off the optical axis: a field of view under 170 degrees."""
MIN_VIEW_SPAN_DEG = 0.01
"""The pixels of one view (micro-image) see at least this angle."""
MIN_BASELINE_M, MAX_BASELINE_M = 1e-6, 10.0
"""The projection centres span at least a micrometre and at most ten metres."""
MAX_INDEX_SPAN = 100_000
"""No image spans more views, micro-image centres or pixels than this along i, j, u or v."""
MAX_ASPECT = 10.0
"""Steps of i against j, and pixels of u against v, differ at most this much in size."""
SAMPLES = 5
"""Sample values per index (i, j, u, v) between its extremes."""


def _ranges(camera_type, image_size, views, grid):
    """((i_lo, i_hi), (j_lo, j_hi), (u_lo, u_hi), (v_lo, v_hi)) of the indexed pixels the
    calibration decodes; None for a range that nothing given determines."""
    ij = None
    if views is not None:
        ij = [tuple(views['i']), tuple(views['j'])]
    uv = [None, None]
    if camera_type == 'conventional':
        if ij is None and grid is not None:
            half = math.ceil(grid.pitch / 2)               # views a micro-image allows
            ij = [(-half, half), (-half, half)]
        size = image_size or (grid.shape if grid is not None else None)
        if size is not None:
            uv = [(0.0, size[0] - 1.0), (0.0, size[1] - 1.0)]
    else:
        size = image_size or (grid.image_size if grid is not None else None)
        if ij is None and size is not None:
            ij = [(0.0, size[0] - 1.0), (0.0, size[1] - 1.0)]
        if grid is not None:
            uv = [(-grid.pitch / 2, grid.pitch / 2)] * 2
    return (ij or [None, None]) + uv


def check_plausible(model, camera_type, *, image_size=None, views=None, grid=None):
    """
    Refuse (InvalidInputError) an MPCModel whose rays over the pixels it decodes leave a sane
    field of view, or whose baseline is nil or absurd (module docstring).

    camera_type 'conventional' | 'focused'; image_size (width, height) of one view
    (conventional) or of the raw image (focused); views {'i': [min, max], 'j': [min, max]};
    grid: the LensletGrid (its pitch bounds the views, its shape the view size). Whatever is
    None is left out of the check.
    """
    ranges = _ranges(camera_type, image_size, views, grid)
    _check_baseline(model, camera_type, ranges)
    _check_view_span(model, camera_type, ranges)
    if ranges[2] is None and ranges[3] is None:   # the pixels every image has
        least = (0.0, 1.0) if camera_type == 'conventional' else (-1.0, 1.0)
        ranges = ranges[:2] + [least, least]
    _check_field_of_view(model, ranges)
    _check_intrinsics(model)


def _check_intrinsics(model):
    """The bounds of the intrinsics alone (module docstring)."""
    lo_step = MIN_BASELINE_M / MAX_INDEX_SPAN
    lo_pixel = math.tan(math.radians(MIN_VIEW_SPAN_DEG)) / MAX_INDEX_SPAN
    for name, k in (('k_i', model.k_i), ('k_j', model.k_j)):
        if not lo_step <= abs(k) <= MAX_BASELINE_M:
            raise InvalidInputError(
                f'{name} = {k:.6g} m per step; expected {lo_step:g} to {MAX_BASELINE_M:g} m '
                f'per step (a baseline from {MIN_BASELINE_M:g} to {MAX_BASELINE_M:g} m over '
                f'at most {MAX_INDEX_SPAN} steps)')
    for name, k in (('k_u', model.k_u), ('k_v', model.k_v)):
        if not abs(k) >= lo_pixel:
            raise InvalidInputError(
                f'{name} = {k:.6g} per px; expected at least {lo_pixel:.3g} per px (at least '
                f'{MIN_VIEW_SPAN_DEG:g} degrees over at most {MAX_INDEX_SPAN} px)')
    for (a, ka), (b, kb) in ((('k_i', model.k_i), ('k_j', model.k_j)),
                             (('k_u', model.k_u), ('k_v', model.k_v))):
        ratio = abs(ka / kb)
        if not 1.0 / MAX_ASPECT <= ratio <= MAX_ASPECT:
            raise InvalidInputError(
                f'{a} = {ka:.6g} and {b} = {kb:.6g} differ {ratio:.3g}-fold in size; expected '
                f'within {MAX_ASPECT:g}-fold (steps and pixels about as wide as high)')


def _check_baseline(model, camera_type, ranges):
    over = 'the views the micro-images allow' if camera_type == 'conventional' \
        else 'the micro-images of the sensor'
    for name, k, r in (('k_i', model.k_i, ranges[0]), ('k_j', model.k_j, ranges[1])):
        if r is None or r[1] <= r[0]:
            continue
        span = abs(k) * (r[1] - r[0])
        if not MIN_BASELINE_M <= span <= MAX_BASELINE_M:
            raise InvalidInputError(
                f'{name} = {k:.6g} m per step puts the projection centres {span:.3g} m apart '
                f'over {over} ({r[0]:g} to {r[1]:g}); expected a baseline from '
                f'{MIN_BASELINE_M:g} to {MAX_BASELINE_M:g} m')


def _check_view_span(model, camera_type, ranges):
    what = 'a view' if camera_type == 'conventional' else 'a micro-image'
    least = math.tan(math.radians(MIN_VIEW_SPAN_DEG))
    for name, k, r in (('k_u', model.k_u, ranges[2]), ('k_v', model.k_v, ranges[3])):
        if r is None or r[1] <= r[0]:
            continue
        span = abs(k) * (r[1] - r[0])
        if not span >= least:
            raise InvalidInputError(
                f'{name} = {k:.6g} per px: the {r[1] - r[0]:g} px of {what} see '
                f'{math.degrees(math.atan(span)):.3g} degrees; expected at least '
                f'{MIN_VIEW_SPAN_DEG:g} degrees')


def _check_field_of_view(model, ranges):
    axes = [np.linspace(r[0], r[1], SAMPLES) if r is not None else np.zeros(1)
            for r in ranges]
    if all(r is None for r in ranges[2:]):
        return                                   # no pixel extent: nothing to trace
    ijuv = np.stack(np.meshgrid(*axes, indexing='ij'), axis=-1).reshape(-1, 4)
    with np.errstate(all='ignore'):
        s = model.k_i * ijuv[:, 0]
        t = model.k_j * ijuv[:, 1]
        x = model.k_u * ijuv[:, 2] + model.u_0
        y = model.k_v * ijuv[:, 3] + model.v_0
        rr = x * x + y * y
        radial = 1.0 + model.k_1 * rr + model.k_2 * rr * rr
        slope = np.hypot(radial * x + model.k_3 * s, radial * y + model.k_4 * t)
    angle = np.degrees(np.arctan(np.where(np.isfinite(slope), slope, np.inf)))
    worst = int(np.argmax(angle))
    if angle[worst] > MAX_HALF_ANGLE_DEG:
        i, j, u, v = ijuv[worst]
        raise InvalidInputError(
            f'the ray of view (i, j) = ({i:g}, {j:g}), pixel (u, v) = ({u:g}, {v:g}) is '
            f'{angle[worst]:.4g} degrees off the optical axis; expected a field of view under '
            f'{2 * MAX_HALF_ANGLE_DEG:g} degrees (k_u = {model.k_u:.6g}, k_v = {model.k_v:.6g}, '
            f'u_0 = {model.u_0:.6g}, v_0 = {model.v_0:.6g}, k_1 = {model.k_1:.6g}, '
            f'k_2 = {model.k_2:.6g}, k_3 = {model.k_3:.6g}, k_4 = {model.k_4:.6g})')


__all__ = ['check_plausible', 'MAX_ASPECT', 'MAX_BASELINE_M', 'MAX_HALF_ANGLE_DEG',
           'MAX_INDEX_SPAN', 'MIN_BASELINE_M', 'MIN_VIEW_SPAN_DEG']
