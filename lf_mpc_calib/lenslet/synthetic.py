"""
Simple synthetic lenslet images for tests and benchmarks (not the optics-based renderer).

Every micro-image is an anti-aliased disk of radius ``radius`` px around its lattice centre,
multiplied by a smooth vignetting ``1 - vignetting * r^2`` (r = distance from the image centre
over the half diagonal); optional Gaussian noise. A raw "scene" is a function of the lens
position and the offset inside the micro-image, so a decoder can be checked against it exactly.
"""

import numpy as np

from lf_mpc_calib.errors import InvalidInputError


def _disk_splat(grid, radius, value_fn, edge):
    """Sum over lenses of disk(offset) * value_fn(lens centres, offsets); (H, W) float64."""
    w, h = grid.image_size
    centres = grid.centres()                                    # (M, 2)
    half = int(np.ceil(radius + edge)) + 1
    oy, ox = np.mgrid[-half:half + 1, -half:half + 1]
    ox, oy = ox.ravel(), oy.ravel()
    px = np.rint(centres[:, 0])[:, None].astype(np.int64) + ox[None, :]     # (M, P)
    py = np.rint(centres[:, 1])[:, None].astype(np.int64) + oy[None, :]
    dx = px - centres[:, 0:1]
    dy = py - centres[:, 1:2]
    dist = np.hypot(dx, dy)
    cover = np.clip((radius - dist) / edge + 0.5, 0.0, 1.0)
    inside = (px >= 0) & (px < w) & (py >= 0) & (py < h) & (cover > 0)
    vals = cover * value_fn(centres, dx, dy)
    flat = (py * w + px)[inside]
    return np.bincount(flat, weights=vals[inside], minlength=w * h).reshape(h, w)


def _vignetting(shape, strength):
    h, w = shape
    yy, xx = np.mgrid[0:h, 0:w]
    r2 = ((xx - (w - 1) / 2.0) ** 2 + (yy - (h - 1) / 2.0) ** 2) / (((w ** 2 + h ** 2) / 4.0))
    return 1.0 - strength * r2


def white_image(grid, *, radius=None, edge=1.0, vignetting=0.3, noise=0.0, peak=230.0,
                background=5.0, dtype=np.uint8, rng=None):
    """
    A white image (H, W) of ``grid``: bright disks of ``radius`` px (default 0.42 pitch).

    ``noise`` is the standard deviation of additive Gaussian noise in output units.
    """
    radius = 0.42 * grid.pitch if radius is None else float(radius)
    if radius + 0.5 * edge > 0.5 * min(grid.pitch, np.hypot(0.5 * grid.pitch, grid.row_spacing)):
        raise InvalidInputError(
            f'radius {radius} + edge {edge} px makes neighbouring micro-images overlap '
            f'(pitch {grid.pitch} px)')
    img = _disk_splat(grid, radius, lambda c, dx, dy: np.ones_like(dx, dtype=float), edge)
    img = background + (peak - background) * img * _vignetting(img.shape, vignetting)
    if noise > 0:
        rng = np.random.default_rng(0) if rng is None else rng
        img = img + rng.normal(0.0, noise, img.shape)
    return _to_dtype(img, dtype)


def raw_image(grid, scene, *, radius=None, edge=1.0, vignetting=0.3, peak=230.0,
              dtype=np.uint8):
    """
    A raw frame (H, W) whose micro-images show ``scene``.

    ``scene(centres (M, 2), a (M, P), b (M, P)) -> (M, P)`` gives the relative radiance (0..1)
    seen by the pixel at offset ``a`` along the lattice rows and ``b`` across them (px) from
    the centre of the micro-image at ``centres``.
    """
    radius = 0.42 * grid.pitch if radius is None else float(radius)
    th = grid.rotation
    ct, st = np.cos(th), np.sin(th)

    def value(centres, dx, dy):
        a = ct * dx + st * dy
        b = -st * dx + ct * dy
        return scene(centres, a, b)

    img = _disk_splat(grid, radius, value, edge)
    img = peak * img * _vignetting(img.shape, vignetting)
    return _to_dtype(img, dtype)


def _to_dtype(img, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == 'u':
        return np.clip(np.rint(img), 0, np.iinfo(dtype).max).astype(dtype)
    return img.astype(dtype)
