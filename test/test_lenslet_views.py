"""Tests of lf_mpc_calib.lenslet.views: which decoded views sample only their own bright disk."""

import numpy as np

from lf_mpc_calib.lenslet.decode import Decoder
from lf_mpc_calib.lenslet.views import aperture_radius, clean_views
from lf_mpc_calib.simulation.optics import IDEAL, Checkerboard as SimBoard, preset
from lf_mpc_calib.simulation.render import render_raw, render_white


def _ramp_view_errors(camera, views=9):
    """
    Per view, the RMS shift (view px) of each decoded pixel's ray from the model's ray.

    A fronto-parallel scene at the focus distance whose level is linear in x (then in y) is
    rendered with one ray per pixel (the pixel centre through the lens centre, exactly the
    ground truth's rays) and decoded with the true grid; a decoded level, divided by the
    decoded white, is then the mean board x (y) its samples saw, compared with where the
    ground-truth ray of that view pixel meets the board. Returns (errors (n_j, n_i), decoder).
    """
    grid = camera.lenslet_grid()
    truth = camera.ground_truth_model(grid)
    z = camera.main_lens.focus_distance
    span = 1.2 * max(camera.field_of_view(z))
    dec = Decoder(grid, white=render_white(camera, samples=1), views=(views, views))
    white = dec.decode(render_white(camera, samples=1)).views
    rows, cols = dec.view_shape
    v, u = np.mgrid[4:rows - 4, 4:cols - 4]
    err = np.full(dec.bright.shape, np.nan)
    levels = []
    for axis in (0, 1):
        class Ramp(SimBoard):
            def shade(self, x, y):
                return 0.5 + (x, y)[axis] / span
        raw = render_raw(camera, Ramp(3, 3, 0.01), np.zeros(3), np.array([0.0, 0.0, z]),
                         samples=1)
        levels.append(dec.decode(raw).views)
    for a, j in enumerate(dec.j_values):
        for b, i in enumerate(dec.i_values):
            w = white[a, b, 4:rows - 4, 4:cols - 4]
            if not dec.bright[a, b] or not np.all(w > 0):
                continue
            ijuv = np.column_stack([np.full(u.size, i), np.full(u.size, j), u.ravel(),
                                    v.ravel()]).astype(float)
            ray = truth.rays(ijuv)
            board = ray[:, :2] + ray[:, 2:] * z          # where the model's ray meets z
            per_px = np.abs(truth.k_u * z), np.abs(truth.k_v * z)
            shift = [((levels[k][a, b, 4:rows - 4, 4:cols - 4] / w - 0.5) * span).ravel()
                     - board[:, k] for k in (0, 1)]
            err[a, b] = np.sqrt(np.mean((shift[0] / per_px[0]) ** 2
                                        + (shift[1] / per_px[1]) ** 2))
    return err, dec


def test_clean_views_sample_the_model_rays_exactly_other_views_do_not():
    # Lytro optics (hex lenslets nearly touching: 9.94 px pitch, 4.77 px bright disk) on a
    # small crop, rendered with the ground truth's own rays (one per pixel); an ideal sensor:
    # the check is exact to interpolation round-off, which shot noise and PRNU are not
    camera = preset('lytro', scale=0.12, **IDEAL)
    err, dec = _ramp_view_errors(camera)
    radius = aperture_radius(render_white(camera, samples=1), dec.grid)
    # The bright disk is 4.77 px, but neighbours begin 0.2 px further out: the estimate lies
    # between the two (bilinear profile of a pixelated disk), capped at half the pitch.
    assert 4.6 < radius <= 0.5 * dec.grid.pitch + 1e-9
    clean = clean_views(dec.grid, dec.i_values, dec.j_values, radius=radius)
    # Decoding convention = ground truth: clean views reproduce the model's rays to
    # interpolation round-off (OpenCV's 1/32 px remap weights on a sharp disk edge).
    assert np.nanmax(err[clean & dec.bright]) < 0.01, err
    assert np.count_nonzero(clean) == 37          # 7 x 7 without its 12 outer corners
    # Bright views that read a neighbouring micro-image (or cut pixels) are off by up to
    # 0.1 px RMS here (measured 0.098): why they are left out.
    rejected = dec.bright & ~clean
    assert np.nanmax(err[rejected]) > 0.05, err
    # the decoder's usable views are exactly these clean views
    np.testing.assert_array_equal(dec.valid, clean & dec.bright)


def test_clean_views_hex_cell_and_disk():
    camera = preset('illum', scale=0.1)
    grid = camera.lenslet_grid()
    v = np.arange(-4, 5)
    # Illum: 14.2 px pitch, 6.84 px disk: every view of 9 x 9 but its 4 corners (whose
    # bilinear box reaches 7.1 px from the centre).
    clean = clean_views(grid, v, v, radius=camera.micro_image_radius)
    assert np.count_nonzero(clean) == 77 and not clean[0, 0] and clean[0, 1]
    # Without the disk the hexagonal cell alone decides: (+-4, 0) reaches the side
    # neighbour's cell boundary (7.12 px) only beyond 9 x 9.
    assert clean_views(grid, v, v).all()
    radius = aperture_radius(render_white(camera, samples=1), grid)
    assert abs(radius - camera.micro_image_radius) < 0.15      # measured 0.05 px
