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
    (N,) raw px, and the bilinear white level there (pixels outside the image count 0).
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    dx, dy, level = _centroid_shift(np.pad(np.asarray(white, np.float32), 1), x, y)
    return x + dx, y + dy, level


def _centroid_shift(padded, x, y):
    """(centroid - (x, y)) (N,) (N,) and the level (N,), float32, on the white padded by one
    zero pixel each side: the arithmetic on the fractional positions only (float32 keeps
    1e-7 px of them; whole positions of a 3280 px image would keep 2e-4 px)."""
    h, w = padded.shape
    x0 = np.clip(np.floor(x), -1, w - 3)
    y0 = np.clip(np.floor(y), -1, h - 3)
    fx, fy = (x - x0).astype(np.float32), (y - y0).astype(np.float32)
    flat = padded.ravel()
    k = (y0.astype(np.intp) + 1) * w + (x0.astype(np.intp) + 1)
    w00, w10, w01, w11 = flat[k], flat[k + 1], flat[k + w], flat[k + w + 1]
    gx, gy = np.float32(1.0) - fx, np.float32(1.0) - fy
    a1, b1 = w10 * fx, w11 * fx                      # right-hand pixels of rows y0, y0 + 1
    top, bottom = w00 * gx + a1, w01 * gx + b1
    level = top * gy + bottom * fy
    with np.errstate(divide='ignore', invalid='ignore'):
        inv = np.float32(1.0) / level
        return (a1 * gy + b1 * fy) * inv - fx, bottom * fy * inv - fy, level


def white_level_floor(white, min_level=0.1):
    """The white level below which :func:`white_centroid_positions` leaves samples alone:
    ``min_level`` x the white's 99th percentile."""
    return float(np.percentile(np.asarray(white)[::4, ::4], 99)) * float(min_level)


def white_centroid_positions(white, x, y, *, iterations=1, floor=None):
    """
    Corrected sample positions (x', y') (float32, the shape of x, y) for the white image
    ``white`` (H, W): the white-weighted centroid of the bilinear pixels read at (x', y') is
    (x, y) (to 1e-5 px after one iteration on a Lytro white), where the white level there is
    above ``floor`` (default :func:`white_level_floor`; other samples, and corrections over
    MAX_SHIFT_PX, are kept as given).
    """
    white = np.asarray(white)
    if white.ndim != 2:
        raise InvalidInputError(f'white image must be 2-D, got shape {white.shape}')
    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.float32)
    if x.shape != y.shape:
        raise InvalidInputError(f'x and y must have one shape, got {x.shape} and {y.shape}')
    xs, ys = x.ravel().astype(np.float64), y.ravel().astype(np.float64)
    floor = white_level_floor(white) if floor is None else float(floor)
    padded = np.pad(np.asarray(white, np.float32), 1)
    px, py = np.empty(xs.shape, np.float32), np.empty(ys.shape, np.float32)
    for c0 in range(0, len(xs), _CHUNK):
        c = slice(c0, c0 + _CHUNK)
        qx, qy = xs[c], ys[c]
        for _ in range(int(iterations)):   # q <- x - (centroid(q) - q): centroid(q) = x
            dx, dy, level = _centroid_shift(padded, qx, qy)
            ok = level > floor
            qx = np.where(ok, xs[c] - dx, qx)
            qy = np.where(ok, ys[c] - dy, qy)
        keep = np.hypot(qx - xs[c], qy - ys[c]) <= MAX_SHIFT_PX
        px[c], py[c] = np.where(keep, qx, xs[c]), np.where(keep, qy, ys[c])
    return px.reshape(x.shape), py.reshape(y.shape)


_CHUNK = 1 << 20
