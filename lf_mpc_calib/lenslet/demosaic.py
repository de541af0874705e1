"""
Bayer demosaicing with OpenCV.

Patterns are named by the 2 x 2 block at the image origin (as in ROS encodings:
'rggb' = R at pixel (0, 0)). OpenCV names its codes after the block at row 1, column 1, so
'rggb' maps to COLOR_BayerBG2RGB (as cv_bridge does). The result is RGB.
"""

import cv2
import numpy as np

from lf_mpc_calib.errors import InvalidInputError

BAYER_PATTERNS = ('rggb', 'bggr', 'gbrg', 'grbg')
_CV_BAYER = {'rggb': 'BG', 'bggr': 'RG', 'gbrg': 'GR', 'grbg': 'GB'}


def demosaic(raw, pattern):
    """Demosaic a Bayer mosaic (H, W) uint8/uint16 into RGB (H, W, 3) of the same dtype."""
    if pattern not in BAYER_PATTERNS:
        raise InvalidInputError(
            f'unsupported Bayer pattern {pattern!r}; expected one of {BAYER_PATTERNS}')
    raw = np.asarray(raw)
    if raw.ndim != 2:
        raise InvalidInputError(f'a Bayer mosaic must have shape (H, W), got {raw.shape}')
    if raw.dtype not in (np.uint8, np.uint16):
        if raw.dtype.kind == 'f':
            top = float(raw.max()) if raw.size else 0.0
            scaled = np.clip(raw / max(top, 1e-12) * 65535.0, 0, 65535).astype(np.uint16)
            out = cv2.cvtColor(scaled, getattr(cv2, f'COLOR_Bayer{_CV_BAYER[pattern]}2RGB'))
            return out.astype(raw.dtype) * (max(top, 1e-12) / 65535.0)
        raise InvalidInputError(
            f'a Bayer mosaic must have dtype uint8, uint16 or float, got {raw.dtype}')
    return cv2.cvtColor(np.ascontiguousarray(raw),
                        getattr(cv2, f'COLOR_Bayer{_CV_BAYER[pattern]}2RGB'))


def mosaic_bayer(rgb, pattern):
    """Inverse of :func:`demosaic` for tests: sample an RGB image (H, W, 3) with a pattern."""
    if pattern not in BAYER_PATTERNS:
        raise InvalidInputError(
            f'unsupported Bayer pattern {pattern!r}; expected one of {BAYER_PATTERNS}')
    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise InvalidInputError(f'rgb must have shape (H, W, 3), got {rgb.shape}')
    chan = {'r': 0, 'g': 1, 'b': 2}
    out = np.empty(rgb.shape[:2], dtype=rgb.dtype)
    for n, (dy, dx) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        out[dy::2, dx::2] = rgb[dy::2, dx::2, chan[pattern[n]]]
    return out
