"""
Sub-pixel refinement of checkerboard corners inside micro-images, unbiased by blur and the rim.

    refine_in_disks(image, points (N, 2), centres (N, 2), radius, half, *, gradients=None)
        -> (N, 2), NaN = failed
    image_gradients(image (H, W)) -> (gx, gy) (H, W) float32, to pass as ``gradients``

The gradient-orthogonality (Foerstner / cornerSubPix) estimate: the corner p solves
sum_o w(o) g g^T (x_o - p) = 0 over a window of offsets o around p, g the image gradient at
x_o = p + o. For an ideal corner every g is orthogonal to x_o - p, so any window gives p; for a
blurred corner (a micro-image out of focus) only the point symmetry of the blurred image about
the corner makes the sum vanish at p, which needs a window symmetric about p. Two things break
that symmetry in a micro-image, and both move the corner (measured on rendered focused frames,
test/test_micro_image_refine.py): a window that reaches past the micro-image's rim (the pixels
there are dark, or divided by a vignetted white) and a window smaller than the blur (cornerSubPix
with a 5 x 5 window on a corner blurred over a 2 px radius). Here the window is a Gaussian
(sigma 0.7 half, as cornerSubPix's) out to ``half`` px, masked to the offsets o for which both
p + o and p - o lie within ``radius`` of the micro-image centre, so it stays symmetric about the
current estimate wherever the corner is; the gradients are central differences of the image
sampled bilinearly.
"""

import cv2
import numpy as np


MAX_ITER = 20
EPS_PX = 1e-3
SIGMA_FRACTION = 0.7


def image_gradients(image):
    """Central differences (gx, gy) (H, W) float32 of image (H, W): once per frame."""
    img = np.asarray(image, np.float32)
    return (cv2.Sobel(img, cv2.CV_32F, 1, 0, ksize=1, scale=0.5),
            cv2.Sobel(img, cv2.CV_32F, 0, 1, ksize=1, scale=0.5))


def refine_in_disks(image, points, centres, radius, half, *, min_weight=0.25, gradients=None,
                    max_iter=MAX_ITER):
    """
    Refine corners ``points`` (N, 2) of ``image`` (H, W) float32, each inside the micro-image
    disk of centre ``centres`` (N, 2) and ``radius`` (px; scalar or (N,)), with half window
    ``half`` (px; scalar or (N,)); gradients: :func:`image_gradients` of image (computed here
    when None); max_iter: iterations at most (each moves the points still moving by more
    than EPS_PX). Returns (N, 2) refined points, NaN where the symmetric
    window kept less than ``min_weight`` of its full weight or the gradients were degenerate,
    the start where the point left its window (as cornerSubPix does).
    """
    pts = np.asarray(points, np.float64).reshape(-1, 2)
    cen = np.asarray(centres, np.float64).reshape(-1, 2)
    n = len(pts)
    out = np.full((n, 2), np.nan)
    if n == 0:
        return out
    radius = np.broadcast_to(np.asarray(radius, np.float64), (n,))
    half = np.broadcast_to(np.asarray(half, np.float64), (n,))
    gx, gy = image_gradients(image) if gradients is None else gradients
    grad = cv2.merge([np.asarray(gx, np.float32), np.asarray(gy, np.float32)])  # one remap
    h_max = int(np.ceil(half.max()))
    g = np.arange(-h_max, h_max + 1, dtype=np.float64)
    ox, oy = np.meshgrid(g, g)
    off = np.column_stack([ox.ravel(), oy.ravel()])                       # (K, 2)
    off_sq = (off ** 2).sum(1)
    sig = SIGMA_FRACTION * half[:, None]
    full = np.exp(-0.5 * off_sq[None] / sig ** 2)                         # (N, K)
    full = np.where(np.abs(off).max(1)[None] <= half[:, None], full, 0.0)
    full_sum = full.sum(1)
    p = pts.copy()
    alive = np.all(np.isfinite(p), axis=1)
    for _ in range(int(max_iter)):
        idx = np.nonzero(alive)[0]
        if idx.size == 0:
            break
        pi = p[idx]
        # p + o and p - o within the radius: |d +- o|^2 = |d|^2 +- 2 d.o + |o|^2, d = p - c
        d = pi - cen[idx]
        cross = 2.0 * (d @ off.T)                                         # (n, K)
        base = (d ** 2).sum(1)[:, None] + off_sq[None] - radius[idx, None] ** 2
        wgt = np.where((base + cross <= 0) & (base - cross <= 0), full[idx], 0.0)
        enough = wgt.sum(1) >= min_weight * full_sum[idx]
        gs = _samples2(grad, pi[:, None, :] + off[None])                  # (n, K, 2)
        gxs, gys = gs[..., 0], gs[..., 1]
        wgx = wgt * gxs
        gxx, gxy, gyy = wgx * gxs, wgx * gys, wgt * gys * gys
        a, b, c = gxx.sum(1), gxy.sum(1), gyy.sum(1)
        # sum w g g^T (p + o): the p part from a, b, c, the o part by matrix products
        bx = a * pi[:, 0] + b * pi[:, 1] + gxx @ off[:, 0] + gxy @ off[:, 1]
        by = b * pi[:, 0] + c * pi[:, 1] + gxy @ off[:, 0] + gyy @ off[:, 1]
        det = a * c - b * b
        ok = enough & (det > 1e-12 * np.maximum(a + c, 1e-30) ** 2)
        new = np.full_like(pi, np.nan)
        new[ok, 0] = (c[ok] * bx[ok] - b[ok] * by[ok]) / det[ok]
        new[ok, 1] = (a[ok] * by[ok] - b[ok] * bx[ok]) / det[ok]
        move = np.hypot(*(new - pi).T)
        p[idx] = new
        alive[idx] = ok & (move > EPS_PX) & (move < 2.0 * h_max + 2.0)
        p[idx[~ok]] = np.nan
        gone = idx[ok & ~(move < 2.0 * h_max + 2.0)]
        p[gone] = pts[gone] + 2.0 * h_max + 2.0        # left its window: reset below
    # like cornerSubPix: a point that leaves its window returns where it started (unrefined;
    # the caller's checks judge it)
    left = np.all(np.isfinite(p), axis=1) & np.any(np.abs(p - pts) > half[:, None], axis=1)
    p[left] = pts[left]
    return p


def _samples2(img2, pts):
    """Bilinear samples (..., 2) float64 of a 2-channel image (H, W, 2) at pts (..., 2)."""
    shape = pts.shape[:-1]
    m = np.ascontiguousarray(pts.reshape(1, -1, 2), np.float32)
    if m.shape[1] > 30000:                      # cv2.remap maps stay under 32767 px a side
        width = 4096
        rows = -(-m.shape[1] // width)
        pad = np.zeros((1, rows * width, 2), np.float32)
        pad[:, :m.shape[1]] = m
        out = cv2.remap(img2, pad.reshape(rows, width, 2), None, cv2.INTER_LINEAR,
                        borderMode=cv2.BORDER_REPLICATE).reshape(-1, 2)[:m.shape[1]]
    else:
        out = cv2.remap(img2, m, None, cv2.INTER_LINEAR,
                        borderMode=cv2.BORDER_REPLICATE).reshape(-1, 2)
    return out.astype(np.float64).reshape(shape + (2,))
