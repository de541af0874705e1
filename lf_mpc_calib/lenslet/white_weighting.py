"""
Sample positions that undo the white image's weighting of bilinear view samples.

The decoder reads view (i, j) of a micro-image by bilinear interpolation of the raw frame at
``p = centre + offset`` and divides by the white image interpolated at the same ``p``. A raw
pixel k holds W_k R_k (W the white level: micro-lens vignetting, cos^4 of the chief ray; R
what the pixel's ray sees), so the sample is sum w_k W_k R_k / sum w_k W_k: a mean of the
pixels' rays weighted by the white, which falls off away from the micro-image centre. Its
centroid lies inward of ``p`` by about f (1 - f) |grad ln W| (f the fractional position);
on a full-size Lytro (cos^4 over a 27 um gap) that is about -0.18 % of every view's offset,
which shrank the measured baseline (k_i, k_j) by 0.15-0.25 %, 2-4 sigma on planned captures.

:func:`white_centroid_positions` moves each sample position so that the white-weighted
centroid of its bilinear pixels is where the view asks for (fixed-point iteration; the white
is the same for every frame, so the decode maps are built once and decoding costs nothing more).
"""

import numpy as np

from lf_mpc_calib.errors import InvalidInputError

MAX_SHIFT_PX = 0.25
"""Largest correction (raw px) applied; larger ones (a dark or noisy white) are left out."""


def white_centroid(white, x, y):
    """
    (cx, cy, level) (N,): the white-weighted centroid of the bilinear pixels read at (x, y)
    (N,) raw px, and the bilinear white level there (0 outside the image).
    """
    h, w = white.shape
    x0, y0 = np.floor(x).astype(np.intp), np.floor(y).astype(np.intp)
    fx, fy = x - x0, y - y0
    level = np.zeros(x.shape)
    sx, sy = np.zeros(x.shape), np.zeros(x.shape)
    for dx, wx in ((0, 1.0 - fx), (1, fx)):
        for dy, wy in ((0, 1.0 - fy), (1, fy)):
            xi, yi = x0 + dx, y0 + dy
            inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
            wk = np.where(inside, wx * wy * white[np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)],
                          0.0)
            level += wk
            sx += wk * xi
            sy += wk * yi
    with np.errstate(divide='ignore', invalid='ignore'):
        return sx / level, sy / level, level


def white_centroid_positions(white, x, y, *, iterations=2, min_level=0.1):
    """
    Corrected sample positions (x', y') (float32, the shape of x, y) for the white image
    ``white`` (H, W): the white-weighted centroid of the bilinear pixels read at (x', y') is
    (x, y), where the white level there is at least ``min_level`` x its 99th percentile (other
    samples, and corrections over MAX_SHIFT_PX, are kept as given).
    """
    white = np.asarray(white, dtype=np.float64)
    if white.ndim != 2:
        raise InvalidInputError(f'white image must be 2-D, got shape {white.shape}')
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.float32)
    if x.shape != y.shape:
        raise InvalidInputError(f'x and y must have one shape, got {x.shape} and {y.shape}')
    xs, ys = x.ravel().astype(np.float64), y.ravel().astype(np.float64)
    floor = float(np.percentile(white[::4, ::4], 99)) * float(min_level)
    px, py = xs.copy(), ys.copy()
    for _ in range(int(iterations)):
        cx, cy, level = white_centroid(white, px, py)
        ok = level > floor
        px = np.where(ok, px + (xs - cx), px)
        py = np.where(ok, py + (ys - cy), py)
    keep = np.hypot(px - xs, py - ys) <= MAX_SHIFT_PX
    px, py = np.where(keep, px, xs), np.where(keep, py, ys)
    return px.astype(np.float32).reshape(x.shape), py.astype(np.float32).reshape(y.shape)
