"""
The focused depth before it was vectorised (measurement.focused_depth at 573a75f), kept as the
baseline of benchmarks/bench_focused_live.py: a whole-range disparity search, one bilinear
sampling of all textured micro-images per lattice step and candidate w.
"""
import numpy as np

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.features.sampling import bilinear_samples, disk_offsets

W_STEP = 0.01
"""Step of the inverse virtual depths tried (refined by a parabola through the best three)."""
MIN_TEXTURE = 0.05
"""Least standard deviation (of the normalised frame) of a micro-image with a depth."""
TEXTURE_RADIUS = 0.5
"""Part of the micro-image radius whose texture gives it a depth (the rest sees beyond its
tile in the rendered image: a board edge there would bleed its depth onto the background)."""
MIN_CONFIDENCE = 0.5
"""Least 1 - best cost / median cost of a micro-image with a depth."""


def micro_image_depths(detector, norm, w_sign):
    """
    Inverse virtual depth (M,) of every micro-image of ``detector`` (a
    MicroImageCornerDetector) in ``norm`` (its normalised frame), NaN where unknown; the sign
    of w (that of the frame's global estimate: the camera's side of the conjugate plane).
    """
    cen = detector.centres
    r_in, inside = detector.inner_disks_inside(norm.shape)
    offs = disk_offsets(r_in, 1.0)
    spread = np.full(len(cen), 0.0)
    idx = np.nonzero(inside)[0]
    if idx.size:   # texture near the centre: what the micro-image's tile shows
        core = disk_offsets(TEXTURE_RADIUS * r_in, 1.0)
        spread[idx] = bilinear_samples(norm, cen[idx, None, :] + core[None]).std(axis=1)
    textured = inside & (spread > MIN_TEXTURE)
    grid = detector.grid
    steps = [grid.row_vector, 0.5 * grid.row_vector + grid.column_vector,
             -0.5 * grid.row_vector + grid.column_vector] if grid.lattice == 'hex' else \
        [grid.row_vector, grid.column_vector]
    steps = [np.asarray(e, float) for e in steps] + [-np.asarray(e, float) for e in steps]
    lo, hi = detector.options.w_range
    cands = np.sign(w_sign) * np.arange(lo, hi + 1e-9, W_STEP)
    a_idx = np.nonzero(textured)[0]
    cost = np.zeros((len(cands), len(a_idx)))
    count = np.zeros((len(cands), len(a_idx)))
    for e in steps:
        nb = detector.lattice.nearest(cen[a_idx] + e)
        ok = (nb >= 0) & np.isin(nb, np.nonzero(inside)[0])
        a, b = cen[a_idx[ok]], cen[np.maximum(nb[ok], 0)]
        for k, wc in enumerate(cands):
            shift = wc * (b - a)
            sel = np.hypot(*(offs + shift.mean(0)).T) <= r_in
            if sel.sum() < 8:
                continue
            o = offs[sel]
            va = bilinear_samples(norm, a[:, None, :] + o[None])
            vb = bilinear_samples(norm, b[:, None, :] + o[None] + shift[:, None, :])
            cost[k, ok] += np.mean((va - vb) ** 2, axis=1)
            count[k, ok] += 1
    with np.errstate(invalid='ignore', divide='ignore'):
        cost = np.where(count > 0, cost / count, np.nan)
    out = np.full(len(cen), np.nan)
    if not a_idx.size:
        return out
    filled = np.where(np.isfinite(cost), cost, np.inf)
    best = np.argmin(filled, axis=0)
    cols = np.arange(len(a_idx))
    c0 = filled[best, cols]
    med = np.nanmedian(cost, axis=0)
    with np.errstate(invalid='ignore', divide='ignore'):
        conf = 1.0 - c0 / med
    inner = (best > 0) & (best < len(cands) - 1)
    cm = filled[np.maximum(best - 1, 0), cols]
    cp = filled[np.minimum(best + 1, len(cands) - 1), cols]
    den = cm - 2 * c0 + cp
    with np.errstate(invalid='ignore', divide='ignore'):
        frac = np.where(inner & (den > 0), 0.5 * (cm - cp) / den, 0.0)
    w = cands[best] + np.sign(w_sign) * np.clip(frac, -0.5, 0.5) * W_STEP
    good = inner & np.isfinite(c0) & (conf >= MIN_CONFIDENCE)
    out[a_idx[good]] = w[good]
    return out


def micro_image_depth(detector, norm, model, w_render, size):
    """
    Depth image (rows, cols) = size[::-1] float32 in the pixels of the image rendered at
    ``w_render`` (:meth:`MicroImageCornerDetector.render`), metres along the rendered
    pinhole's optical axis, NaN where unknown; ``model`` the calibration's MPCModel.
    """
    if model.k_i == 0.0 or model.k_3 == 0.0 or model.k_4 == 0.0 or w_render == 0.0:
        raise InvalidInputError(f'focused depth needs k_i, k_3, k_4 and w != 0, got k_i = '
                                f'{model.k_i}, k_3 = {model.k_3}, k_4 = {model.k_4}, '
                                f'w = {w_render}')
    w = micro_image_depths(detector, norm, np.sign(w_render))
    with np.errstate(invalid='ignore', divide='ignore'):
        inv_z = -w * model.k_u / model.k_i - model.k_3
        z = 1.0 / inv_z
    centre_z = -0.5 * (1.0 / model.k_3 + 1.0 / model.k_4)
    depth = z - centre_z
    depth[~(depth > 0)] = np.nan
    width, height = (int(v) for v in size)
    step = 1.0 / abs(w_render)
    xx, yy = np.meshgrid(np.arange(width) * step, np.arange(height) * step)
    nb = detector.lattice.nearest(np.column_stack([xx.ravel(), yy.ravel()]))
    out = np.where(nb >= 0, depth[np.maximum(nb, 0)], np.nan)
    return out.reshape(height, width).astype(np.float32)
