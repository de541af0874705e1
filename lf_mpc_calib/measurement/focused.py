"""
Rays and 3-D points of a focused (plenoptic 2.0) camera from raw pixels.

A focused camera's calibration decodes a raw pixel q through the micro-image it lies in:
(i, j) = that micro-image's centre c (the lenslet grid of the calibration), (u, v) = q - c,
corrected by the lens type's terms when the camera has several
(:class:`lf_mpc_calib.calibration.type_terms.LensTypeTerms`: u' = (1 + a_T) u + d_T), then the
MPC model gives the ray (Eq. 11, 18). A board corner seen in several micro-images is the
least-squares intersection of their rays (:func:`lf_mpc_calib.camera.model.triangulate`).

    rays = raw_pixel_rays(model, grid, q (N, 2), types=None, terms=None) -> (N, 4)
    points, ids = triangulate_rows(model, obs, terms=None) -> ((G, 3), (G, 2) pose, point)
    rule = type_class_map(grid, types (M,), T) -> mapping for the calibration file, or None
    types = micro_image_types(grid, calibration_file.lens_types) -> (M,)
"""

import numpy as np

from lf_mpc_calib.camera.model import triangulate
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.lenslet.nearest import MicroImageLattice


def raw_pixel_rays(model, grid, points, *, types=None, terms=None):
    """
    Undistorted rays (N, 4) of raw pixels ``points`` (N, 2) through their micro-images.

    grid: the LensletGrid of the calibration; types (M,) int: the lens type of every
    micro-image of ``grid.centres()`` (needed with ``terms``, a LensTypeTerms); pixels outside
    every micro-image of the grid give NaN rays.
    """
    q = np.asarray(points, dtype=float).reshape(-1, 2)
    lattice = MicroImageLattice(grid)
    idx = lattice.nearest(q)
    ok = idx >= 0
    c = lattice.centres[np.maximum(idx, 0)]
    uv = q - c
    if terms is not None:
        if types is None:
            raise InvalidInputError('lens-type terms need the lens type of every micro-image '
                                    '(types), got None')
        types = np.asarray(types, dtype=np.int64).reshape(-1)
        if types.shape != (len(lattice.centres),):
            raise InvalidInputError(f'types must have one entry per micro-image '
                                    f'({len(lattice.centres)}), got {types.shape}')
        uv = terms.correct(uv, types[np.maximum(idx, 0)])
    rays = model.rays(np.column_stack([c, uv]))
    rays[~ok] = np.nan
    return rays


def triangulate_rows(model, obs, *, terms=None):
    """
    3-D points of the board corners in an observation table of a focused camera.

    Rows of one (pose, point) are the micro-images that saw that corner; with ``terms`` each
    row's (u, v) is corrected by its lens type (obs.lens_type). Returns (points (G, 3) metres
    in the MPC frame, keys (G, 2) = (pose, point)); corners seen in fewer than 2 micro-images
    are left out.
    """
    ijuv = obs.ijuv
    if terms is not None:
        if obs.lens_type is None:
            raise InvalidInputError('lens-type terms need the lens_type column of the '
                                    'observations, got none')
        ijuv = terms.corrected_ijuv(ijuv, obs.lens_type)
    keys = np.column_stack([obs.pose, obs.point])
    uniq, inv, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inv = inv.ravel()
    keep = counts[inv] >= 2
    if not np.any(keep):
        return np.zeros((0, 3)), np.zeros((0, 2), dtype=np.int64)
    pts = triangulate(model.rays(ijuv[keep]), inv[keep])
    return pts, uniq[np.unique(inv[keep])]


def type_class_map(grid, types, n_types):
    """
    The lens types of ``grid``'s micro-images as a rule for the calibration file: a mapping
    {'classes': text, 'type_of_class': [2 T ints]} with the type of each class
    (k mod T) + T (l mod 2) of the grid's lattice indices, or None when the types (M,) do not
    follow such a rule.
    """
    types = np.asarray(types, dtype=np.int64).reshape(-1)
    cols = grid.shape[0]
    idx = np.arange(len(types))
    cls = (idx % cols) % n_types + n_types * ((idx // cols) % 2)
    out = []
    for k in range(2 * n_types):
        values = np.unique(types[cls == k])
        if len(values) != 1:
            return None
        out.append(int(values[0]))
    return {'classes': f'(k mod {n_types}) + {n_types} (l mod 2) of lenslet_grid indices',
            'type_of_class': out}


def micro_image_types(grid, lens_types):
    """
    (M,) lens type of every micro-image of ``grid`` from a calibration file's ``lens_types``
    mapping (its ``type_of_class`` rule); InvalidInputError when the file has no such rule.
    """
    rule = (lens_types or {}).get('type_of_class')
    if not rule or len(rule) % 2:
        raise InvalidInputError('the calibration file\'s lens_types has no type_of_class rule: '
                                'the lens type of each micro-image is unknown')
    n = len(rule) // 2
    cols = grid.shape[0]
    idx = np.arange(grid.shape[0] * grid.shape[1])
    return np.asarray(rule, dtype=np.int64)[(idx % cols) % n + n * ((idx // cols) % 2)]
