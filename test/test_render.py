"""Tests of lf_mpc_calib.simulation.render: white images, raw frames against the ground truth."""

import numpy as np
import pytest
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.simulation.optics import IDEAL, Checkerboard, preset
from lf_mpc_calib.simulation.render import (
    bayer_gains, pixel_turns, quantize, render_raw, render_white, sample_pattern)


def _board_pose(cam, board, rvec, distance):
    """A pose (rvec, tvec) in the MPC frame: board centre on the axis at ``distance``."""
    r = Rotation.from_rotvec(rvec).as_matrix()
    centre = np.array([(board.cols - 1) * board.square / 2, (board.rows - 1) * board.square / 2,
                       0.0])
    return cam.pose_from_physical(r, np.array([0.0, 0.0, distance]) - r @ centre)


def _indexed_pixels(cam, q):
    """Index raw pixels q (N, 2) with the ground-truth grid alone: (ijuv (N, 4), inside (N,))."""
    g = cam.lenslet_grid()
    kl = g.indices()
    centres = g.centres()
    dist, n = cKDTree(centres).query(q)
    inside = dist < 0.5 * g.row_spacing
    m = centres[n]
    if cam.camera_type == 'focused':
        return np.column_stack([m, q - m]), inside
    e_row, e_col = g.row_vector / g.pitch, g.column_vector / g.row_spacing
    ij = np.column_stack([(q - m) @ e_row, (q - m) @ e_col])
    u = kl[n, 0] + 0.5 * ((kl[n, 1] + g.hex_parity) % 2)
    return np.column_stack([ij, u, kl[n, 1]]), inside


def _expected_shade(model, ijuv, board, rvec, tvec):
    """Board-frame hit of each ground-truth ray and its colour (1 black, 0 white, -1 off)."""
    rays = model.rays(ijuv)
    r = Rotation.from_rotvec(rvec).as_matrix()
    o = np.column_stack([rays[:, :2], np.zeros(len(rays))]) - tvec
    d = np.column_stack([rays[:, 2:], np.ones(len(rays))])
    o, d = o @ r, d @ r                    # rows of R^T (X - t): board frame
    lam = -o[:, 2] / d[:, 2]
    xy = (o + lam[:, None] * d)[:, :2] / board.square
    a, b = np.floor(xy[:, 0]) + 1, np.floor(xy[:, 1]) + 1
    black = ((a + b) % 2 == 0).astype(int)
    off = (a < 0) | (a > board.cols) | (b < 0) | (b > board.rows)
    edge = np.minimum(np.abs(xy - np.rint(xy)).min(axis=1), 1.0)
    return np.where(off, -1, black), edge


@pytest.mark.parametrize('name,scale', [('lytro', 0.12), ('focused-keplerian', 0.25),
                                        ('focused-galilean', 0.25)])
def test_render_raw_matches_ground_truth_rays(name, scale):
    # the ray tracer against the model, exact to float rounding: an ideal sensor (the
    # realistic one's shot noise and PRNU are not exact)
    cam = preset(name, scale=scale, **IDEAL)
    board = Checkerboard(3, 3, 0.55 * cam.field_of_view(cam.scene_distance)[0] / 6)
    rvec = np.array([0.35, -0.25, 0.1])
    rv, tv = _board_pose(cam, board, rvec, cam.scene_distance)
    raw = render_raw(cam, board, rv, tv, samples=4)
    white = render_white(cam, samples=4)
    H, W = raw.shape
    ys, xs = np.mgrid[0:H, 0:W]
    q = np.column_stack([xs.ravel(), ys.ravel()]).astype(float)
    ijuv, inside = _indexed_pixels(cam, q)
    colour, edge = _expected_shade(cam.ground_truth_model(), ijuv, board, rv, tv)
    # pixels well inside a micro-image's aperture disk and well inside one square (the
    # footprint of a pixel's 4 samples on the board is < 0.2 square for these cameras)
    sel = inside & (white.ravel() > 0.6) & (colour >= 0) & (edge > 0.2)
    assert sel.sum() > 0.02 * sel.size   # the squares cover ~13 % of the raw
    expected = np.where(colour[sel] == 1, board.dark, board.light) * white.ravel()[sel]
    err = np.abs(raw.ravel()[sel] - expected)
    # the renderer and the model must agree on (nearly) every such pixel
    # exact up to rounding (the renderer's float32 samples: ~1e-7): no sample of these pixels
    # reaches another square (that would be an error of 0.1 or more)
    assert np.quantile(err, 0.995) < 1e-6


def test_render_white_spots_centred_on_grid():
    # the optics' spot centroids to 0.05 px and the disk's area: an ideal sensor (dust, PRNU
    # and the pedestal move a centroid; the grid tests check the realistic whites)
    cam = preset('lytro', scale=0.08, **IDEAL)
    white = render_white(cam, samples=9)
    g = cam.lenslet_grid()
    centres = g.centres()
    H, W = white.shape
    ys, xs = np.mgrid[0:H, 0:W]
    q = np.column_stack([xs.ravel(), ys.ravel()]).astype(float)
    _, n = cKDTree(centres).query(q)
    w = white.ravel()
    mass = np.bincount(n, w, len(centres))
    cx = np.bincount(n, w * q[:, 0], len(centres)) / mass
    cy = np.bincount(n, w * q[:, 1], len(centres)) / mass
    err = np.hypot(cx - centres[:, 0], cy - centres[:, 1])
    central = np.linalg.norm(centres - cam.sensor.centre, axis=1) < 0.3 * W
    # spot centroids sit on the micro-image centres; the cos^4 falloff and the pixel sampling
    # move them by a few hundredths of a pixel
    assert np.median(err[central]) < 0.05
    # without the cos^4 falloff the aperture disk fills pi r^2 of each cell
    flat = render_white(preset('lytro', scale=0.08, sensor__natural_vignetting=False,
                               **IDEAL), samples=9)
    mass = np.bincount(n, flat.ravel(), len(centres))
    cell = g.pitch * g.row_spacing
    fill = np.pi * cam.micro_image_radius ** 2 / cell
    assert mass[central].mean() / cell == pytest.approx(fill, rel=0.01)


def test_render_white_vignetting_at_border():
    # full-size Lytro: the lens barrel cuts the corner micro-images (cat's eyes); cos^4
    # falloff off, so only the stops count
    cam = preset('lytro', sensor__natural_vignetting=False)
    rng = np.random.default_rng(0)
    centre = cam.sensor.centre + rng.uniform(-30, 30, (4000, 2))
    corner = np.array([3250.0, 3250.0]) + rng.uniform(-30, 30, (4000, 2))
    assert np.isfinite(cam.main_lens.barrel_radius)
    inner = cam.trace(centre)[2].mean()
    assert cam.trace(corner)[2].mean() < 0.8 * inner
    # without the barrel a thin lens and pinholes pass the same disk everywhere
    open_cam = preset('lytro', sensor__natural_vignetting=False,
                      main_lens__barrel_radius=np.inf)
    assert open_cam.trace(corner)[2].mean() == pytest.approx(inner, rel=0.03)
    # the cos^4 falloff of the field angle (slope ~0.5 at the corner) darkens it further
    natural = preset('lytro', main_lens__barrel_radius=np.inf)
    slope2 = np.sum((cam.pixel_to_sensor([[3250.0, 3250.0]]) / (cam.D + cam.gap)) ** 2)
    assert natural.trace(corner)[2].mean() == pytest.approx(inner / (1 + slope2) ** 2, rel=0.05)


def test_render_focus_plane_gives_uniform_micro_images():
    # conventional camera: a board on the focus plane is seen by each micro-lens as one point,
    # so micro-images are flat; off the focus plane they show the board's edges (defocus)
    cam = preset('lytro', scale=0.08)
    board = Checkerboard(3, 3, 0.004)
    white = render_white(cam, samples=4)
    g = cam.lenslet_grid()
    H, W = white.shape
    ys, xs = np.mgrid[0:H, 0:W]
    q = np.column_stack([xs.ravel(), ys.ravel()]).astype(float)
    _, n = cKDTree(g.centres()).query(q)
    spread = []
    for distance in (0.4, 0.25):
        rv, tv = _board_pose(cam, board, np.zeros(3), distance)
        raw = render_raw(cam, board, rv, tv, samples=4)
        ratio = np.divide(raw, white, out=np.zeros_like(raw), where=white > 0.6).ravel()
        ok = white.ravel() > 0.6
        mean = np.bincount(n[ok], ratio[ok], len(g.centres())) / np.maximum(
            np.bincount(n[ok], minlength=len(g.centres())), 1)
        spread.append(np.mean(np.abs(ratio[ok] - mean[n[ok]])))
    assert spread[0] < 0.02 and spread[1] > 5 * spread[0]


def test_render_bayer_noise_and_quantize():
    # the mosaic's gains and the Gaussian noise exactly: an ideal sensor
    cam = preset('lytro', scale=0.05, sensor__bayer='rggb', **IDEAL)
    white = render_white(cam)
    gains = bayer_gains(cam)
    assert gains[0, 0] == 0.8 and gains[0, 1] == 1.0 and gains[1, 1] == 0.7
    flat = preset('lytro', scale=0.05, **IDEAL)
    np.testing.assert_allclose(white, np.clip(render_white(flat) * gains, 0, 1), atol=1e-12)
    board = Checkerboard(3, 3, 0.004)
    rv, tv = _board_pose(flat, board, np.zeros(3), 0.3)
    clean = render_raw(flat, board, rv, tv)
    noisy = render_raw(flat, board, rv, tv, noise=0.02, rng=np.random.default_rng(4))
    again = render_raw(flat, board, rv, tv, noise=0.02, rng=np.random.default_rng(4))
    np.testing.assert_array_equal(noisy, again)        # seeded: reproducible
    mid = (clean > 0.1) & (clean < 0.9)
    assert np.std(noisy[mid] - clean[mid]) == pytest.approx(0.02, rel=0.05)
    q8, q16 = quantize(clean, 8), quantize(clean, 16)
    assert q8.dtype == np.uint8 and q16.dtype == np.uint16
    assert np.abs(q16 / 65535.0 - clean).max() <= 0.5 / 65535 + 1e-12


def test_sample_pattern_is_centred():
    for n in (2, 4, 5, 16):
        p = sample_pattern(n)
        assert p.shape == (n, 4)
        assert np.abs(p[:, :2]).max() < 0.5 and np.hypot(p[:, 2], p[:, 3]).max() <= 1.0
        # exactly centred: anti-aliasing must not displace the rendered image
        np.testing.assert_allclose(p.mean(axis=0), 0.0, atol=1e-15)
        assert len(np.unique(np.round(p, 12), axis=0)) == n, 'no repeated sample'
    np.testing.assert_array_equal(sample_pattern(1), np.zeros((1, 4)))


def test_sample_pattern_integrates_x_and_y_alike():
    # The micro-lens aperture point (ex, ey) sets where a raw pixel's ray meets the lens
    # plane, i.e. the spatial footprint of a view pixel. The old 4-sample pattern had mean
    # ey^2 0.09 against ex^2 0.36, so rendered Lytro corners had 0.136 px RMS of aliasing in v
    # against 0.053 px in u and k_j came out 0.7 % off. Counts that are multiples of 4 are
    # isotropic; 4 samples match the second moments of a uniform pixel (1/12) and disk (1/4).
    # The lens points' mean squared radius must be the disk's (1/2): with 16 samples whose
    # radii missed the rim (0.32) corners locked towards the middle between lens rows.
    for n in (4, 8, 16, 32):
        m2 = np.mean(sample_pattern(n) ** 2, axis=0)
        np.testing.assert_allclose(m2[0], m2[1], rtol=1e-12)
        np.testing.assert_allclose(m2[2:], 0.25, rtol=1e-12)
    m2 = np.mean(sample_pattern(4) ** 2, axis=0)
    np.testing.assert_allclose(m2, [1 / 12, 1 / 12, 0.25, 0.25], atol=0.006)


def _cut_disks(d, big):
    """(area, centroid distance towards the other disk) (n, ...) of the intersection of the
    unit disk and a disk of radius ``big`` centred ``d`` away: two circular segments on the
    common chord (area r^2 acos(h/r) - h sqrt(r^2 - h^2), first moment 2/3 (r^2 - h^2)^1.5);
    the unit disk whole where it lies inside, nothing where they do not meet."""
    d = np.maximum(d, 1e-12)
    a = np.clip((d * d + 1.0 - big * big) / (2.0 * d), -1.0, 1.0)  # chord from the unit centre
    h = np.clip(d - a, -big, big)                                    # and from the other's
    area_1 = np.arccos(a) - a * np.sqrt(1.0 - a * a)
    area_2 = big * big * np.arccos(h / big) - h * np.sqrt(big * big - h * h)
    moment = 2.0 / 3.0 * (1.0 - a * a) ** 1.5 + d * area_2 \
        - 2.0 / 3.0 * (big * big - h * h) ** 1.5
    area = np.where(d + 1.0 <= big, np.pi, np.where(d >= big + 1.0, 0.0, area_1 + area_2))
    return area, np.where(area > 0, moment / np.maximum(area, 1e-300), 0.0) \
        * (d + 1.0 > big)


def test_turned_lens_points_cut_like_a_continuous_aperture():
    # A ray from sub-pixel offset d through lens point e (unit disk) of a pixel u px from a
    # defocused micro-image's centre passes the aperture when |u + d + rho e| <= R (R its
    # image's radius, rho the bundle's) and reads the scene at d - blur e: where the cut
    # keeps part of the bundle the pixel reads off its chief ray, by the kept rays' mean of
    # d - blur e. The reference: a continuous pixel and lens, the disks' analytic overlap
    # integrated over 16 x 16 points of the pixel. The 64 (d, e) samples shared by every
    # pixel miss it by 7-19 % (d and e are drawn together, so the cut keeps a biased set;
    # the same shift in every micro-image moved the Galilean preset's corners); with e turned
    # per pixel (pixel_turns) the mean over the pixels at a radius matches.
    R, rho, blur = 9.0, 3.7, -1.5
    pattern = sample_pattern(64)
    d, e = pattern[:, :2], pattern[:, 2:]
    g = np.arange(-14, 15, dtype=float)
    pix = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    u = pix - [0.3, 0.17]
    r = np.hypot(*u.T)
    keep = (r > R - rho + 0.5) & (r < R + rho - 1.5)
    pix, u, r = pix[keep], u[keep], r[keep]
    out = u / r[:, None]
    c, s = pixel_turns(pix[:, 0], pix[:, 1])
    assert np.allclose(c ** 2 + s ** 2, 1.0) and np.ptp(np.arctan2(s, c)) > 6.0
    turned = np.stack([c[:, None] * e[:, 0] - s[:, None] * e[:, 1],
                       s[:, None] * e[:, 0] + c[:, None] * e[:, 1]], -1)
    # reference: area-weighted mean over the pixel of (d - blur x centroid of the kept e)
    t = (np.arange(16) + 0.5) / 16 - 0.5
    dd = np.stack(np.meshgrid(t, t), -1).reshape(-1, 2)             # (Q, 2)
    at = u[:, None, :] + dd[None]                                     # (n, Q, 2)
    dist = np.hypot(at[..., 0], at[..., 1])
    area, cen = _cut_disks(dist / rho, R / rho)                       # centroid towards -at
    read = dd[None] + blur * cen[..., None] * at / dist[..., None]
    truth = np.einsum('nq,nqk,nk->n', area, read, out) / area.sum(1)
    err = {}
    for name, pts in (('shared', np.broadcast_to(e, turned.shape)), ('turned', turned)):
        kept = np.square(u[:, None, :] + d + rho * pts).sum(-1) <= R * R
        shift = np.einsum('nsk,nk->ns', d - blur * pts, out)
        mean = (shift * kept).sum(1) / kept.sum(1)
        bands = np.floor(r - (R - rho))
        err[name] = np.array([[mean[bands == b].mean() - truth[bands == b].mean(),
                               truth[bands == b].mean()] for b in np.unique(bands)])
    # measured: shared +0.020 to +0.091 px, all one way (7-19 % of the cut's shift);
    # turned -0.007 to +0.006 px
    assert np.abs(err['turned'][:, 0]).max() < 0.01
    assert np.all(err['shared'][:, 0] > 0.0) and err['shared'][:, 0].max() > 0.05


def test_render_bad_input():
    cam = preset('lytro', scale=0.05)
    board = Checkerboard(3, 3, 0.004)
    with pytest.raises(InvalidInputError, match='rvec and tvec must be 3 finite'):
        render_raw(cam, board, [0, 0], [0, 0, 0.3])
    with pytest.raises(InvalidInputError, match='board must be'):
        render_raw(cam, 'board', [0, 0, 0], [0, 0, 0.3])
    with pytest.raises(InvalidInputError, match='samples must be a positive integer'):
        render_white(cam, samples=0)
    with pytest.raises(InvalidInputError, match='camera must be'):
        render_white(None)
    with pytest.raises(InvalidInputError, match='bit_depth must be 8 or 16'):
        quantize(np.zeros((2, 2)), 12)


def test_natural_vignetting_keeps_the_bundle_centred_on_the_chief_ray():
    # the ground truth gives each pixel the chief ray through its micro-lens centre; the
    # renderer integrates the bundle through the whole micro-lens aperture, so its weighted
    # mean ray must be that chief ray, with the cos^4 falloff on
    cam = preset('lytro', scale=0.3)
    assert cam.sensor.natural_vignetting and cam.mla.focal_length is not None
    W, H = cam.sensor.size
    rng = np.random.default_rng(5)
    q = np.array([W / 2, H / 2]) + rng.uniform(-0.4, 0.4, (200, 2)) * [W, H]
    kl, centres = cam.micro_image_of(q)
    near = np.linalg.norm(q - centres, axis=1) < 0.7 * cam.micro_image_radius
    q, kl = q[near], kl[near]
    disk = sample_pattern(64)[:, 2:] * 0.5 * cam.mla.pitch          # (S, 2) symmetric
    pts = np.repeat(q, len(disk), axis=0)
    e = np.tile(disk, (len(q), 1))
    origin, slope, weight = cam.trace(pts, lens_points=e, kl=np.repeat(kl, len(disk), axis=0))
    z = cam.scene_distance
    hit = (origin + z * slope).reshape(len(q), len(disk), 2)
    w = weight.reshape(len(q), len(disk))
    assert np.all(w > 0)                                               # no stop cuts these
    mean = np.einsum('ns,nsd->nd', w, hit) / w.sum(axis=1)[:, None]
    o0, s0, _ = cam.trace(q, kl=kl)
    chief = o0 + z * s0
    # exact up to rounding (a uniform weight over a centred pattern)
    np.testing.assert_allclose(mean, chief, rtol=0, atol=1e-12)
    # weighting each ray by its own angle (the old rule) would move the mean ray measurably
    lens = cam.lens_centres(np.repeat(kl, len(disk), axis=0))
    incident = (lens + e - cam.pixel_to_sensor(pts)) / cam.gap
    w_ray = (1.0 / (1.0 + np.sum(incident ** 2, axis=1)) ** 2).reshape(w.shape)
    biased = np.einsum('ns,nsd->nd', w_ray, hit) / w_ray.sum(axis=1)[:, None]
    footprint = np.linalg.norm(hit - chief[:, None], axis=2).max(axis=1)   # bundle radius
    # measured: 2.9 % of the bundle's radius on the board (median), the bias that
    # cost k_i, k_j ~0.5 % end to end
    assert np.median(np.linalg.norm(biased - chief, axis=1) / footprint) > 0.01


def test_kept_rays_and_whites_render_what_a_fresh_setup_renders(monkeypatch):
    """The rays of a camera's pixels and its white are kept for its next images (they
    depend on the optics alone): an equal camera built afresh renders the same frame and
    white as a first render, with nothing kept, and the white handed out is a copy."""
    from lf_mpc_calib.simulation import render
    board = Checkerboard(5, 4, 0.004)

    def frame(cam):
        rvec, tvec = _board_pose(cam, board, [0.2, -0.1, 0.05], cam.scene_distance)
        return render_raw(cam, board, rvec, tvec, samples=4, rng=np.random.default_rng(3))

    for name in ('lytro', 'focused-multifocus'):
        render._RAYS.clear()
        render._WHITES.clear()
        first, white = frame(preset(name, scale=0.1)), render_white(preset(name, scale=0.1))
        assert render._RAYS and render._WHITES       # kept
        white[:] = 0.0                                # a copy: the kept white is untouched
        again = preset(name, scale=0.1)               # equal optics, another object
        assert np.array_equal(frame(again), first)
        assert np.array_equal(render_white(again), render_white(preset(name, scale=0.1)))
        assert render_white(again).max() > 0.5
        with monkeypatch.context() as m:              # nothing kept: set up afresh
            m.setattr(render, 'RAYS_KEPT_BYTES', 0)
            render._RAYS.clear()
            assert np.array_equal(frame(again), first) and not render._RAYS
        # other optics are not the kept ones
        assert render._optics_key(preset(name, scale=0.1, main_lens__f_number=8.0)) != \
            render._optics_key(again)
