"""
How far a lenslet grid sits from the micro-images of a raw image (a white or a scene).

Every micro-image, whatever the scene, ends at its lens's border, where the image's gradient is
strong: averaged over all lenses in the lens's own coordinates, the scene's own edges average
out and the mean gradient magnitude (log1p, so that no strong scene edge dominates) is
point-symmetric about the true centre. Intensity alone is not: in a focused camera's scene the
mean micro-image kept the scene's structure (self-symmetry 0.13 at the true centre of the
shipped Raytrix crop, 0.89 for the gradient). :func:`lattice_shift` finds that centre: the
offset (2,) px whose point reflection best maps the mean onto itself. A grid moved by it sits on the
micro-images; pitch and rotation are the grid's (a crop or a region of interest of the sensor
moves the lattice, it does not turn or scale it).
"""

from dataclasses import dataclass, replace

import numpy as np
from scipy.ndimage import map_coordinates

from lf_mpc_calib.errors import DetectionError, InvalidInputError

BIN_PX = 0.25
"""Resolution of the mean micro-image (px)."""
MAX_LENSES = 400
"""Micro-images averaged at most (evenly spread): the shipped crop's 530 give 0.08 px, 177 0.24."""
MAX_SHIFT_FRACTION = 0.45
"""Largest shift sought, as a fraction of the pitch (a whole lens is an index, not a shift)."""


@dataclass(frozen=True)
class LatticeShift:
    """shift (2,) px (x, y) from the grid's centres to the micro-images'; symmetry: the
    normalised correlation (0..1) of the mean micro-image with its point reflection about the
    found centre; lenses: micro-images averaged."""

    shift: np.ndarray
    symmetry: float
    lenses: int


def _edges(img):
    """log1p of the gradient magnitude (H, W) of ``img`` smoothed by 1 px."""
    import cv2
    g = cv2.GaussianBlur(img, (0, 0), 1.0)
    mag = np.hypot(cv2.Sobel(g, cv2.CV_32F, 1, 0), cv2.Sobel(g, cv2.CV_32F, 0, 1))
    return np.log1p(mag / max(float(np.percentile(mag, 99)), 1e-12)).astype(np.float64)


def radius_of(grid):
    """Half the distance (px) between neighbouring centres of ``grid``."""
    return 0.5 * min(grid.pitch, grid.row_spacing * (2 / np.sqrt(3))
                     if grid.lattice == 'hex' else grid.row_spacing)


def _whole(centres, radius, shape):
    """The centres (N, 2) whose +-radius (+ 1 px margin) lies inside an image of ``shape``."""
    h, w = shape
    return centres[np.all((centres >= radius + 1) & (centres <= np.array([w, h]) - radius - 2),
                          axis=1)]


def _mean_micro_image(image, centres, radius, step):
    """(mean (n, n), offsets (n,) px, lenses) of ``image`` (H, W) over the whole micro-images
    at ``centres`` (N, 2), sampled (bilinear) every ``step`` px within +-radius of each."""
    c = _whole(centres, radius, image.shape)
    if len(c) < 20:
        h, w = image.shape
        raise DetectionError(f'lattice shift: only {len(c)} whole micro-images in the '
                             f'{w} x {h} image (need 20)')
    steps = np.arange(-radius, radius + 1e-9, step)
    dy, dx = np.meshgrid(steps, steps, indexing='ij')
    total = np.zeros(dx.shape)
    for chunk in np.array_split(c, max(1, len(c) // 500)):
        ys = chunk[:, 1, None, None] + dy
        xs = chunk[:, 0, None, None] + dx
        total += map_coordinates(image, [ys.ravel(), xs.ravel()], order=1).reshape(
            ys.shape).sum(axis=0)
    return total / len(c), steps, len(c)


def _symmetry_centre(mean, max_shift):
    """(offset (2,) px, correlation) of the point about which ``mean`` is most symmetric."""
    m = mean - mean.mean()
    n = m.shape[0]
    size = 2 * n                                            # zero-padded: no wrap-around
    spectrum = np.fft.rfft2(m, (size, size)) * np.conj(
        np.fft.rfft2(m[::-1, ::-1], (size, size)))
    corr = np.fft.fftshift(np.fft.irfft2(spectrum, (size, size)))
    lo = size // 2 - n // 2
    corr = corr[lo:lo + n, lo:lo + n]
    corr = corr / max(float(np.sum(m * m)), 1e-300)
    lag = (np.arange(n) - n // 2) * BIN_PX                  # lag = 2 x the centre's offset
    ok = np.abs(lag) <= 2 * max_shift
    sub = np.where(ok[:, None] & ok[None, :], corr, -np.inf)
    ky, kx = np.unravel_index(int(np.argmax(sub)), sub.shape)
    fine = [_parabolic(corr[ky - 1:ky + 2, kx]), _parabolic(corr[ky, kx - 1:kx + 2])]
    lag_y = lag[ky] + fine[0] * BIN_PX
    lag_x = lag[kx] + fine[1] * BIN_PX
    return np.array([lag_x, lag_y]) / 2.0, float(corr[ky, kx])


def _parabolic(three):
    a, b, c = (float(v) for v in three) if len(three) == 3 else (0.0, 1.0, 0.0)
    den = a - 2 * b + c
    return 0.0 if den == 0 else float(np.clip(0.5 * (a - c) / den, -0.5, 0.5))


def _self_symmetry(edges, centres, radius, step):
    """Normalised correlation of the mean micro-image about ``centres`` with its reflection."""
    mean, _, _ = _mean_micro_image(edges, centres, radius, step)
    m = mean - mean.mean()
    return float(np.sum(m * m[::-1, ::-1]) / max(float(np.sum(m * m)), 1e-300))


def lattice_shift(image, grid):
    """
    The :class:`LatticeShift` of ``grid`` (LensletGrid) against ``image`` (H, W) or (H, W, 3).

    A first estimate from the point symmetry of the mean micro-image folded at the grid's
    centres (an FFT correlation with its reflection), then the shift that maximises that
    symmetry with the fold re-centred on it (Nelder-Mead to 0.01 px): folding at the wrong
    centre truncates the mean there and biases the first estimate towards no shift.
    Raises InvalidInputError when the image is not the grid's size, DetectionError when too
    few micro-images are whole or their mean shows no symmetric micro-image (symmetry < 0.5).
    """
    from scipy.optimize import minimize
    img = np.asarray(image, dtype=np.float32)
    if img.ndim == 3:
        img = img.mean(axis=2)
    if (img.shape[1], img.shape[0]) != tuple(grid.image_size):
        raise InvalidInputError(f'image is {img.shape[1]} x {img.shape[0]} px, the grid is for '
                                f'{grid.image_size[0]} x {grid.image_size[1]}')
    edges = _edges(img)
    centres = _whole(grid.centres(), radius_of(grid), img.shape)
    centres = centres[::max(1, len(centres) // MAX_LENSES)]
    radius = radius_of(grid)
    mean, _, lenses = _mean_micro_image(edges, centres, radius, BIN_PX)
    first, _ = _symmetry_centre(mean, MAX_SHIFT_FRACTION * 2 * radius)
    simplex = first + np.array([[0.0, 0.0], [0.5, 0.0], [0.0, 0.5]])
    best = minimize(lambda s: -_self_symmetry(edges, centres + s, radius, radius / 24), first,
                    method='Nelder-Mead',
                    options={'xatol': 0.01, 'fatol': 1e-6, 'initial_simplex': simplex})
    symmetry = -float(best.fun)
    if symmetry < 0.5:
        raise DetectionError(f'lattice shift: the mean micro-image is not symmetric about any '
                             f'point (correlation {symmetry:.2f}, need 0.5): not a raw image '
                             f'of this lenslet grid?')
    return LatticeShift(np.asarray(best.x, dtype=float), symmetry, lenses)


def shifted(grid, shift):
    """``grid`` moved by ``shift`` (2,) px (its origin; pitch, rotation and numbering kept)."""
    return replace(grid, origin=np.asarray(grid.origin, dtype=float) + np.asarray(shift, float))


__all__ = ['LatticeShift', 'lattice_shift', 'shifted']
