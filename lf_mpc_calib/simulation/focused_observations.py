"""
Observations of a focused (plenoptic 2.0) camera straight from its optics, without rendering.

Each board corner X (physical frame) is imaged by the main lens at X' (thin lens); the chief ray
from X' through the pinhole centre L of a micro-lens meets the sensor at the lens type's gap
b_T behind it: q = L + (L - X') b_T / (D - Z'), Z' the depth of X' behind the main lens
(negative Z' side: the MLA at z = -D, X' at z = -Z'). The corner is seen by that micro-lens when
q lies inside its micro-image (within ``radius_fraction`` of the micro-image radius of its true
centre, :meth:`~lf_mpc_calib.simulation.optics.Camera.micro_image_centres`). The rows follow the
focused-camera convention: (i, j) = that true micro-image centre, (u, v) = q - centre, with
the lens type of each ray. This is the independent source the calibration of a focused camera is
checked against (:mod:`benchmarks.bench_focused`).
"""

import numpy as np

from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import InvalidInputError


def focused_observations(camera, board, rvecs, tvecs, *, noise_px=0.0, rng=None,
                         radius_fraction=0.9, max_blur_px=None):
    """
    Observations (with lens_type) of ``board`` (camera.board.Checkerboard) at MPC-frame poses
    rvecs (P, 3), tvecs (P, 3) seen by the focused ``camera``; Gaussian noise of noise_px raw
    pixels on (u, v). max_blur_px: keep only the rays whose micro-lens (its own gap b and
    focal length f) blurs the corner over at most this many px (blur circle pitch b
    |1/f - 1/b - 1/depth|, depth: the corner's intermediate image before the MLA; a
    multi-focus camera's types each see their own depths), or None: every ray. Returns
    Observations.
    """
    if camera.camera_type != 'focused':
        raise InvalidInputError(f'focused_observations needs a focused camera, got '
                                f'{camera.camera_type!r}')
    pts = board.points()
    grid = camera.lenslet_grid()
    kl_all = camera.micro_image_of(grid.centres())[0]
    lens = camera.lens_centres(kl_all)                          # (M, 2) MLA plane, m
    gaps = camera.lens_gaps(kl_all)
    centres = camera.micro_image_centres(kl_all)
    types = camera.mla.lens_type(kl_all)
    focal = camera.lens_focal_lengths(kl_all) if max_blur_px is not None else None
    radius = radius_fraction * camera.micro_image_radius
    F, D = camera.main_lens.focal_length, camera.D
    rng = np.random.default_rng() if rng is None else rng
    parts = []
    for p, (rv, tv) in enumerate(zip(np.asarray(rvecs, float), np.asarray(tvecs, float))):
        rmat, t = camera.pose_to_physical(rv, tv)
        x = pts @ rmat.T + t                                     # (C, 3) physical, z > 0
        zi = F * x[:, 2] / (x[:, 2] - F)                         # image distance behind lens
        xi = -x[:, :2] * (zi / x[:, 2])[:, None]                 # image point (lateral)
        # sensor hit of the line X' -> L, for every (corner, lens) pair
        depth = D - zi                                           # from X' to the MLA (signed)
        q_xy = lens[None] + (lens[None] - xi[:, None]) * (gaps[None, :, None]
                                                          / depth[:, None, None])
        q = camera.sensor_to_pixel(q_xy.reshape(-1, 2)).reshape(q_xy.shape)
        uv = q - centres[None]
        seen = np.einsum('cmk,cmk->cm', uv, uv) < radius * radius
        if focal is not None:
            blur = camera.mla.pitch * gaps[None] * np.abs(
                1.0 / focal[None] - 1.0 / gaps[None] - 1.0 / depth[:, None])
            seen &= blur <= max_blur_px * camera.sensor.pixel_pitch
        c, m = np.nonzero(seen)
        noisy = uv[c, m] + rng.normal(0.0, noise_px, (len(c), 2)) if noise_px > 0 else uv[c, m]
        parts.append(Observations(np.full(len(c), p), c, pts[c],
                                  np.column_stack([centres[m], noisy]),
                                  types[m] if camera.mla.n_types > 1 else None))
    return Observations.concatenate(parts)
