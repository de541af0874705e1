"""Tests of lf_mpc_calib.simulation.scene and render_scene: textured planes with depth truth."""

import numpy as np
import pytest

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.simulation.optics import IDEAL, default_board, preset
from lf_mpc_calib.simulation.render import render_raw, render_scene
from lf_mpc_calib.simulation.scene import (
    BoardSurface, depth_truth, planes_scene, Scene, strips_scene, TexturedPlane)


@pytest.fixture(scope='module')
def camera():
    # an ideal sensor: render_raw and render_scene are compared to float rounding, and the
    # realistic sensor draws each image's shot noise from its own pixels
    return preset('lytro', scale=0.15, **IDEAL)


def test_board_scene_renders_like_render_raw(camera):
    board = default_board(camera)
    rvec, tvec = np.array([0.1, -0.2, 0.05]), np.array([-0.01, -0.008, 0.4])
    scene = Scene((BoardSurface(board, rvec, tvec),), background=board.background)
    a = render_raw(camera, board, rvec, tvec, noise=0.0)
    b = render_scene(camera, scene, noise=0.0)
    # the same rays and the same shading: identical up to rounding (render_raw's board path
    # shades in float32: ~1e-7; a sample on another square or surface would be 0.1 or more)
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_depth_truth_of_a_slanted_plane_is_the_plane(camera):
    rvec = np.array([0.0, 0.4, 0.0])
    tvec = np.array([-0.1, -0.1, 0.35])
    plane = TexturedPlane(rvec, tvec, 0.2, 0.2, 0.002)
    truth = depth_truth(camera, Scene((plane,)))
    model = camera.ground_truth_model(camera.lenslet_grid())
    rows, cols = truth.shape
    v, u = np.mgrid[0:rows, 0:cols]
    ok = np.isfinite(truth)
    assert ok.mean() > 0.5
    z = truth[ok].astype(float)
    pts = np.column_stack([(model.k_u * u[ok] + model.u_0) * z,
                           (model.k_v * v[ok] + model.v_0) * z, z])
    import cv2
    normal = cv2.Rodrigues(rvec)[0][:, 2]
    # every point lies on the plane (float32 depth: relative 1e-7)
    np.testing.assert_allclose((pts - tvec) @ normal, 0.0, atol=1e-6)


def test_strips_and_planes_scenes_have_their_depths(camera):
    z_f = camera.main_lens.focus_distance
    truth = depth_truth(camera, strips_scene(camera, [0.5 * z_f, 2 * z_f]))
    assert np.nanmin(truth) == pytest.approx(0.5 * z_f, rel=1e-6)
    assert np.nanmax(truth) == pytest.approx(2 * z_f, rel=1e-6)
    scene = planes_scene(camera, np.random.default_rng(0), board=default_board(camera))
    truth = depth_truth(camera, scene)
    assert scene.board is not None
    assert 0.5 * z_f < np.nanmin(truth) and np.nanmax(truth) < 2 * z_f
    assert np.isfinite(truth).mean() > 0.95          # the back wall fills the view


def test_texture_is_band_limited_and_seeded():
    a = TexturedPlane([0, 0, 0], [0, 0, 1], 0.1, 0.1, 0.004, seed=3)
    b = TexturedPlane([0, 0, 0], [0, 0, 1], 0.1, 0.1, 0.004, seed=3)
    x = np.linspace(0, 0.1, 500)
    sa = a.shade(x, np.full_like(x, 0.05))
    np.testing.assert_array_equal(sa, b.shade(x, np.full_like(x, 0.05)))
    assert 0.05 <= sa.min() and sa.max() <= 0.95 and np.std(sa) > 0.05
    # neighbouring samples 0.2 mm apart (a twentieth of the feature) differ little
    assert np.max(np.abs(np.diff(sa))) < 0.1


def test_bad_scene_input_raises(camera):
    with pytest.raises(InvalidInputError, match='at least one surface'):
        Scene(())
    with pytest.raises(InvalidInputError, match='positive length'):
        TexturedPlane([0, 0, 0], [0, 0, 1], -1.0, 0.1, 0.01)
    with pytest.raises(InvalidInputError, match='Scene'):
        render_scene(camera, [1, 2])
    with pytest.raises(InvalidInputError, match='conventional'):
        depth_truth(preset('focused-keplerian', scale=0.1), Scene((TexturedPlane(
            [0, 0, 0], [0, 0, 1], 0.1, 0.1, 0.01),)))
