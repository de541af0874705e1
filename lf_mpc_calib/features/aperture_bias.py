"""
The move that the main-lens aperture's cut gives corners refined in defocused micro-images.

    corner_bias(corners (N, 2), centres (N, 2), to_board (N, 2, 2), blur (N,), rho (N,),
                r_ap (N,), half (N,), radius (N,)) -> (N, 2) px, to subtract from the corners

A pixel of a focused camera sees the scene through its whole micro-lens: its ray bundle reads a
disk of the scene, of radius |blur| px in the micro-image, centred on its chief ray (the ray the
MPC model gives it). On the main-lens aperture the same bundle covers a disk of radius rho px
(in units of the aperture's image, the micro-image of radius r_ap) centred where the pixel
looks. Within rho of the rim the aperture cuts that disk, and the pixel sees only part of its
scene disk: micro-lens point e (unit disk) lands on the aperture at u + rho e (u the pixel's
offset from the micro-image centre) and reads the scene at p - blur e, blur = pitch |w| / 2 -
rho signed (Keplerian and Galilean alike; a rendered Galilean frame at 256 rays per pixel
matches this to the render's own noise, 0.015 of the board's contrast, out to 0.9 of the
micro-image radius). A refinement window that reaches such pixels finds the corner off its
chief ray: inward up to 0.1 px at 0.4-0.6 of the radius when |blur| is 2 px, which is a 1.5 %
scale error of (u, v) on a whole pose.

The move is measured by the same refinement (:func:`lf_mpc_calib.features.micro_image_refine.
refine_in_disks`, same window and disk) on two synthetic images of each corner built from the
local board (``to_board``: micro-image px -> board squares): the pixels read through their cut
bundles, and through whole ones. Their difference is the aperture's share of the corner's
error; whatever else the window does to a blurred corner cancels. Where the cut moves a corner
by more than ``max_move`` px (near the rim) the model's move outgrows the rendered one (+0.27-
0.37 px predicted against +0.10 px seen on a far Keplerian pose), so the move is NaN there and
the caller drops the row.

Measured (half-size presets, 256-ray frames and whites, 6 poses over each camera's depth range;
(u, v) scale error of each pose's rows against the optics' chief rays): Galilean -1.45 / -0.75
/ -0.45 / +0.07 / +0.14 / -0.01 % without, -0.00 / -0.08 / -0.07 / -0.13 / -0.04 / -0.07 %
with the correction (31-0 % of the rows dropped, most on the nearest poses); Keplerian +0.03 /
-0.00 / -0.00 / -0.08 / -0.15 / -0.64 % without, +0.02 / +0.00 / +0.05 / +0.05 / +0.12 /
-0.04 % with (0-51 % dropped, most on the farthest pose). The model needs the white's true
rims: with a 16-ray white the uncorrected rows happen to lie nearer the chief rays and the
correction overshoots. So do the frames', and a render converges slowly at the rims, where a
pixel keeps only part of its rays. At a near full-size Galilean pose (0.65 x; radial error of
the rows 3-4 / 4-5 / 5-6 px from the centre, the model given the optics' R and rho):

    frame / white rays     uncorrected               model's move          corrected
    256 / 64               -0.009 -0.045 -0.060      +0.027 +0.059 +0.081  +0.018 +0.014 +0.021
    256 / 256              -0.028 -0.074 -0.099      +0.025 +0.058 +0.080  -0.003 -0.015 -0.019
    1024 / 1024            -0.025 -0.061 -0.086      +0.026 +0.059 +0.079  +0.001 -0.002 -0.007

At 1024 rays the rendered move is 0.98 of the model's (1.12 at 256 rays: the excess is
the render's quadrature of the cut bundles, the same in every micro-image, not optics), so
benchmarks/bench_focused_raw.py renders at 1024 rays. Those renders used the same lens points
in every pixel. Checked against the analytic overlap of a continuous pixel, lens and aperture
(benchmarks/bench_aperture_cut.py, test_render.py), this model's 32 x 4 points give the cut
bundles' read shift within 2 %; the renderer's 64 shared points fell short of it by 6-19 %
(0.02-0.09 px at 1.5 px of blur, all one way), and it is they that were wrong: the renderer
now turns each pixel's lens points (simulation.render.pixel_turns) and matches within
0.007 px at 64 rays.
"""

import numpy as np

from lf_mpc_calib.features.micro_image_refine import refine_in_disks

BUNDLE_SAMPLES = 32
"""Micro-lens points per sub-pixel point of the synthetic images (a sunflower on the unit
disk), at each of 2 x 2 points of the pixel."""

MAX_MOVE = 0.1
"""Largest move (px) of a corner by the aperture's cut that is corrected rather than refused."""


def bundle_points(n=BUNDLE_SAMPLES):
    """(n, 2) evenly spread points of the unit disk (sunflower: equal areas, no axis)."""
    k = np.arange(n) + 0.5
    r = np.sqrt(k / n)
    a = k * np.pi * (3.0 - np.sqrt(5.0))
    pts = np.column_stack([r * np.cos(a), r * np.sin(a)])
    return pts - pts.mean(axis=0)


def corner_bias(corners, centres, to_board, blur, rho, r_ap, half, radius, *,
                n_samples=BUNDLE_SAMPLES, max_move=MAX_MOVE, batch=200):
    """
    (N, 2) px the aperture's cut moves each refined corner (see the module docstring).

    corners (N, 2) raw px; centres (N, 2) their micro-image centres; to_board (N, 2, 2) maps a
    raw-px offset in the micro-image to board squares; blur (N,) signed blur radius px
    (pitch |w| / 2 - rho); rho, r_ap (N,) px of the aperture profile; half, radius (N,) the
    refinement's half window and disk radius. Rows whose window cannot reach a cut pixel get 0;
    rows whose move exceeds ``max_move`` or cannot be measured get NaN.
    """
    q = np.asarray(corners, np.float64).reshape(-1, 2)
    n = len(q)
    out = np.zeros((n, 2))
    cen = np.asarray(centres, np.float64).reshape(-1, 2)
    blur, rho, r_ap, half, radius = (np.broadcast_to(np.asarray(a, np.float64), (n,))
                                     for a in (blur, rho, r_ap, half, radius))
    reach = np.hypot(*(q - cen).T) + np.sqrt(2.0) * half + 1.0
    todo = np.nonzero((reach > r_ap - rho) & (rho > 0) & (np.abs(blur) > 1e-3))[0]
    if todo.size == 0:
        return out
    # a pixel integrates its area too: 2 x 2 sub-pixel points, each with the bundle's points
    sub = np.array([[-0.25, -0.25], [0.25, -0.25], [-0.25, 0.25], [0.25, 0.25]])
    e = np.repeat(bundle_points(n_samples), len(sub), axis=0)           # (S, 2)
    sub = np.tile(sub, (n_samples, 1))                                  # (S, 2)
    hm = int(np.ceil(half[todo].max())) + 2
    size = 2 * hm + 1
    g = np.arange(-hm, hm + 1, dtype=np.float64)
    oy, ox = np.meshgrid(g, g, indexing='ij')
    off = np.column_stack([ox.ravel(), oy.ravel()])                   # (P, 2), row-major tile
    for s0 in range(0, todo.size, batch):
        idx = todo[s0:s0 + batch]
        m = idx.size
        base = np.round(q[idx])
        pix = base[:, None, :] + off[None]                            # (m, P, 2) pixel centres
        # sample point pix + sub: on the aperture at pix + sub - centre + rho e, reading the
        # board at A (pix + sub - blur e - corner) (A = to_board): each a sum of a pixel's
        # (m, P) term and a sample's (m, S) term, added in the (m, P, S) arrays below
        a_px = pix - cen[idx, None, :]                                   # (m, P, 2)
        a_s = sub[None] + rho[idx, None, None] * e[None]                 # (m, S, 2)
        ux = a_px[:, :, None, 0] + a_s[:, None, :, 0]
        uy = a_px[:, :, None, 1] + a_s[:, None, :, 1]
        whole = ux * ux + uy * uy <= (r_ap[idx] ** 2)[:, None, None]    # (m, P, S)
        to_b = to_board[idx]                                             # (m, 2, 2)
        b_px = np.einsum('mij,mpj->mpi', to_b, pix - q[idx, None, :])    # (m, P, 2)
        b_s = np.einsum('mij,msj->msi', to_b, sub[None] - blur[idx, None, None] * e[None])
        val = np.floor(b_px[:, :, None, 0] + b_s[:, None, :, 0])
        val += np.floor(b_px[:, :, None, 1] + b_s[:, None, :, 1])
        val %= 2.0                                                       # (m, P, S) 0 or 1
        kept = whole.sum(-1)
        cut = np.where(kept > 0, (val * whole).sum(-1) / np.maximum(kept, 1), 0.0)
        # tiles side by side in one image; the refinement starts on the true corner
        org = np.column_stack([hm + size * np.arange(m), np.full(m, hm)]).astype(np.float64)
        start = q[idx] - base + org
        tile_cen = cen[idx] - base + org
        moved = []
        for vals in (cut, val.mean(-1)):
            mosaic = vals.reshape(m, size, size).transpose(1, 0, 2).reshape(size, m * size)
            moved.append(refine_in_disks(mosaic.astype(np.float32), start, tile_cen,
                                         radius[idx], half[idx]) - start)
        d = moved[0] - moved[1]
        d[~(np.hypot(d[:, 0], d[:, 1]) <= max_move)] = np.nan
        out[idx] = d
    return out
