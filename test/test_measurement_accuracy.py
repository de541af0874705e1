"""Tests of lf_mpc_calib.measurement.accuracy: measured corners against the true-model floor."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.measurement.accuracy import corner_accuracy
from lf_mpc_calib.simulation.observations import board_points, simulate_observations, view_grid
from lf_mpc_calib.simulation.observations import paper_camera

TRUTH = paper_camera()
BOARD = board_points()
RVEC = np.array([0.2, -0.1, 0.05])
TVEC = np.array([-0.02, -0.02, 0.08])
TRUE_POINTS = Rotation.from_rotvec(RVEC).apply(BOARD) + TVEC


def _obs(noise_px, seed=0):
    return simulate_observations(TRUTH, RVEC[None], TVEC[None], BOARD, view_grid(7),
                                 noise_px=noise_px, rng=np.random.default_rng(seed))


def test_corner_accuracy_true_model_is_its_own_floor():
    acc = corner_accuracy(_obs(0.3), TRUTH, TRUTH, TRUE_POINTS)
    assert acc.ratio == pytest.approx(1.0)
    assert len(acc.ids) == len(BOARD) and acc.floor_mm.mean() > 0
    assert acc.distance_m == pytest.approx(np.linalg.norm(TRUE_POINTS.mean(axis=0)))


def test_corner_accuracy_noise_free_floor_is_zero_and_a_wrong_model_is_above_it():
    exact = corner_accuracy(_obs(0.0), TRUTH, TRUTH, TRUE_POINTS)
    assert exact.floor_mm.max() < 1e-9
    wrong = TRUTH.replace(k_i=TRUTH.k_i * 1.02, k_j=TRUTH.k_j * 1.02)   # 2 % longer baseline
    noisy = corner_accuracy(_obs(0.05), wrong, TRUTH, TRUE_POINTS)
    assert noisy.ratio > 1.5
    depth_err = np.abs(noisy.measured[:, 2] / TRUE_POINTS[noisy.ids, 2] - 1)
    assert np.median(depth_err) == pytest.approx(0.02, abs=0.005)
    assert 'x the floor' in noisy.summary()


def test_corner_accuracy_bad_input():
    with pytest.raises(InvalidInputError, match='shape'):
        corner_accuracy(_obs(0.0), TRUTH, TRUTH, TRUE_POINTS[:, :2])
    with pytest.raises(InvalidInputError, match='only 3 true points'):
        corner_accuracy(_obs(0.0), TRUTH, TRUTH, TRUE_POINTS[:3])
