"""
Which sub-aperture views sample only their own micro-image's bright disk.

    radius = aperture_radius(white, grid)                 # raw px, from a white image
    clean = clean_views(grid, i_values, j_values, radius=radius)   # (n_j, n_i) bool

:class:`lf_mpc_calib.lenslet.decode.Decoder` marks its usable views (``Decoder.valid``) with
these rules; a view that reads a neighbouring micro-image or the edge of the aperture disk
has a shifted mean ray, which biases a calibration.
"""

import cv2
import numpy as np

from lf_mpc_calib.errors import InvalidInputError


def aperture_radius(white, grid, *, max_lenses=2000):
    """
    Radius (raw px) of the bright disk of the micro-images of a white image.

    The radial profile (16 directions, 0.25 px steps, bilinear) of up to ``max_lenses``
    micro-images of the central half of the lattice, each normalised by its centre value, is
    averaged; the radius is where it falls to one half. Capped at half the smallest distance
    between micro-image centres.
    """
    white = np.ascontiguousarray(white, dtype=np.float32)
    if white.ndim != 2:
        raise InvalidInputError(f'white image must be 2-D, got shape {white.shape}')
    cols, rows = grid.shape
    l_, k = np.mgrid[rows // 4:max(rows // 4 + 1, 3 * rows // 4),
                     cols // 4:max(cols // 4 + 1, 3 * cols // 4)]
    kl = np.column_stack([k.ravel(), l_.ravel()])
    step = max(1, int(np.ceil(len(kl) / max_lenses)))
    centres = grid.centres_of(kl[::step])                              # (L, 2)
    half = 0.5 * nearest_neighbour_distance(grid)
    radii = np.arange(0.0, half + 1e-9, 0.25)                          # (R,)
    phi = np.arange(16) * (np.pi / 8)
    offsets = radii[:, None, None] * np.stack([np.cos(phi), np.sin(phi)], -1)[None]  # (R, 16, 2)
    pos = (centres[:, None, None, :] + offsets[None]).astype(np.float32)  # (L, R, 16, 2)
    flat = np.ascontiguousarray(pos.reshape(len(centres), -1, 2))      # (L, R * 16, 2)
    vals = cv2.remap(white, flat[..., 0].copy(), flat[..., 1].copy(), cv2.INTER_LINEAR,
                     borderMode=cv2.BORDER_CONSTANT, borderValue=0).reshape(pos.shape[:3])
    centre = vals[:, 0, 0]
    ok = centre > 0.2 * np.max(centre) if centre.size else centre
    if not np.any(ok):
        raise InvalidInputError('white image is dark at the micro-image centres of the grid')
    profile = np.mean(vals[ok] / centre[ok, None, None], axis=(0, 2))   # (R,)
    below = np.flatnonzero(profile < 0.5)
    if below.size == 0:
        return float(half)
    n = int(below[0])
    if n == 0:
        raise InvalidInputError('white image: micro-image centres are not bright')
    f = (profile[n - 1] - 0.5) / (profile[n - 1] - profile[n])
    return float(min(half, radii[n - 1] + f * (radii[n] - radii[n - 1])))


def nearest_neighbour_distance(grid):
    """Smallest distance (raw px) between micro-image centres of ``grid``."""
    return float(np.min(np.linalg.norm(_neighbour_vectors(grid), axis=1)))


def _neighbour_vectors(grid):
    """(8, 2) vectors from a micro-image centre to the centres of its lattice neighbours."""
    cols, rows = grid.shape
    k0, l0 = cols // 2, rows // 2
    d = np.array([(dk, dl) for dl in (-1, 0, 1) for dk in (-1, 0, 1) if dk or dl])
    return grid.centres_of(d + [k0, l0]) - grid.centres_of([[k0, l0]])


def clean_views(grid, i_values, j_values, *, radius=None):
    """
    Views (n_j, n_i) bool whose samples read only their own micro-image's bright disk.

    View (i, j) samples each micro-image bilinearly at offset o = i e_row + j e_col (raw px)
    from its centre, so it mixes the pixel centres in the box o +- (1, 1). The view is clean
    when that box lies inside the micro-image's own cell (closer to its centre than to any
    neighbour's: a pixel of the neighbour sees through another micro-lens, one view pixel
    away) and, given the bright-disk ``radius`` (:func:`aperture_radius`), inside that disk
    (pixels cut by the aperture have a shifted mean ray). Measured on rendered Lytro data,
    views that fail this (the (+-3, +-3) corners of 7 x 7 and most of the outer ring of
    9 x 9) shift corners by 0.01-0.5 px, depending on the board's depth, which biased
    k_i, k_j by about 1 %.
    """
    e_r = grid.row_vector / grid.pitch
    e_c = grid.column_vector / grid.row_spacing
    jj, ii = np.meshgrid(np.asarray(j_values, float), np.asarray(i_values, float),
                         indexing='ij')
    o = ii[..., None] * e_r + jj[..., None] * e_c                       # (n_j, n_i, 2)
    box = np.array([[-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0], [1.0, 1.0]])
    corners = o[..., None, :] + box                                      # (n_j, n_i, 4, 2)
    nb = _neighbour_vectors(grid)                                        # (8, 2)
    proj = np.einsum('abcd,nd->abcn', corners, nb)                       # (n_j, n_i, 4, 8)
    clean = np.all(proj < 0.5 * np.sum(nb * nb, axis=1), axis=(2, 3))
    if radius is not None:
        clean &= np.all(np.linalg.norm(corners, axis=-1) <= float(radius), axis=2)
    return clean
