"""Corner refinement in defocused micro-images, checked against the optics: the blurred corner's
position, the aperture's image and the pixels' bundles read from the white, and the rows of a
defocused frame against the chief rays (simulation.focused_observations)."""

import numpy as np
import pytest

from lf_mpc_calib.features.micro_image_corners import (MicroImageCornerDetector,
                                                       MicroImageOptions)
from lf_mpc_calib.features.micro_image_refine import refine_in_disks
from lf_mpc_calib.lenslet.estimate import estimate_grid
from lf_mpc_calib.simulation.focused_observations import focused_observations
from lf_mpc_calib.simulation.focused_raw import board_pose, lens_types_of, match_truth
from lf_mpc_calib.simulation.optics import Checkerboard, preset
from lf_mpc_calib.simulation.render import less_dark, render_raw, render_white

pytestmark = pytest.mark.cost(22)   # s on the CI machine: scheduled early (conftest)


def _blurred_corner(centre, angle, blur, n=33, steps=10):
    """X-junction image (n, n) at centre (2,), axes turned by angle, pixel-integrated and
    blurred by a disk of radius ``blur`` px (dense quadrature)."""
    g = (np.arange(steps) + 0.5) / steps - 0.5
    d = np.stack(np.meshgrid(np.linspace(-1, 1, 9), np.linspace(-1, 1, 9)), -1).reshape(-1, 2)
    d = d[np.hypot(*d.T) <= 1.0] * blur if blur > 0 else np.zeros((1, 2))
    ys, xs = np.mgrid[0:n, 0:n].astype(float)
    c, s = np.cos(angle), np.sin(angle)
    acc = np.zeros((n, n))
    for dx in g:
        for dy in g:
            for ex, ey in d:
                x, y = xs + dx + ex - centre[0], ys + dy + ey - centre[1]
                acc += (c * x + s * y) * (-s * x + c * y) > 0
    return (0.08 + 0.77 * acc / (len(g) ** 2 * len(d))).astype(np.float32)


@pytest.mark.parametrize('blur, tol', [(0.0, 0.08), (2.0, 0.04)])
def test_blurred_corner_found_where_it_is(blur, tol):
    # sharp: the pixel grid's own ~0.05 px (cornerSubPix does as well); blurred by 2 px the
    # point symmetry the wide window keeps gives the corner (cornerSubPix 5 x 5: 0.06 px)
    rng = np.random.default_rng(4)
    for _ in range(3):
        c = np.array([16.0, 16.0]) + rng.uniform(-0.5, 0.5, 2)
        img = _blurred_corner(c, rng.uniform(0, np.pi), blur)
        start = c + rng.uniform(-0.6, 0.6, 2)
        got = refine_in_disks(img, start[None], np.array([[16.0, 16.0]]), 15.0, 4)[0]
        assert np.hypot(*(got - c)) < tol


def test_window_cut_by_the_disk_stays_symmetric():
    # a corner 3 px from the usable rim: the window keeps the offsets mirrored inside
    c = np.array([16.3, 15.8])
    img = _blurred_corner(c, 0.4, 2.0)
    got = refine_in_disks(img, (c + [0.4, -0.3])[None], np.array([[10.0, 16.0]]), 9.5, 4)[0]
    assert np.hypot(*(got - c)) < 0.06
    assert np.all(np.isnan(refine_in_disks(img, c[None], np.array([[16.0, 16.0]]), 0.5, 4)))


def bundle_radius_px(cam, f, b):
    """The optics' rho: the bundle of a pixel on the main lens, the micro-lens disk x |1 - D /
    a|, a the distance a micro-lens of focal length f at gap b images the sensor to; in
    pixels x b / (D p_x)."""
    return 0.5 * cam.mla.pitch * b / cam.sensor.pixel_pitch * abs(1 / f - 1 / b - 1 / cam.D)


def test_aperture_and_bundles_read_from_the_white():
    cam = preset('focused-multifocus', scale=0.5)
    # 128 rays per pixel: a 16-ray white's rims read rho 4-6 % narrow (64 rays: 2.5-3 %)
    # the white as calibrate-raw hands it on: its dark frame (black level) subtracted
    det = MicroImageCornerDetector(less_dark(cam, render_white(cam, samples=128)),
                                   estimate_grid(less_dark(cam, render_white(cam, samples=4))))
    det.lens_types = lens_types_of(cam, det.centres)
    r_ap, rho = det.aperture_profile()
    for t, f in enumerate(cam.mla.type_focal_lengths):
        truth = bundle_radius_px(cam, f, cam.gap + cam.mla.type_gap_offsets[t])
        sel = det.lens_types == t
        # measured: rho -0.3 / -0.1 / +2.1 %, R -0.04 / +0.06 / +0.20 px (with the sampling's
        # spread left out of the rim model: -0.4 / +1.2 / +14 %, micro_image_corners.
        # SAMPLING_SD)
        assert abs(np.median(rho[sel]) / truth - 1) < 0.04
        assert abs(np.median(r_ap[sel]) - cam.micro_image_radius) < 0.25


@pytest.mark.parametrize('name, f_number, r_tol', [('focused-keplerian', 4.0, 0.1),
                                                   ('focused-keplerian', 5.6, 0.1),
                                                   ('focused-galilean', 5.6, 0.25)])
def test_aperture_read_from_a_stopped_down_white(name, f_number, r_tol):
    # stopped down, the aperture's image (R 7.3 / 5.2-5.5 px) is small against the bundles
    # (rho 3.7-3.9 px): the plateau inside R - rho is 1.5-3.7 px wide, and the plateau fitted
    # apart from the rim took part of the rim (f/5.6: rho 0.00-0.06 px, R +1.2-1.6 px; f/4:
    # R +0.21 px)
    cam = preset(name, scale=0.4, main_lens__f_number=f_number)
    det = MicroImageCornerDetector(less_dark(cam, render_white(cam, samples=128)))
    r_ap, rho = det.aperture_profile()
    truth = bundle_radius_px(cam, cam.mla.focal_length, cam.gap)
    # measured: rho -2.5 / -2.7 / +5.9 %, R -0.04 / -0.04 / +0.17 px
    assert abs(np.median(rho) / truth - 1) < 0.08
    assert abs(np.median(r_ap) - cam.micro_image_radius) < r_tol


def defocused_scene():
    """A half-size Keplerian board at 1.4 x the scene distance, micro-images blurred by ~1.8 px:
    (camera, detector, board, noise-free 64-sample raw frame, the optics' rows of its corners)."""
    cam = preset('focused-keplerian', scale=0.5, sensor__noise=0.0)
    # the white at 64 rays per pixel: its rims are the aperture's (a 16-ray white's are coarse,
    # and the aperture-cut correction, features.aperture_bias, reads them)
    det = MicroImageCornerDetector(less_dark(cam, render_white(cam, samples=64)))
    h = cam.field_of_view(cam.scene_distance)[1]
    board = Checkerboard(8, 5, 0.7 * h / 7)
    rv, tv = board_pose(cam, board, 1.4 * cam.scene_distance, (8.0, -6.0, 2.0))
    raw = less_dark(cam, render_raw(cam, board, rv, tv, samples=64, noise=0.0))
    truth = focused_observations(cam, board, rv[None], tv[None], radius_fraction=1.0)
    return cam, det, board, raw, truth


def radial_scale(found, truth):
    """(radial scale (fraction) of detected minus true (u, v), errors (K, 2)) of the rows
    ``found`` (Observations) against ``truth``; every row must match a true one."""
    err, unmatched = match_truth(found, truth)
    assert unmatched == 0
    uv = found.ijuv[:, 2:]          # rows come grouped by point, in match_truth's order
    return float(np.sum(err * uv) / np.sum(uv * uv)), err


def test_defocused_rows_lie_on_the_chief_rays():
    # cornerSubPix's 5 x 5 window put these rows 0.166 px RMS from the optics' chief rays, the
    # blur-wide symmetric window 0.078 px with a -0.56 % radial scale (the aperture's cut of the
    # bundles near the rims), 0.065 px and +0.08 % with that cut corrected (the default), on
    # frames whose pixels shared their 64 lens points. Since the renderer turns each pixel's
    # (simulation.render.pixel_turns) the cut's quadrature error is independent noise from
    # pixel to pixel instead of the same shift in every micro-image: 0.117 px RMS, -0.04 %
    # (the disk limited by clip_tolerance: 0.127 px, -0.02 %, against 0.09 px before)
    cam, det, board, raw, truth = defocused_scene()
    scale, err = radial_scale(det.detect(raw, board).observations, truth)
    assert len(err) > 400
    assert abs(scale) < 0.003
    assert np.sqrt(np.mean(np.sum(err ** 2, axis=1))) < 0.13
    limited = MicroImageCornerDetector(less_dark(cam, render_white(cam, samples=64)),
                                       options=MicroImageOptions(clip_tolerance=0.1))
    scale, err = radial_scale(limited.detect(raw, board).observations, truth)
    assert abs(scale) < 0.003 and np.sqrt(np.mean(np.sum(err ** 2, axis=1))) < 0.14
