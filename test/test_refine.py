"""Tests of the refinement: analytic Jacobian, convergence to the truth, options, bad input."""

import numpy as np
import pytest

from lf_mpc_calib.calibration import calibrate, closed_form, refine
from lf_mpc_calib.calibration.closed_form import validate_observations
from lf_mpc_calib.calibration.refine import RefinementProblem
from lf_mpc_calib.errors import ConvergenceError, InvalidInputError
from lf_mpc_calib.camera.model import MPCModel, PARAMETER_NAMES
from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.simulation.observations import (
    board_points, paper_camera, random_poses, simulate_observations, view_grid)


def _illum_like():
    """
    A camera focused near (NOTES §3): main lens F = 20 mm focused at Z_f = 0.25 m, so
    D = F Z_f / (Z_f - F) = 21.7 mm; micro-lens pitch 20 um, pixel 1.4 um, gap b = 40 um:
    k_i = p_x D / b, k_u = p / D, k_3 = k_4 = -1/Z_f = -4 (decoded upright: k's > 0).
    """
    d = 0.02 * 0.25 / 0.23
    return MPCModel(k_i=1.4e-6 * d / 4e-5, k_j=1.4e-6 * d / 4e-5, k_u=2e-5 / d,
                    k_v=0.98 * 2e-5 / d, u_0=-0.26, v_0=-0.2, k_1=0.05, k_2=-0.1,
                    k_3=-4.0, k_4=-4.0)


def _scene(model, seed, *, n_poses=4, views=5, noise=0.0, cols=8, rows=6, square=0.015,
           distance=0.3):
    rng = np.random.default_rng(seed)
    board = board_points(cols, rows, square)
    rv, tr = random_poses(n_poses, rng=rng, board=board, distance=distance, max_offset=0.02)
    obs = simulate_observations(model, rv, tr, board, view_grid(views), noise_px=noise,
                                rng=rng)
    return rv, tr, obs


@pytest.mark.parametrize('radial', [True, False], ids=['radial', 'k1=k2=0'])
def test_jacobian_matches_finite_differences(radial):
    model = _illum_like()
    if not radial:      # its own evaluation path: Eq. 18 is then the identity
        model = model.replace(k_1=0.0, k_2=0.0)
    rv, tr, obs = _scene(model, 0, n_poses=3, views=3, cols=4, rows=3)
    pb = RefinementProblem(obs, validate_observations(obs))
    theta = model.to_vector()
    poses = np.hstack([rv, tr])
    _, jac = pb.evaluate(theta, poses)
    num = np.zeros_like(jac)
    for k in range(10):
        h = 1e-6 * abs(theta[k]) if theta[k] else 1e-6
        tp, tm = theta.copy(), theta.copy()
        tp[k] += h
        tm[k] -= h
        num[k] = (pb.evaluate(tp, poses, jacobian=False)[0]
                  - pb.evaluate(tm, poses, jacobian=False)[0]) / (2 * h)
    for k in range(6):
        for p in range(3):
            h = 1e-7
            pp, pm = poses.copy(), poses.copy()
            pp[p, k] += h
            pm[p, k] -= h
            d = (pb.evaluate(theta, pp, jacobian=False)[0]
                 - pb.evaluate(theta, pm, jacobian=False)[0]) / (2 * h)
            mine = pb.pose_index == p
            num[10 + k][:, mine] = d[:, mine]
            # a pose's parameters do not move the other poses' residuals
            assert np.abs(d[:, ~mine]).max() == 0.0
    scale = np.abs(jac).max(axis=(1, 2))
    # central differences: relative truncation ~h^2 plus rounding; 1e-5 leaves a margin
    assert (np.abs(num - jac).max(axis=(1, 2)) / scale).max() < 1e-5


def test_sparse_jacobian_layout():
    model = _illum_like()
    rv, tr, obs = _scene(model, 1, n_poses=2, views=2, cols=3, rows=3)
    pb = RefinementProblem(obs, validate_observations(obs))
    _, jac = pb.evaluate(model.to_vector(), np.hstack([rv, tr]))
    free = np.ones(10, dtype=bool)
    free[6] = False
    sp = pb.sparse_jacobian(jac, free)
    assert sp.shape == (2 * len(obs), 9 + 12) and sp.nnz == 2 * len(obs) * (9 + 6)
    dense = sp.toarray()
    first = np.flatnonzero(pb.pose_index == 1)[0]
    # row of ray `first`, v component: model columns, then its pose's six columns
    np.testing.assert_array_equal(dense[2 * first + 1, :9], jac[np.flatnonzero(free), 1, first])
    np.testing.assert_array_equal(dense[2 * first + 1, 15:21], jac[10:, 1, first])
    assert not dense[2 * first + 1, 9:15].any()


def test_calibrate_noise_free_is_exact():
    truth = _illum_like()
    rv, tr, obs = _scene(truth, 2)
    res = calibrate(obs)
    t = truth.to_vector()
    # closed form exact but k_1 = k_2 = 0; the refinement recovers them: 1e-7 relative
    assert np.abs(res.model.to_vector() - t).max() / 1 < 1e-7 * np.abs(t).max() + 1e-9
    np.testing.assert_allclose(res.model.to_vector(), t, rtol=1e-6, atol=1e-9)
    assert res.converged and res.rms_reprojection_px < 1e-6
    np.testing.assert_allclose(res.translations, tr, rtol=0, atol=1e-9)


def test_calibrate_noisy_focused_camera_converges_to_truth():
    truth = _illum_like()
    rv, tr, obs = _scene(truth, 3, n_poses=6, views=7, noise=0.3, cols=10, rows=7)
    progress = []
    res = calibrate(obs, progress=lambda it, cost: progress.append((it, cost)))
    assert res.converged, res.message
    t = truth.to_vector()
    err = res.model.to_vector() - t
    # every parameter within 4 of its own standard deviation (the truth is inside the
    # uncertainty the result reports)
    sd = np.array([res.stddev[n] for n in PARAMETER_NAMES])
    assert np.all(np.abs(err) < 4 * sd), dict(zip(PARAMETER_NAMES, err / sd))
    # k_i, k_j trade off against k_3, k_4 (NOTES §3): 3 %; k_u, k_v 0.1 %; k_3, k_4 5 %
    rel = np.abs(err / t)
    assert rel[:2].max() < 0.03 and rel[2:4].max() < 1e-3 and rel[8:].max() < 0.05, rel
    # 0.3 px per coordinate: the 2-D RMS is about sqrt(2) 0.3 = 0.42 px
    assert abs(res.rms_reprojection_px - 0.3 * np.sqrt(2)) < 0.02
    assert progress and progress[-1][0] == res.iterations
    assert res.per_pose_rms_px.shape == (6,) and res.view_ids.shape == (49, 2)
    assert np.all(np.abs(res.per_view_rms_px - 0.42) < 0.1)
    np.testing.assert_allclose(res.residuals_px.std(axis=0), 0.3, rtol=0.05)
    # ray re-projection: 0.3 px ~ 0.3 * k_u * 0.3 m ~ 0.08 mm laterally
    assert 0.02 < res.rms_ray_reprojection_mm < 0.2


def test_calibrate_without_distortion_fixes_terms():
    truth = paper_camera()
    rv, tr, obs = _scene(truth, 4, noise=0.5, distance=0.08, square=3.5e-3)
    res = calibrate(obs, distortion=False)
    assert res.fixed == ('k_1', 'k_2', 'k_3', 'k_4')
    assert res.model.k_3 == 0.0 and np.isnan(res.stddev['k_3'])
    rel = np.abs(res.model.to_vector()[:6] / truth.to_vector()[:6] - 1)
    # the paper's 0.5 px protocol: about 0.1-0.3 % on few poses; 1 % is generous
    assert rel.max() < 0.01
    fixed = calibrate(obs, distortion=False, fix=('u_0',))
    assert fixed.model.u_0 == closed_form(obs).model.u_0


def test_solvers_and_residual_definition_agree():
    truth = _illum_like()
    rv, tr, obs = _scene(truth, 5, n_poses=3, views=3, noise=0.3)
    lm = calibrate(obs, distortion=False)
    trf = calibrate(obs, distortion=False, solver='trf', max_iterations=200)
    # the same minimum: costs equal to 1e-6 relative
    assert abs(lm.cost - trf.cost) < 1e-6 * lm.cost
    # residuals are measured - predicted in measured pixels
    pred = np.empty((len(obs), 2))
    for k, p in enumerate(lm.pose_ids):
        m = obs.pose == p
        from lf_mpc_calib.camera.rotations import rotation_matrix
        cam = obs.board[m] @ rotation_matrix(lm.rotation_vectors[k]).T + lm.translations[k]
        pred[m] = lm.model.project(cam, obs.ijuv[m, :2])
    np.testing.assert_allclose(lm.residuals_px, obs.ijuv[:, 2:] - pred, rtol=0, atol=1e-9)
    assert abs(lm.rms_reprojection_px
               - np.sqrt(np.mean(np.sum(lm.residuals_px ** 2, axis=1)))) < 1e-12


def test_robust_loss_ignores_outliers():
    truth = paper_camera()
    rv, tr, obs = _scene(truth, 6, noise=0.3, distance=0.08, square=3.5e-3)
    rng = np.random.default_rng(7)
    bad = rng.choice(len(obs), size=len(obs) // 50, replace=False)
    ijuv = obs.ijuv.copy()
    ijuv[bad, 2:] += rng.uniform(-30, 30, size=(len(bad), 2))
    dirty = Observations(obs.pose, obs.point, obs.board, ijuv)
    plain = calibrate(dirty, distortion=False)
    robust = calibrate(dirty, distortion=False, loss='huber', f_scale=1.0)
    e_plain = np.abs(plain.model.to_vector()[:6] / truth.to_vector()[:6] - 1).max()
    e_robust = np.abs(robust.model.to_vector()[:6] / truth.to_vector()[:6] - 1).max()
    # 2 % of rays off by up to 30 px: Huber keeps the error several times smaller
    assert e_robust < 0.5 * e_plain and e_robust < 0.01


def test_non_convergence_is_reported():
    truth = _illum_like()
    _, _, obs = _scene(truth, 8, noise=0.3)
    res = calibrate(obs, max_iterations=1)
    assert not res.converged and 'maximum number of iterations' in res.message
    with pytest.raises(ConvergenceError, match='did not converge after 1 iterations'):
        calibrate(obs, max_iterations=1, raise_on_failure=True)


def test_bad_options_and_initial():
    truth = paper_camera()
    _, _, obs = _scene(truth, 9, n_poses=3, views=3, distance=0.08, square=3.5e-3)
    init = closed_form(obs)
    with pytest.raises(InvalidInputError, match='fix names must be in'):
        calibrate(obs, fix=('f',))
    with pytest.raises(InvalidInputError, match='loss must be one of'):
        calibrate(obs, loss='l1')
    with pytest.raises(InvalidInputError, match='f_scale must be a positive'):
        refine(obs, init, f_scale=0.0)
    with pytest.raises(InvalidInputError, match='differ from the observed pose ids'):
        refine(obs.select(obs.pose != 2), init)
    with pytest.raises(InvalidInputError, match='>= 2 board poses'):
        calibrate(obs.select(obs.pose == 0))


def test_calibrate_exact_falls_back_to_paper_when_b_is_not_positive_definite():
    from lf_mpc_calib.calibration import closed_form
    from lf_mpc_calib.errors import DegenerateConfigurationError
    from lf_mpc_calib.simulation.observations import (
        board_points, noise_sweep_poses, paper_camera, PAPER_IMAGE_SIZE,
        simulate_observations, view_grid)
    truth = paper_camera()
    board = board_points()
    rv, tv = noise_sweep_poses(board, distance=(0.06, 0.08, 0.12))
    obs = simulate_observations(truth, rv, tv, board, view_grid(7), noise_px=1.0,
                                rng=np.random.default_rng(0), image_size=PAPER_IMAGE_SIZE)
    # heavy noise on boards at three depths: the exact variant's B is not positive definite
    with pytest.raises(DegenerateConfigurationError, match='positive definite'):
        closed_form(obs, method='exact')
    result = calibrate(obs, distortion=False)
    assert result.method == 'paper' and result.converged
    est = result.model.to_vector()[:6]
    rel = np.abs(est - truth.to_vector()[:6]) / np.abs(truth.to_vector()[:6])
    # sigma = 1 px with 3 poses: the paper reports ~0.25 % (k) / 0.5 % (u_0, v_0) at this noise
    assert rel.max() < 0.02, rel


def test_absurd_rms_is_a_convergence_error():
    """Fuzz issue 13 #5.5: u, v scaled up gave an RMS of 1e11 px written as a result."""
    from lf_mpc_calib.simulation.observations import paper_scene
    _, _, _, obs = paper_scene(n_poses=3, n_views=3, noise_px=0.3, rng=np.random.default_rng(4))
    ijuv = obs.ijuv.copy()
    ijuv[:, 2:] *= 1e4                         # wrong units: 0.3 px of noise becomes 3000 px
    scaled = Observations(obs.pose, obs.point, obs.board, ijuv)
    with pytest.raises(ConvergenceError,
                       match=r'RMS reprojection error .* px after the refinement \(limit 1000'):
        calibrate(scaled)
    ijuv[:, 2:] *= 1e8                         # and far beyond any sensor: refused on input
    with pytest.raises(InvalidInputError, match='i, j, u, v reach'):
        calibrate(Observations(obs.pose, obs.point, obs.board, ijuv))
