"""Tests of lf_mpc_calib.calibration.verification: held-out poses measured with a calibration."""

import numpy as np
import pytest

from lf_mpc_calib.calibration import calibrate
from lf_mpc_calib.calibration.verification import board_figures, parameter_draws, \
    reused_poses, square_of, verify_observations
from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.simulation.arm import arm_scene
from lf_mpc_calib.simulation.observations import board_points, paper_camera, random_poses, \
    simulate_observations, view_grid

BOARD = board_points(8, 8, 3.51e-3)


@pytest.fixture(scope='module')
def scene():
    """(observations of 12 poses at 0.2 px, the CalibrationResult of poses 0-5)."""
    rng = np.random.default_rng(1)
    rv, tv = random_poses(12, rng=rng, board=BOARD)
    obs = simulate_observations(paper_camera(), rv, tv, BOARD, view_grid(5), noise_px=0.2,
                                rng=rng)
    return obs, calibrate(obs.select(obs.pose < 6), distortion=False)


@pytest.fixture(scope='module')
def arm():
    """An eye-in-hand session of 12 captures: (ArmScene, calibration of 0-5, the true mount
    in the calibrated frame, robot poses {pose: (rv, tv)})."""
    sc = arm_scene('eye-in-hand', n_captures=12, noise_px=0.2, rng=np.random.default_rng(2),
                   board=BOARD, views=view_grid(5))
    result = calibrate(sc.obs.select(sc.obs.pose < 6), distortion=False)
    mount = sc.arm.in_calibrated_frame(sc.model, result.model).mount
    robot = {p: (sc.robot_rvecs[p], sc.robot_tvecs[p]) for p in range(12)}
    return sc, result, mount, robot


def _verify(obs, result, model=None, **options):
    return verify_observations(obs.select(obs.pose >= 6),
                               result.model if model is None else model,
                               noise_px=result.rms_reprojection_px,
                               covariance=(result.free_names(), result.covariance), **options)


def _failing(v):
    return [f.name for f in v.figures if not f.passed]


def test_verify_held_out_poses_pass(scene):
    obs, result = scene
    v = _verify(obs, result)
    assert v.passed, v.summary()
    assert [c.pose for c in v.poses] == list(range(6, 12))
    rms = v.figures[0]
    assert rms.name == 'RMS reprojection'
    assert abs(rms.value / result.rms_reprojection_px - 1) < 0.05
    assert v.summary()[-1] == 'verdict: passes'


def test_verify_k_i_off_1_percent_fails_on_square_size(scene):
    obs, result = scene
    m = result.model
    v = _verify(obs, result, m.replace(k_i=1.01 * m.k_i))
    assert not v.passed
    assert _failing(v) == ['square size error (fitted on the pixels)']
    assert 'square size error (fitted on the pixels)' in v.summary()[-1]


def test_verify_principal_point_off_1_px_fails_on_base_spread(arm):
    sc, result, mount, robot = arm
    m = result.model
    right = _verify(sc.obs, result, arm=('eye-in-hand', mount, robot), robot_accuracy_mm=0.0)
    assert right.passed, right.summary()
    for shifted in (m.replace(u_0=m.u_0 - m.k_u), m.replace(v_0=m.v_0 - m.k_v)):
        v = _verify(sc.obs, result, shifted, arm=('eye-in-hand', mount, robot),
                    robot_accuracy_mm=0.0)
        assert _failing(v) == ['board position spread in the base frame']
        assert v.figures[-1].value > 1.5 * right.figures[-1].value


def test_verify_counts_reused_poses_apart(scene):
    obs, result = scene
    used = obs.select(obs.pose < 6)
    both = obs.select(obs.pose >= 4)
    v = verify_observations(both, result.model, noise_px=result.rms_reprojection_px,
                            stddev=result.stddev, calibration_obs=used)
    assert v.reused == (4, 5) and [c.pose for c in v.poses] == list(range(6, 12))
    assert v.covariance_source == 'stddev'
    # without the table: the fitted poses coincide with the calibration's
    v = verify_observations(both, result.model, noise_px=result.rms_reprojection_px,
                            calibration_poses=(result.rotation_vectors, result.translations))
    assert v.reused == (4, 5)
    only = verify_observations(used, result.model, noise_px=result.rms_reprojection_px,
                               calibration_obs=used)
    assert not only.passed and only.failures == ('no held-out pose to measure',)


def test_reused_poses_ignores_other_captures(scene):
    obs, result = scene
    assert reused_poses(obs.select(obs.pose >= 6), obs.select(obs.pose < 6)) == ()


def test_reused_poses_finds_a_frame_detected_again(scene):
    # the same frame detected again: a few rows more or less, (u, v) within thousandths of a
    # pixel; another capture of the pose differs by its noise
    obs, _ = scene
    pose = obs.select(obs.pose == 2)
    rng = np.random.default_rng(6)
    for shift, reused in ((0.003, (7,)), (0.1, ())):
        keep = np.arange(len(pose))[5:]
        ijuv = pose.ijuv[keep].copy()
        ijuv[:, 2:] += rng.normal(0.0, shift, (len(keep), 2))
        again = Observations(np.full(len(keep), 7), pose.point[keep], pose.board[keep], ijuv)
        assert reused_poses(again, obs.select(obs.pose < 6)) == reused


def test_board_figures_scale_and_flatness():
    rng = np.random.default_rng(3)
    board = BOARD
    turned = board @ np.array([[1, 0, 0], [0, 0.8, -0.6], [0, 0.6, 0.8]]).T + [0.01, 0, 0.1]
    scale, flat = board_figures(board, 1.01 * turned)
    assert scale == pytest.approx(1.01, rel=1e-9) and flat < 1e-12
    bumpy = turned + 1e-4 * rng.standard_normal(turned.shape)
    assert board_figures(board, bumpy)[1] == pytest.approx(1e-4, rel=0.2)
    assert square_of(board) == pytest.approx(3.51e-3)


def test_parameter_draws_follow_the_covariance(scene):
    _, result = scene
    names, cov = result.free_names(), result.covariance
    models = parameter_draws(result.model, 4000, np.random.default_rng(4), names, cov)
    index = [list(result.model.intrinsics_dict()).index(n) for n in names]
    x = np.array([m.to_vector()[index] for m in models])
    sd = np.sqrt(np.diag(cov))
    assert np.allclose(np.std(x, axis=0) / sd, 1.0, atol=0.05)
    corr = np.corrcoef(x.T)
    assert np.allclose(corr, cov / np.outer(sd, sd), atol=0.05)


def test_verify_refuses_bad_input(scene):
    obs, result = scene
    with pytest.raises(InvalidInputError, match='noise_px must be > 0'):
        verify_observations(obs, result.model, noise_px=0.0)
    with pytest.raises(InvalidInputError, match=r'covariance must be \(6, 6\)'):
        verify_observations(obs, result.model, noise_px=0.2,
                            covariance=(result.free_names(), np.eye(3)))
