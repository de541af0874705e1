"""
Reading and writing raw and view images (8/16-bit PNG or TIFF) with OpenCV.

Arrays are mono (H, W) or RGB (H, W, 3) — RGB order, not OpenCV's BGR — of dtype uint8 or
uint16. A Bayer raw frame is a mono array; demosaic it with :mod:`lf_mpc_calib.lenslet.demosaic`.
"""

from pathlib import Path

import cv2
import numpy as np

from lf_mpc_calib.errors import InvalidInputError

SUFFIXES = ('.png', '.tif', '.tiff')


def read_image(path):
    """Read an 8/16-bit mono or colour PNG/TIFF as (H, W) or (H, W, 3) RGB uint8/uint16."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f'image file {str(path)!r} does not exist')
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise InvalidInputError(f'{str(path)!r} is not an image OpenCV can read')
    if img.dtype not in (np.uint8, np.uint16):
        raise InvalidInputError(f'{str(path)!r} must hold 8- or 16-bit pixels, got {img.dtype}')
    if img.ndim == 3:
        if img.shape[2] == 4:
            img = img[:, :, :3]
        if img.shape[2] == 3:
            img = np.ascontiguousarray(img[:, :, ::-1])
        elif img.shape[2] == 1:
            img = img[:, :, 0]
    return img


def write_image(path, image):
    """Write (H, W) or (H, W, 3) RGB uint8/uint16 as PNG or TIFF (by suffix); returns the path."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise InvalidInputError(f'image file must end in one of {SUFFIXES}, got {path.name!r}')
    img = np.asarray(image)
    if img.dtype not in (np.uint8, np.uint16):
        raise InvalidInputError(f'image must have dtype uint8 or uint16, got {img.dtype}')
    if not (img.ndim == 2 or (img.ndim == 3 and img.shape[2] == 3)):
        raise InvalidInputError(f'image must have shape (H, W) or (H, W, 3), got {img.shape}')
    if img.ndim == 3:
        img = np.ascontiguousarray(img[:, :, ::-1])
    if not cv2.imwrite(str(path), img):
        raise InvalidInputError(f'could not write {str(path)!r}')
    return path


def to_uint(image, *, bits=8, top=None):
    """
    Scale a float image to uint8/uint16 for writing: ``top`` (default the 99.9th percentile of
    finite values) maps to the largest code; negatives and NaN become 0.
    """
    if bits not in (8, 16):
        raise InvalidInputError(f'bits must be 8 or 16, got {bits}')
    a = np.nan_to_num(np.asarray(image, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    if top is None:
        top = float(np.percentile(a, 99.9)) if a.size else 1.0
    top = top if top > 0 else 1.0
    big = 255 if bits == 8 else 65535
    out = np.clip(np.rint(a / top * big), 0, big)
    return out.astype(np.uint8 if bits == 8 else np.uint16)
