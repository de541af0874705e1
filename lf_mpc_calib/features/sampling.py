"""
Sub-pixel sampling shared by the micro-image stages (corners, refinement, focused depth).
"""

import cv2
import numpy as np

_MAP_WIDTH = 4096      # cv2.remap's maps must stay under 32767 px on each side
_MAP_ROWS = 8192


def bilinear_samples(img, pts):
    """Bilinear samples of img (H, W) at pts (..., 2) -> (...) of img's dtype (border
    replicated)."""
    shape = pts.shape[:-1]
    p = pts.reshape(-1, 2).astype(np.float32)
    rows = max(1, -(-len(p) // _MAP_WIDTH))
    m = np.zeros((rows * _MAP_WIDTH, 2), np.float32)
    m[:len(p)] = p
    m = m.reshape(rows, _MAP_WIDTH, 2)
    out = np.concatenate([
        cv2.remap(img, m[k:k + _MAP_ROWS, :, 0].copy(), m[k:k + _MAP_ROWS, :, 1].copy(),
                  cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE).reshape(-1)
        for k in range(0, rows, _MAP_ROWS)])
    return out[:len(p)].reshape(shape)


def disk_offsets(radius, step):
    """Offsets (K, 2) on a square grid of ``step`` px inside a disk of ``radius`` px."""
    n = int(np.floor(radius / step))
    g = np.arange(-n, n + 1) * step
    xx, yy = np.meshgrid(g, g)
    d = np.column_stack([xx.ravel(), yy.ravel()])
    return d[np.hypot(*d.T) <= radius]
