"""
Defective pixels and dust, found from a dark frame and a white image.

Hot pixels: in the dark frame, far above its median (dark current, stuck high), or, in the
white, 1.5 x brighter than the brightest of their 8 neighbours. Dead pixels: in the white,
under half the darkest of 8 bright neighbours (an isolated dip: a micro-image's edge is not
one, its outer neighbours are dark). Dust: whole
micro-images much dimmer than their neighbours on the white (a shadow on the micro-lens array
or the sensor cover glass). All are kept out of the lattice fit and get no devignetting gain
(they decode as 0, never as bright noise).
"""

from dataclasses import dataclass

import cv2
import numpy as np

HOT_DARK_SIGMAS = 12.0      # dark frame: above median + 12 robust sigmas (and 8 levels)
WHITE_OUTLIER = 0.5         # white: off its 3 x 3 median by over half of it
HOT_WHITE_STEP = 0.03       # white: and over its neighbours by 3 % of the white's top
DUST_LEVEL = 0.7            # a micro-image under 0.7 x its neighbours' median is dusty


@dataclass(frozen=True, eq=False)
class Defects:
    """hot, dead (N, 2) pixel positions x, y; dusty (M, 2) micro-image centres; mask (H, W)
    bool of every pixel to leave out (defective pixels and dusty micro-images)."""

    hot: np.ndarray
    dead: np.ndarray
    dusty: np.ndarray
    mask: np.ndarray

    def summary(self):
        """One line for a report: what was found and that it is left out."""
        return (f'{len(self.hot)} hot and {len(self.dead)} dead pixels, {len(self.dusty)} '
                f'dusty micro-images (kept out of the lattice fit, no devignetting gain)')


def defective_pixels(white, dark=None):
    """(hot (N, 2), dead (M, 2)) pixel positions x, y of a white (H, W) and its dark frame."""
    w = np.asarray(white, dtype=np.float32)
    ring = np.ones((3, 3), np.uint8)
    ring[1, 1] = 0
    nb_max, nb_min = cv2.dilate(w, ring), cv2.erode(w, ring)
    top = float(np.percentile(w[::4, ::4], 99))
    bright = nb_min > 0.3 * top
    # and by 3 % of the white's top at least: in the unlit gaps between micro-images the read
    # noise alone is 1.5 x its neighbours (lab-square's 16-bit white: 5726 'hot' of 72)
    hot = (w > (1 + WHITE_OUTLIER) * np.maximum(nb_max, 1e-6)) & (w - nb_max > HOT_WHITE_STEP * top)
    dead = bright & (w < (1 - WHITE_OUTLIER) * nb_min)
    if dark is not None:
        d = np.asarray(dark, dtype=np.float32)
        level = float(np.median(d[::2, ::2]))
        sigma = 1.4826 * float(np.median(np.abs(d[::2, ::2] - level)))
        hot |= d > level + max(HOT_DARK_SIGMAS * max(sigma, 0.5), 8.0)
    ys, xs = np.nonzero(hot)
    yd, xd = np.nonzero(dead)
    return np.column_stack([xs, ys]), np.column_stack([xd, yd])


def dusty_micro_images(white, centres, nn):
    """
    Bool (N,) of the micro-images at centres (N, 2) whose white level (the median of the disk
    of 0.3 nn) is under 0.7 x the median of their 8 nearest neighbours' (where those are lit:
    over 0.3 x the 95th percentile; the field's dark rim is vignetting, not dust).
    """
    w = np.asarray(white, dtype=np.float32)
    h, wd = w.shape
    r = max(1, int(0.3 * nn))
    oy, ox = np.mgrid[-r:r + 1, -r:r + 1]
    disk = (ox ** 2 + oy ** 2) <= r * r
    ij = np.rint(centres).astype(int)
    xs = np.clip(ij[:, 0, None] + ox[disk][None], 0, wd - 1)
    ys = np.clip(ij[:, 1, None] + oy[disk][None], 0, h - 1)
    level = np.median(w[ys, xs], axis=1)                                 # (N,)
    inside = ((ij[:, 0] >= r) & (ij[:, 0] < wd - r) & (ij[:, 1] >= r) & (ij[:, 1] < h - r))
    if np.count_nonzero(inside) < 9:
        return np.zeros(len(centres), bool)
    centres, level_in = centres[inside], level[inside]
    out = np.zeros(len(inside), bool)
    out[inside] = _dim_among_neighbours(centres, level_in)
    return out


def _dim_among_neighbours(centres, level):
    """Bool (N,): level (N,) under DUST_LEVEL x the median of the 8 nearest centres'."""
    from scipy.spatial import cKDTree
    _, nb = cKDTree(centres).query(centres, k=9)
    ref = np.median(level[nb[:, 1:]], axis=1)
    lit = ref > 0.3 * float(np.percentile(level, 95))     # not the dark rim of the field
    return lit & (level < DUST_LEVEL * ref)


def find_defects(white, centres, nn, dark=None):
    """The :class:`Defects` of a white (H, W) with micro-images at centres (N, 2), spacing nn."""
    hot, dead = defective_pixels(white, dark)
    dusty = dusty_micro_images(white, centres, nn)
    h, w = np.shape(white)[:2]
    mask = np.zeros((h, w), np.uint8)
    for x, y in centres[dusty]:
        cv2.circle(mask, (int(round(x)), int(round(y))), int(np.ceil(0.55 * nn)), 1, -1)
    mask = mask.astype(bool)
    for pts in (hot, dead):
        mask[pts[:, 1], pts[:, 0]] = True
    return Defects(hot, dead, centres[dusty], mask)
