"""
From a white image to a decoder: the lenslet grid (estimated, or given and checked against the
white image's size) and the :class:`~lf_mpc_calib.lenslet.decode.Decoder` built on it.
"""

import numpy as np

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.lenslet.decode import Decoder
from lf_mpc_calib.lenslet.demosaic import BAYER_PATTERNS
from lf_mpc_calib.lenslet.estimate import estimate_grid


def make_decoder(white_image, *, views=None, demosaic=None, grid=None):
    """
    Estimate the lenslet grid from the white image (unless given); return (grid, decoder).

    With ``demosaic`` (a Bayer pattern) the grid is estimated from the white image with each
    CFA channel divided by its own bright level (:func:`bayer_neutral`): the raw mosaic's
    channel gains put a 2 x 2 pixel pattern on every micro-image that pulls the centres
    (measured on rendered Lytro/Illum whites: mean centre error 0.086/0.077 px raw, 0.074/
    0.052 px demosaiced, 0.038/0.025 px balanced = as good as the mono white). A given grid
    must be for the white image's size (InvalidInputError naming both).
    """
    if grid is None:
        grid = estimate_grid(white_image if demosaic is None
                             else bayer_neutral(white_image, demosaic))
    else:
        check_grid_size(grid, np.shape(white_image))
    kwargs = {'white': white_image, 'demosaic': demosaic}
    if views is not None:
        kwargs['views'] = tuple(int(v) for v in views)
    return grid, Decoder(grid, **kwargs)


def bayer_neutral(image, pattern):
    """
    A Bayer mosaic (H, W) with each of its four CFA phases divided by its own bright level.

    The bright level of a phase is its 99th percentile (a white image's micro-image
    plateau), so a white of uniform colour becomes a mono white. Returns float32 (H, W).
    """
    if pattern not in BAYER_PATTERNS:
        raise InvalidInputError(
            f'unsupported Bayer pattern {pattern!r}; expected one of {BAYER_PATTERNS}')
    out = np.array(image, dtype=np.float32)
    if out.ndim != 2 or min(out.shape) < 2:
        raise InvalidInputError(f'a Bayer mosaic must have shape (H, W), got {out.shape}')
    for dy in (0, 1):
        for dx in (0, 1):
            phase = out[dy::2, dx::2]
            level = float(np.percentile(phase, 99))
            if level > 0:
                phase /= level
    return out


def check_grid_size(grid, shape):
    """Raise InvalidInputError unless ``grid`` is for images of ``shape`` (H, W[, C])."""
    size = (int(shape[1]), int(shape[0]))
    if tuple(grid.image_size) != size:
        raise InvalidInputError(
            f'the lenslet grid is for {grid.image_size[0]}x{grid.image_size[1]} px images but '
            f'the white image is {size[0]}x{size[1]} px')
