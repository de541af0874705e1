"""
Dark frames: the sensor's black level, subtracted from a raw image before anything else.

A dark frame is a raw image taken with no light (lens capped, same exposure and gain). It
must match the image it corrects: same size, same integer bit depth, and darker than it.
"""

import numpy as np

from lf_mpc_calib.errors import InvalidInputError


def subtract_dark(image, dark, *, name='white', dark_name='dark frame'):
    """
    ``image`` (H, W) or (H, W, C) minus ``dark`` of the same shape, as float32, clipped at 0.

    Refused (InvalidInputError, naming the figure): another shape, another dtype (bit depth),
    NaN/inf, or a dark frame not darker than the image (its median at or over a quarter of the
    image's 99th percentile: a lit frame, or the two swapped).
    """
    img, drk = np.asarray(image), np.asarray(dark)
    if drk.shape != img.shape:
        raise InvalidInputError(f'{dark_name} must have the {name}\'s shape {img.shape}, got '
                                f'{drk.shape}')
    if drk.dtype != img.dtype:
        raise InvalidInputError(f'{dark_name} must have the {name}\'s sample type {img.dtype} '
                                f'(bit depth), got {drk.dtype}')
    out = img.astype(np.float32) - drk.astype(np.float32)
    if not np.all(np.isfinite(out)):
        raise InvalidInputError(f'{name} or {dark_name} contains NaN or inf')
    level = float(np.median(drk[::4, ::4]))
    bright = float(np.percentile(img[::4, ::4], 99))
    if level >= 0.25 * bright:
        raise InvalidInputError(
            f'{dark_name} is not dark: its median {level:g} is at or over a quarter of the '
            f'{name}\'s 99th percentile {bright:g} (a lit frame, or the two files swapped?)')
    np.maximum(out, 0.0, out=out)
    return out
