"""
Depth maps and point clouds on disk.

    write_depth_png(path, depth)        16-bit PNG, millimetres, 0 = unknown (the ROS/OpenNI
                                        convention of 16UC1 depth)
    depth_preview(depth, near, far)     (H, W, 3) uint8 RGB colour map (turbo), black = unknown
    depth_preview_with_scale(depth)     the same enlarged, with a scale bar in metres
    write_ply(path, points, **fields)   binary little-endian PLY: x y z (float32) and one
                                        float32 property per extra (N,) field
"""

from pathlib import Path

import cv2
import numpy as np

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.images import write_image


def _depth(depth):
    d = np.asarray(depth, dtype=np.float32)
    if d.ndim != 2:
        raise InvalidInputError(f'depth must be a (rows, cols) map, got shape {d.shape}')
    return d


def write_depth_png(path, depth):
    """Write depth (rows, cols) metres as uint16 millimetres (0 = unknown or beyond 65.535 m)."""
    d = _depth(depth)
    mm = np.nan_to_num(d * 1000.0, nan=0.0, posinf=0.0, neginf=0.0)
    mm = np.where((mm > 0) & (mm < 65535.5), np.rint(mm), 0).astype(np.uint16)
    return write_image(path, mm)


def _turbo(t):
    """RGB uint8 (..., 3) of turbo at t (...) in [0, 1]."""
    grey = np.clip(np.rint(255.0 * np.asarray(t, dtype=float)), 0, 255).astype(np.uint8)
    return cv2.applyColorMap(grey.reshape(-1, 1), cv2.COLORMAP_TURBO)[:, 0, ::-1].reshape(
        grey.shape + (3,))


def _range(d, ok, near, far):
    lo, hi = np.percentile(d[ok], [2, 98]) if near is None or far is None else (near, far)
    return float(lo), float(max(hi, lo * 1.001))


def depth_preview(depth, near=None, far=None):
    """
    (rows, cols, 3) uint8 RGB: inverse depth between 1/far and 1/near mapped to turbo (near =
    red), unknown pixels black; near / far default to the 2nd / 98th percentile of the known.
    """
    d = _depth(depth)
    ok = np.isfinite(d) & (d > 0)
    if not ok.any():
        return np.zeros(d.shape + (3,), np.uint8)
    lo, hi = _range(d, ok, near, far)
    with np.errstate(divide='ignore', invalid='ignore'):
        t = (1.0 / np.where(ok, d, hi) - 1.0 / hi) / (1.0 / lo - 1.0 / hi)
    rgb = _turbo(t)
    rgb[~ok] = 0
    return rgb


def depth_preview_with_scale(depth, near=None, far=None, min_side=480):
    """
    The :func:`depth_preview` enlarged (nearest, to a longer side of at least ``min_side`` px)
    with a scale bar on its right: the colours' depths in metres, near at the top, and
    "black: unknown". Returns (rows', cols' + 120, 3) uint8 RGB.
    """
    d = _depth(depth)
    image = depth_preview(d, near, far)
    factor = max(1, int(np.ceil(min_side / max(d.shape))))
    image = np.repeat(np.repeat(image, factor, axis=0), factor, axis=1)
    rows = image.shape[0]
    panel = np.full((rows, 120, 3), 255, np.uint8)
    ok = np.isfinite(d) & (d > 0)
    if ok.any():
        lo, hi = _range(d, ok, near, far)
        top, bottom = 12, rows - 30
        t = np.linspace(1.0, 0.0, bottom - top)                  # near (t = 1) at the top
        panel[top:bottom, 8:30] = _turbo(t)[:, None, :]
        for f in np.linspace(0.0, 1.0, 5):
            y = int(round(top + f * (bottom - top - 1)))
            metres = 1.0 / (1.0 / hi + (1.0 - f) * (1.0 / lo - 1.0 / hi))
            panel[y, 30:36] = 0
            cv2.putText(panel, f'{metres:.3g} m', (38, y + 4), cv2.FONT_HERSHEY_SIMPLEX, 0.4,
                        (0, 0, 0), 1, cv2.LINE_AA)
    cv2.putText(panel, 'black: unknown', (4, rows - 10), cv2.FONT_HERSHEY_SIMPLEX, 0.35,
                (0, 0, 0), 1, cv2.LINE_AA)
    return np.ascontiguousarray(np.concatenate([image, panel], axis=1))


def write_ply(path, points, **fields):
    """Binary PLY of points (N, 3) metres with float32 properties ``fields`` (N,) each."""
    p = np.asarray(points, dtype=np.float32)
    if p.ndim != 2 or p.shape[1] != 3:
        raise InvalidInputError(f'points must have shape (N, 3), got {p.shape}')
    names = ['x', 'y', 'z'] + list(fields)
    cols = [p[:, 0], p[:, 1], p[:, 2]]
    for name, values in fields.items():
        v = np.asarray(values, dtype=np.float32).ravel()
        if v.shape != (len(p),):
            raise InvalidInputError(f'{name} must have shape ({len(p)},), got {v.shape}')
        cols.append(v)
    rec = np.empty(len(p), dtype=[(n, '<f4') for n in names])
    for n, c in zip(names, cols):
        rec[n] = c
    header = ['ply', 'format binary_little_endian 1.0', f'element vertex {len(p)}']
    header += [f'property float {n}' for n in names] + ['end_header']
    path = Path(path)
    from lf_mpc_calib.io.atomic import open_atomically
    with open_atomically(path, 'wb') as f:
        f.write(('\n'.join(header) + '\n').encode('ascii'))
        f.write(rec.tobytes())
    return path


__all__ = ['depth_preview', 'depth_preview_with_scale', 'write_depth_png', 'write_ply']
