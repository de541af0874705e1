"""
Depth maps and point clouds on disk.

    write_depth_png(path, depth)        16-bit PNG, millimetres, 0 = unknown (the ROS/OpenNI
                                        convention of 16UC1 depth)
    depth_preview(depth, near, far)     (H, W, 3) uint8 RGB colour map (turbo), black = unknown
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


def depth_preview(depth, near=None, far=None):
    """
    (rows, cols, 3) uint8 RGB: inverse depth between 1/far and 1/near mapped to turbo (near =
    red), unknown pixels black; near / far default to the 2nd / 98th percentile of the known.
    """
    d = _depth(depth)
    ok = np.isfinite(d) & (d > 0)
    if not ok.any():
        return np.zeros(d.shape + (3,), np.uint8)
    lo, hi = np.percentile(d[ok], [2, 98]) if near is None or far is None else (near, far)
    lo, hi = float(lo), float(max(hi, lo * 1.001))
    with np.errstate(divide='ignore', invalid='ignore'):
        t = (1.0 / np.where(ok, d, hi) - 1.0 / hi) / (1.0 / lo - 1.0 / hi)
    grey = np.clip(np.rint(255.0 * t), 0, 255).astype(np.uint8)
    bgr = cv2.applyColorMap(grey, cv2.COLORMAP_TURBO)
    bgr[~ok] = 0
    return np.ascontiguousarray(bgr[:, :, ::-1])


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
    from lf_mpc_calib.io.safe_write import atomic_open
    with atomic_open(path, 'wb') as f:
        f.write(('\n'.join(header) + '\n').encode('ascii'))
        f.write(rec.tobytes())
    return path


__all__ = ['depth_preview', 'write_depth_png', 'write_ply']
