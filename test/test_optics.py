"""Tests of lf_mpc_calib.simulation.optics: presets, lattice, and the MPC ground truth."""

import math

import numpy as np
import pytest

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.simulation.optics import (
    IDEAL, Camera, Checkerboard, default_board, MainLens, preset, PRESETS)


def _traced_mpc_rays(cam, q, kl):
    """Trace raw points q (N, 2) through lenses kl, return MPC-frame rays (s, t, x, y) (N, 4)."""
    origin, slope, _ = cam.trace(q, kl=kl)
    n = q.shape[0]
    rm, tm = cam.mpc_frame()
    o = (np.column_stack([origin, np.zeros(n)]) - tm) @ rm     # rows: rm.T @ (X - t)
    d = np.column_stack([slope, np.ones(n)]) @ rm
    lam = -o[:, 2] / d[:, 2]
    p = o + lam[:, None] * d
    return np.column_stack([p[:, :2], d[:, :2] / d[:, 2:3]])


def _conventional_samples(cam, rng, n=300):
    g = cam.lenslet_grid()
    kl = np.column_stack([rng.integers(2, g.shape[0] - 2, n), rng.integers(2, g.shape[1] - 2, n)])
    centres = g.centres_of(kl)
    ij = rng.integers(-3, 4, (n, 2)).astype(float)
    e_row, e_col = g.row_vector / g.pitch, g.column_vector / g.row_spacing
    q = centres + ij[:, :1] * e_row + ij[:, 1:] * e_col
    uv = kl.astype(float)
    uv[:, 0] += 0.5 * ((kl[:, 1] + g.hex_parity) % 2)   # hex rows: lens sits half a pitch over
    return q, np.column_stack([ij, uv]), cam.micro_image_of(centres)[0]


@pytest.mark.parametrize('name', ['lytro', 'illum'])
@pytest.mark.parametrize('upright', [False, True])
def test_ground_truth_conventional_matches_traced_rays(name, upright):
    cam = preset(name, scale=0.15, sensor__upright=upright,   # lenses on the lattice: exact
                 main_lens__distortion=(0.3, -0.2), **IDEAL)
    q, ijuv, kl = _conventional_samples(cam, np.random.default_rng(3))
    expected = cam.ground_truth_model().rays(ijuv)
    traced = _traced_mpc_rays(cam, q, kl)
    # exact linear algebra: only rounding (positions ~1e-3 m, slopes ~0.3) separates them
    np.testing.assert_allclose(traced[:, :2], expected[:, :2], rtol=0, atol=1e-15)
    np.testing.assert_allclose(traced[:, 2:], expected[:, 2:], rtol=0, atol=1e-13)


def test_ground_truth_conventional_values_follow_notes():
    cam = preset('lytro', scale=0.1)
    m = cam.ground_truth_model()
    px, D, b = cam.sensor.pixel_pitch, cam.D, cam.gap
    # NOTES §3 (views from micro-image centres), physical read-out orientation: all negative
    assert m.k_i == pytest.approx(-px * D / b, rel=1e-14)
    assert m.k_u == pytest.approx(-cam.mla.pitch / D, rel=1e-14)
    assert m.k_v == pytest.approx(-cam.mla.pitch * math.sqrt(3) / 2 / D, rel=1e-14)
    assert m.k_3 == m.k_4 == pytest.approx(-1.0 / 0.4, rel=1e-12)
    up = preset('lytro', scale=0.1, sensor__upright=True).ground_truth_model()
    assert up.k_i == pytest.approx(-m.k_i, rel=1e-14) and up.k_u == pytest.approx(-m.k_u)
    assert up.k_3 == pytest.approx(m.k_3, rel=1e-14)   # the focus shear ignores orientation


@pytest.mark.parametrize('name', ['focused-keplerian', 'focused-galilean'])
@pytest.mark.parametrize('upright', [False, True])
def test_ground_truth_focused_matches_traced_rays(name, upright):
    cam = preset(name, scale=0.3, sensor__upright=upright, **IDEAL)   # lattice lenses
    rng = np.random.default_rng(5)
    g = cam.lenslet_grid()
    n = 300
    kl = np.column_stack([rng.integers(1, g.shape[0] - 1, n), rng.integers(1, g.shape[1] - 1, n)])
    centres = g.centres_of(kl)
    uv = rng.uniform(-10.0, 10.0, (n, 2))
    expected = cam.ground_truth_model().rays(np.column_stack([centres, uv]))
    traced = _traced_mpc_rays(cam, centres + uv, cam.micro_image_of(centres)[0])
    np.testing.assert_allclose(traced[:, :2], expected[:, :2], rtol=0, atol=1e-15)
    np.testing.assert_allclose(traced[:, 2:], expected[:, 2:], rtol=0, atol=1e-13)


def test_ground_truth_focused_view_plane_sign_of_tz():
    # board at the scene distance: t_z = Z - Z_f, > 0 (Keplerian), < 0 (Galilean)
    for name, sign in (('focused-keplerian', 1.0), ('focused-galilean', -1.0)):
        cam = preset(name, scale=0.2)
        _, t = cam.pose_from_physical(np.eye(3), [0.0, 0.0, cam.scene_distance])
        z_f = 1.0 / cam.main_lens.inverse_focus
        assert t[2] == pytest.approx(cam.scene_distance - z_f, rel=1e-12)
        assert np.sign(t[2]) == sign


def test_ground_truth_focused_refuses_distortion():
    cam = preset('focused-keplerian', scale=0.2, main_lens__distortion=(0.1, 0.0))
    with pytest.raises(InvalidInputError, match='not representable'):
        cam.ground_truth_model()


@pytest.mark.parametrize('name', PRESETS)
def test_lenslet_grid_matches_lens_lattice(name):
    cam = preset(name, scale=0.1, **IDEAL)      # realistic lenses sit off it: test_sensor_response
    g = cam.lenslet_grid()
    centres = g.centres()
    # every grid centre is a micro-image centre of the optics (projection of its lens centre)
    kl, nearest = cam.micro_image_of(centres)
    np.testing.assert_allclose(centres, nearest, atol=1e-9)  # same lattice, rounding only
    lens = cam.lens_centres(kl)
    projected = cam.sensor_to_pixel(lens * (cam.D + cam.gap) / cam.D)
    np.testing.assert_allclose(projected, centres, atol=1e-9)
    # the numbering rule (docs/file-formats.md): the grid is the least index rectangle that
    # holds every micro-image whose centre lies in the image, partial ones at the rims included
    W, H = cam.sensor.size
    inside = ((centres >= -0.5) & (centres <= np.array([W, H]) - 0.5)).all(axis=1)
    kl_grid = g.indices()[inside]
    assert kl_grid.min(axis=0).tolist() == [0, 0]
    assert (kl_grid.max(axis=0) + 1).tolist() == list(g.shape)
    area = W * H / (g.pitch * g.row_spacing)
    assert abs(inside.sum() / area - 1) < 0.05
    # and the lens nearest the sensor centre sits in an unshifted row
    centre = g.indices()[np.argmin(np.hypot(*(centres - (np.array([W, H]) - 1) / 2).T))]
    assert g.lattice == 'rect' or (centre[1] + g.hex_parity) % 2 == 0


def test_preset_pixels_per_micro_image():
    # issue: Lytro ~10 px, Illum ~14 px per micro-image, independent of scale
    assert preset('lytro').micro_image_pitch == pytest.approx(10.0, abs=0.2)
    assert preset('illum', scale=0.1).micro_image_pitch == pytest.approx(14.0, abs=0.3)
    assert preset('illum').sensor.size == (7728, 5368)
    assert preset('lytro').sensor.size == (3280, 3280)
    for name in PRESETS:
        # micro-images nearly fill their cell but do not overlap; lab-square's optics (a
        # 200 mm f/30 lens focused at 0.33 m on f/62 micro-lenses) make them 0.79 across
        cam = preset(name, scale=0.1)
        fill = 2 * cam.micro_image_radius / cam.micro_image_pitch
        assert (0.75 < fill < 0.85) if name == 'lab-square' else (0.85 < fill < 1.0), name


def test_micro_image_of_is_nearest_centre():
    cam = preset('lytro', scale=0.05)
    rng = np.random.default_rng(0)
    q = rng.uniform(20, 140, (2000, 2))
    _, centre = cam.micro_image_of(q)
    q0, r, c, _ = cam.image_lattice()
    kk, ll = np.mgrid[-14:15, -14:15]   # covers q (lattice origin near pixel 82)
    all_c = cam.lattice_centres(np.column_stack([kk.ravel(), ll.ravel()]))
    d_all = np.linalg.norm(q[:, None, :] - all_c[None], axis=2).min(axis=1)
    np.testing.assert_allclose(np.linalg.norm(q - centre, axis=1), d_all, atol=1e-12)


def test_pose_physical_round_trip():
    rng = np.random.default_rng(2)
    for name in ('lytro', 'focused-galilean'):
        cam = preset(name, scale=0.1)
        rvec, tvec = rng.normal(0, 0.3, 3), np.array([0.01, -0.02, 0.4])
        r, t = cam.pose_to_physical(rvec, tvec)
        rvec2, tvec2 = cam.pose_from_physical(r, t)
        np.testing.assert_allclose(rvec2, rvec, atol=1e-12)
        np.testing.assert_allclose(tvec2, tvec, atol=1e-12)


def test_camera_dict_round_trip():
    cam = preset('illum', scale=0.1, sensor__bayer='grbg', main_lens__distortion=(0.1, 0.0))
    back = Camera.from_dict(cam.to_dict())
    assert back.to_dict() == cam.to_dict()
    np.testing.assert_allclose(back.ground_truth_model().to_vector(),
                               cam.ground_truth_model().to_vector(), rtol=1e-15)


def test_default_board_fits_field_of_view():
    for name in PRESETS:
        for scale in (0.1, 1.0):
            cam = preset(name, scale=scale)
            board = default_board(cam)
            w, h = cam.field_of_view(cam.scene_distance)
            x0, y0, x1, y1 = board.extent()
            assert x1 - x0 < 0.8 * w and y1 - y0 < 0.8 * h


def test_checkerboard_shade_colours():
    board = Checkerboard(4, 3, 0.01)
    sq = 0.01
    # square (0, 0) before corner 0 is black; its neighbours are white; the margin is light
    x = np.array([-0.5, 0.5, -0.5, 0.5, -1.5, 10.0]) * sq
    y = np.array([-0.5, -0.5, 0.5, 0.5, -0.5, 0.0]) * sq
    np.testing.assert_array_equal(
        board.shade(x, y), [board.dark, board.light, board.light, board.dark, board.light,
                            board.background])


def test_bad_input_raises():
    with pytest.raises(InvalidInputError, match='unknown preset'):
        preset('hasselblad')
    with pytest.raises(InvalidInputError, match='scale must be in'):
        preset('lytro', scale=2.0)
    with pytest.raises(InvalidInputError, match='focus_distance must lie outside'):
        MainLens(0.01, 2.0, 0.005)
    with pytest.raises(InvalidInputError, match='bayer must be None or one of'):
        preset('lytro', scale=0.1, sensor__bayer='rgbw')
    with pytest.raises(InvalidInputError, match='part must be'):
        preset('lytro', scale=0.1, lens__f_number=2)
    with pytest.raises(InvalidInputError, match='cols must be an integer'):
        Checkerboard(1, 3, 0.01)
