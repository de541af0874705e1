"""Tests of the closed-form initial solution ('exact' with the shear, and the paper's)."""

import numpy as np
import pytest

from lf_mpc_calib.calibration import closed_form
from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError
from lf_mpc_calib.camera.rotations import rotation_matrix
from lf_mpc_calib.camera.model import PARAMETER_NAMES
from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.simulation.observations import (
    board_points, paper_camera, pose_from_euler, random_poses, simulate_observations,
    view_grid)


def _relative_errors(est, truth):
    """Relative error per parameter (absolute where the truth is 0)."""
    t = truth.to_vector()
    e = est.to_vector()
    return np.abs(e - t) / np.where(t != 0, np.abs(t), 1.0)


def _observe(model, rv, tr, board, views):
    """Observations from the model's own projection (also for t_z < 0, which the simulator
    refuses)."""
    parts = []
    for p in range(len(rv)):
        cam = board @ rotation_matrix(rv[p]).T + tr[p]
        ij = np.repeat(views, len(board), axis=0)
        uv = model.project(np.tile(cam, (len(views), 1)), ij)
        n = len(ij)
        parts.append(Observations(np.full(n, p), np.tile(np.arange(len(board)), len(views)),
                                  np.tile(board, (len(views), 1)), np.column_stack([ij, uv])))
    return Observations.concatenate(parts)


def _scene(model, seed, n_poses=4, n_views=5):
    rng = np.random.default_rng(seed)
    board = board_points(8, 7)
    rv, tr = random_poses(n_poses, rng=rng, board=board)
    return rv, tr, simulate_observations(model, rv, tr, board, view_grid(n_views))


@pytest.mark.parametrize('changes', [
    {},                                           # Table 3: k_u/k_i != k_v/k_j by 9 %
    {'k_3': -4.0, 'k_4': -4.0},                   # focused near: the shear of NOTES §3
    {'k_3': -4.5, 'k_4': -3.0},
    {'k_v': 2.0e-3 * 2.5e-4 / 2.4e-4, 'k_3': 2.0, 'k_4': 2.0},   # equal ratios, shear
])
def test_exact_recovers_noise_free_parameters(changes):
    truth = paper_camera().replace(**changes)
    rv, tr, obs = _scene(truth, seed=len(changes))
    sol = closed_form(obs)
    # the bound: 1e-8 relative for all parameters on noise-free data
    assert _relative_errors(sol.model, truth).max() < 1e-8
    np.testing.assert_allclose(sol.rotation_vectors, rv, rtol=0, atol=1e-9)
    np.testing.assert_allclose(sol.translations, tr, rtol=0, atol=1e-11)
    np.testing.assert_array_equal(sol.pose_ids, np.arange(len(rv)))
    assert sol.method == 'exact'


def test_paper_method_exact_only_with_equal_ratios():
    equal = paper_camera().replace(k_v=2.0e-3 * 2.5e-4 / 2.4e-4)
    _, _, obs = _scene(equal, seed=7)
    # as printed the method is exact when k_u/k_i = k_v/k_j and there is no shear
    assert _relative_errors(closed_form(obs, method='paper').model, equal).max() < 1e-8
    truth = paper_camera()
    _, _, obs = _scene(truth, seed=8)
    err_paper = _relative_errors(closed_form(obs, method='paper').model, truth)[:6]
    err_exact = _relative_errors(closed_form(obs).model, truth)[:6]
    # Table 3 breaks the equal-ratio assumption by 9 %: the paper's H cannot fit exactly
    assert err_paper.max() > 1e-7 and err_exact.max() < 1e-8
    shear = paper_camera().replace(k_3=-4.0, k_4=-4.0)
    _, _, obs = _scene(shear, seed=9)
    # with the focus shear the paper's k_i, k_j absorb 1/Z_f: errors of tens of percent
    assert _relative_errors(closed_form(obs, method='paper').model, shear)[:2].max() > 0.05


def test_signs_come_from_the_data():
    # j and v run upwards (k_j, k_v < 0) and the MPC frame puts the board at t_z < 0
    truth = paper_camera().replace(k_j=-2.5e-4, k_v=-1.9e-3, v_0=0.33, k_3=-3.0, k_4=-3.0)
    board = board_points(8, 7)
    poses = [pose_from_euler(a, board, distance=-0.08)
             for a in ((6, 28, -8), (12, -10, 15), (-5, 5, -27))]
    rv = np.array([p[0] for p in poses])
    tr = np.array([p[1] for p in poses])
    obs = _observe(truth, rv, tr, board, view_grid(5))
    sol = closed_form(obs)
    assert _relative_errors(sol.model, truth).max() < 1e-8
    assert np.all(sol.translations[:, 2] < 0)
    np.testing.assert_allclose(sol.translations, tr, rtol=0, atol=1e-11)


def test_noisy_start_is_close():
    rng = np.random.default_rng(10)
    truth = paper_camera().replace(k_3=-4.0, k_4=-4.0)
    board = board_points()
    rv, tr = random_poses(5, rng=rng, board=board)
    obs = simulate_observations(truth, rv, tr, board, view_grid(7), noise_px=0.5, rng=rng)
    err = _relative_errors(closed_form(obs).model, truth)
    # NOTES §3: within a few percent of the truth at 0.5 px (k_3, k_4 5 %)
    assert err[:6].max() < 0.03 and err[8:].max() < 0.1, dict(zip(PARAMETER_NAMES, err))


def test_parallel_poses_are_degenerate():
    truth = paper_camera()
    board = board_points(8, 7)
    rv = np.tile([0.2, -0.3, 0.1], (3, 1))
    tr = np.array([[0.0, 0.0, 0.07], [0.01, -0.01, 0.08], [-0.01, 0.0, 0.09]])
    obs = simulate_observations(truth, rv, tr, board, view_grid(5))
    for method in ('exact', 'paper'):
        with pytest.raises(DegenerateConfigurationError, match='do not determine'):
            closed_form(obs, method=method)
    noisy = simulate_observations(truth, rv, tr, board, view_grid(5), noise_px=0.5,
                                  rng=np.random.default_rng(11))
    with pytest.raises(DegenerateConfigurationError, match='do not determine'):
        closed_form(noisy)


def test_bad_input():
    truth = paper_camera()
    _, _, obs = _scene(truth, seed=12, n_poses=3, n_views=3)
    with pytest.raises(InvalidInputError, match='>= 2 board poses, got 1'):
        closed_form(obs.select(obs.pose == 0))
    one_view = obs.select((obs.pose != 1) | ((obs.ijuv[:, 0] == 0) & (obs.ijuv[:, 1] == 0)))
    with pytest.raises(InvalidInputError, match='pose 1 is seen in 1 view'):
        closed_form(one_view)
    line = obs.select((obs.pose != 2) | (obs.board[:, 1] == 0))
    with pytest.raises(InvalidInputError, match='pose 2 has board points all on one line'):
        closed_form(line)
    lifted = Observations(obs.pose, obs.point, obs.board + [0, 0, 0.01], obs.ijuv)
    with pytest.raises(InvalidInputError, match='planar board with Z = 0'):
        closed_form(lifted)
    with pytest.raises(InvalidInputError, match="method must be one of"):
        closed_form(obs, method='zhang')
    with pytest.raises(InvalidInputError, match='must be an lf_mpc_calib'):
        closed_form(obs.ijuv)
    with pytest.raises(InvalidInputError, match='NaN or inf'):
        closed_form(Observations(obs.pose, obs.point, obs.board, obs.ijuv * np.nan))


def test_absurd_values_are_refused_before_the_eigen_solve():
    """Fuzz issue 13 #5.3: one huge u gave numpy's 'Eigenvalues did not converge'."""
    from lf_mpc_calib.simulation.observations import paper_scene
    _, _, _, obs = paper_scene(n_poses=3, n_views=3, noise_px=0.1, rng=np.random.default_rng(2))
    ijuv = obs.ijuv.copy()
    ijuv[7, 2] = 1e200
    huge = Observations(obs.pose, obs.point, obs.board, ijuv)
    with pytest.raises(InvalidInputError,
                       match=r'i, j, u, v reach 1e\+200 px \(ray 7 counted from 0, pose'):
        closed_form(huge)
    board = obs.board.copy()
    board[3, 0] = 1e9
    with pytest.raises(InvalidInputError, match='X, Y, Z reach 1e.09 m'):
        closed_form(Observations(obs.pose, obs.point, board, obs.ijuv))
