"""Tests of the observation-level simulator of the paper's experiments."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.simulation.observations import (
    board_points, noise_sweep_poses, paper_camera, paper_scene, random_poses,
    simulate_observations, view_grid)


def _ray_miss(model, obs, rv, tr):
    """Distance (N,) between each board point and the decoded ray of its observation."""
    rays = model.rays(obs.ijuv)
    cam = np.empty_like(obs.board)
    for p in np.unique(obs.pose):
        m = obs.pose == p
        cam[m] = Rotation.from_rotvec(rv[p]).apply(obs.board[m]) + tr[p]
    origin = np.column_stack([rays[:, 0], rays[:, 1], np.zeros(len(rays))])
    d = np.column_stack([rays[:, 2], rays[:, 3], np.ones(len(rays))])
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    w = cam - origin
    return np.linalg.norm(w - (w * d).sum(axis=1, keepdims=True) * d, axis=1)


def test_board_points_layout():
    b = board_points(cols=3, rows=2, square=0.01)
    np.testing.assert_allclose(b[4], [0.01, 0.01, 0.0])  # point 4 = row 1, col 1
    assert b.shape == (6, 3)


def test_view_grid_centred():
    v = view_grid(3)
    assert v.shape == (9, 2)
    np.testing.assert_array_equal(np.unique(v[:, 0]), [-1, 0, 1])
    np.testing.assert_array_equal(np.unique(view_grid(4)[:, 1]), [-1, 0, 1, 2])


def test_simulate_observations_rays_hit_points():
    # round trip: decoded rays of noise-free projections pass through the board points
    rng = np.random.default_rng(0)
    model = paper_camera().replace(k_1=0.3, k_2=-0.5, k_3=-4.0, k_4=-3.5)
    board = board_points(5, 4)
    rv, tr = random_poses(3, rng=rng, board=board)
    obs = simulate_observations(model, rv, tr, board, view_grid(3))
    assert len(obs) == 3 * 9 * 20
    # 1e-12 m: the distortion inverse is solved to machine precision (scale 0.1 m)
    assert _ray_miss(model, obs, rv, tr).max() < 1e-12


def test_simulate_observations_noise_has_requested_sigma():
    rng = np.random.default_rng(1)
    model = paper_camera()
    board = board_points()
    rv, tr = noise_sweep_poses(board)
    clean = simulate_observations(model, rv, tr, board, view_grid(7))
    noisy = simulate_observations(model, rv, tr, board, view_grid(7), noise_px=0.5, rng=rng)
    d = noisy.ijuv - clean.ijuv
    np.testing.assert_array_equal(d[:, :2], 0)
    # 21 168 samples: the sample std is within 2 % of sigma (about 4 standard errors)
    assert abs(d[:, 2:].std() - 0.5) < 0.01
    assert abs(d[:, 2:].mean()) < 0.01


def test_simulate_observations_paper_board_fills_view():
    # NOTES §5: at t_z = 0.08 m the board spans most of the ~320 px central view
    model = paper_camera()
    board = board_points()
    rv, tr = noise_sweep_poses(board)
    obs = simulate_observations(model, rv, tr, board, np.zeros((1, 2)))
    span = obs.ijuv[:, 2].max() - obs.ijuv[:, 2].min()
    assert 150 < span < 330
    # angles of the fixed poses survive the Euler -> rotation vector conversion
    angles = Rotation.from_rotvec(rv).as_euler('xyz', degrees=True)
    np.testing.assert_allclose(angles[0], [6, 28, -8], atol=1e-9)


def test_simulate_observations_image_size_drops_outside():
    model = paper_camera()
    board = board_points()
    rv, tr = noise_sweep_poses(board, distance=0.05)  # closer: board overflows the view
    full = simulate_observations(model, rv, tr, board, view_grid(2))
    cut = simulate_observations(model, rv, tr, board, view_grid(2), image_size=(320, 347))
    assert len(cut) < len(full)
    assert cut.ijuv[:, 2].min() >= -0.5 and cut.ijuv[:, 2].max() <= 319.5


def test_paper_scene_counts():
    _, rv, tr, obs = paper_scene(n_poses=4, n_views=2, rng=np.random.default_rng(2))
    assert rv.shape == (4, 3) and len(obs) == 4 * 4 * 144
    np.testing.assert_array_equal(obs.pose_ids, [0, 1, 2, 3])


def test_simulate_observations_bad_input():
    model = paper_camera()
    board = board_points()
    with pytest.raises(InvalidInputError, match='same shape'):
        simulate_observations(model, np.zeros((2, 3)), np.zeros((3, 3)), board, view_grid(2))
    with pytest.raises(InvalidInputError, match='needs an rng'):
        simulate_observations(model, np.zeros((1, 3)), [[0, 0, 0.1]], board, view_grid(2),
                              noise_px=0.5)
    with pytest.raises(InvalidInputError, match='behind the camera'):
        simulate_observations(model, np.zeros((1, 3)), [[0, 0, -0.1]], board, view_grid(2))
    with pytest.raises(InvalidInputError, match=r'views must have shape \(N, 2\)'):
        simulate_observations(model, np.zeros((1, 3)), [[0, 0, 0.1]], board, np.zeros((2, 3)))


def test_noise_sweep_poses_per_pose_distance():
    board = board_points()
    rv, tr = noise_sweep_poses(board, distance=(0.06, 0.08, 0.12))
    centres = Rotation.from_rotvec(rv).apply(np.tile(board.mean(0), (3, 1))) + tr
    # the board centre sits on the optical axis at the requested depth (exact construction)
    np.testing.assert_allclose(centres, [[0, 0, 0.06], [0, 0, 0.08], [0, 0, 0.12]], atol=1e-15)
