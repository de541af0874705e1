"""The aperture cut's move of corners refined in defocused micro-images
(features.aperture_bias)."""

import numpy as np
import pytest

from lf_mpc_calib.features.aperture_bias import bundle_points, corner_bias
from lf_mpc_calib.features.micro_image_corners import MicroImageCornerDetector, MicroImageOptions
from lf_mpc_calib.simulation.focused_observations import focused_observations
from lf_mpc_calib.simulation.focused_raw import board_pose
from lf_mpc_calib.simulation.optics import Checkerboard, preset
from lf_mpc_calib.simulation.render import render_raw, render_white

from test_micro_image_refine import radial_scale

pytestmark = pytest.mark.cost(33)   # s on the CI machine: scheduled early (conftest)


def _rows(r, angle=0.3):
    """Corners r px from a micro-image centre at (50, 50), along ``angle``; squares of 6 px."""
    r = np.atleast_1d(np.asarray(r, float))
    u = np.column_stack([np.cos(angle), np.sin(angle)]) * r[:, None]
    n = len(r)
    return (50.0 + u, np.tile([50.0, 50.0], (n, 1)), np.tile(np.eye(2) / 6.0, (n, 1, 1)))


def test_bundle_points_fill_the_unit_disk_evenly():
    e = bundle_points(400)
    assert np.all(np.hypot(*e.T) <= 1.0)
    assert np.allclose(e.mean(0), 0.0, atol=1e-12)
    # second moments of a uniform unit disk: 1/4 per axis, none across
    assert np.allclose(np.cov(e.T, bias=True), 0.25 * np.eye(2), atol=0.01)


def test_corners_whose_windows_stay_clear_of_the_cut_do_not_move():
    q, c, tb = _rows([0.5, 1.5])      # window (3 px) ends inside 10.8 - 3.5 px
    moves = corner_bias(q, c, tb, -2.0, 3.5, 10.8, 3.0, 9.9)
    assert np.all(moves == 0.0)


def test_the_cut_moves_corners_near_the_rim_along_the_radius_by_the_blur_sign():
    q, c, tb = _rows([6.0, 6.5, 7.0])
    radial = (q - c) / np.hypot(*(q - c).T)[:, None]
    inward = corner_bias(q, c, tb, -2.0, 3.5, 10.8, 3.0, 9.9, max_move=1.0)
    outward = corner_bias(q, c, tb, +2.0, 3.5, 10.8, 3.0, 9.9, max_move=1.0)
    assert np.all(np.isfinite(inward)) and np.all(np.isfinite(outward))
    along_in = np.sum(inward * radial, 1)
    along_out = np.sum(outward * radial, 1)
    assert np.all(along_in < -0.01) and np.all(along_out > 0.01)


def test_moves_too_large_to_correct_are_refused():
    q, c, tb = _rows([7.5])
    assert np.all(np.isnan(corner_bias(q, c, tb, -2.0, 3.5, 10.8, 3.0, 9.9, max_move=0.001)))


def test_the_correction_removes_the_near_galilean_scale_error():
    # a half-size Galilean board at 0.65 x the scene distance, micro-images blurred by ~2.5 px;
    # frames and white at 128 rays per pixel (the rim of a coarser white is not the optics')
    cam = preset('focused-galilean', scale=0.5, sensor__noise=0.0)
    h = cam.field_of_view(0.65 * cam.scene_distance)[1]
    board = Checkerboard(9, 6, 0.8 * h / 7)
    rv, tv = board_pose(cam, board, 0.65 * cam.scene_distance, (6.0, -4.0, 2.0))
    raw = render_raw(cam, board, rv, tv, samples=128, noise=0.0)
    truth = focused_observations(cam, board, rv[None], tv[None], radius_fraction=1.0)
    white = render_white(cam, samples=128)
    found = {}
    for on in (False, True):
        det = MicroImageCornerDetector(white, options=MicroImageOptions(aperture_correction=on))
        found[on] = radial_scale(det.detect(raw, board).observations, truth)[0]
    assert found[False] < -0.005
    assert abs(found[True]) < abs(found[False]) / 3
