"""
The micro-image lattice of a focused camera re-fitted to its white's lit disks.

    recentred_grid(white (H, W), grid, radius) -> LensletGrid

The natural (cos^4) vignetting inside a micro-image peaks under its micro-lens, not at the
micro-image's centre (where the main-lens centre images), so every micro-image of a white is
brighter on its side towards the optical axis. The lattice lenslet.estimate fits to the spots
came out scaled by -1.7..-3.1e-4 on the simulated focused presets (0.5 px at the sensor's edge);
calibrated from exact rows referred to it, a Keplerian's principal point was 0.32 px off (0.015
px with the optics' centres). Here each micro-image is divided by its own plateau a + g.(p - c)
+ q |p - c|^2, fitted within half its lit radius (the tilt divided out), thresholded softly at
half and its centroid taken (iterated, :func:`lit_disk_centres`); the grid's lattice is then
moved by the affine map that takes its centres to these (robust least squares): scale error
+1.1..1.6e-5, 0.006 px RMS against the optics' micro-image centres.
"""

import numpy as np

from lf_mpc_calib.features.sampling import disk_offsets
from lf_mpc_calib.lenslet.grid import LensletGrid

PLATEAU_FRACTION = 0.5
"""Part of the lit radius whose pixels fit each micro-image's plateau."""
MARGIN_PX = 2.0
"""Micro-images whose cell comes nearer than this to the image border are left out."""
MIN_IMAGES = 50
"""Fewer usable micro-images than this leave the grid as it is."""


def lit_disk_centres(white, centres, pitch, radius, *, iterations=4):
    """
    (M, 2) px centres of the lit disks of a white's micro-images near ``centres`` (M, 2):
    each micro-image's pixels within half a ``pitch`` divided by its plateau fit, thresholded
    softly at half (0.35..0.65 ramp), centroid; ``iterations`` times from the previous centre.
    """
    white = np.asarray(white, np.float64)
    h = 0.5 * float(pitch) - 0.5
    off = disk_offsets(h + 1.0, 1.0)     # every pixel within h of a centre rounded to a pixel
    c = np.asarray(centres, np.float64).reshape(-1, 2).copy()
    for _ in range(iterations):
        pts = np.round(c)[:, None, :] + off[None]                       # (M, P, 2)
        ix = np.clip(pts[..., 0].astype(np.int64), 0, white.shape[1] - 1)
        iy = np.clip(pts[..., 1].astype(np.int64), 0, white.shape[0] - 1)
        v = white[iy, ix]
        d = pts - c[:, None, :]
        r2 = (d ** 2).sum(-1)
        a = np.stack([np.ones_like(r2), d[..., 0], d[..., 1], r2], -1)  # (M, P, 4)
        aw = a * (r2 <= (PLATEAU_FRACTION * radius) ** 2)[..., None]
        coef = np.linalg.solve(np.einsum('mpi,mpj->mij', aw, a) + 1e-9 * np.eye(4),
                               np.einsum('mpi,mp->mi', aw, v)[..., None])[..., 0]
        norm = v / np.maximum(np.einsum('mpi,mi->mp', a, coef), 1e-6)
        wgt = np.clip((norm - 0.5) / 0.3 + 0.5, 0.0, 1.0) * (r2 <= h * h)
        s = wgt.sum(1)
        c = np.where(s[:, None] > 0, np.einsum('mp,mpi->mi', wgt, pts)
                     / np.maximum(s, 1e-12)[:, None], c)
    return c


def recentred_grid(white, grid, radius):
    """
    ``grid`` moved by the affine map that best takes its centres to the white's lit-disk
    centres (:func:`lit_disk_centres`; micro-images wholly inside the image, outliers beyond
    5 robust sigma dropped). The grid as it is when fewer than MIN_IMAGES are usable.
    """
    white = np.asarray(white, np.float64)
    hgt, wid = white.shape
    c0 = grid.centres()
    half = 0.5 * grid.pitch + MARGIN_PX
    inside = np.all((c0 > half) & (c0 < np.array([wid, hgt]) - 1 - half), axis=1)
    if inside.sum() < MIN_IMAGES:
        return grid
    c1 = lit_disk_centres(white, c0[inside], grid.pitch, radius)
    mid = np.array([(wid - 1) / 2.0, (hgt - 1) / 2.0])
    x = np.column_stack([c0[inside] - mid, np.ones(inside.sum())])
    d = c1 - c0[inside]
    use = np.all(np.isfinite(d), axis=1)
    for _ in range(2):
        a = np.linalg.lstsq(x[use], d[use], rcond=None)[0]
        res = np.hypot(*(d - x @ a).T)
        mad = np.median(res[use]) * 1.4826 + 1e-9
        use = use & (res <= 5.0 * mad)
    if use.sum() < MIN_IMAGES:
        return grid
    a = np.linalg.lstsq(x[use], d[use], rcond=None)[0]
    m = np.eye(2) + a[:2].T                       # x' = x + A^T (x - mid) + t
    row, col = m @ grid.row_vector, m @ grid.column_vector
    origin = grid.origin + a[:2].T @ (grid.origin - mid) + a[2]
    return LensletGrid(grid.lattice, float(np.hypot(*row)), float(np.hypot(*col)),
                       float(np.arctan2(row[1], row[0])), origin, grid.shape, grid.image_size,
                       hex_parity=grid.hex_parity, deformation=grid.deformation)
