"""Tests of lf_mpc_calib.calibration.fit_check: the calibration refuses a model that misfits."""

import dataclasses

import numpy as np
import pytest

from lf_mpc_calib.calibration import calibrate
from lf_mpc_calib.calibration.fit_check import check_model_fit, corner_noise_px, FIT_LIMIT
from lf_mpc_calib.errors import DetectionError
from lf_mpc_calib.simulation.observations import board_points, paper_scene

pytestmark = pytest.mark.cost(35)   # s on the CI machine: scheduled early (conftest)


def test_fit_check_noise_is_the_weighted_rms_of_the_poses():
    assert corner_noise_px([0.1, 0.2], [3, 1]) == pytest.approx(np.sqrt((3 * 0.01 + 0.04) / 4))
    assert corner_noise_px([0.3]) == pytest.approx(0.3)


def test_fit_check_accepts_a_model_that_explains_the_data():
    obs = paper_scene(n_poses=4, noise_px=0.2, rng=np.random.default_rng(0))[3]
    result = calibrate(obs)
    # both figures are RMS of 2-D residual lengths: 0.2 px per axis is 0.28 px
    ratio = check_model_fit(result.rms_reprojection_px, 0.2 * np.sqrt(2))
    assert ratio == pytest.approx(1.0, abs=0.1), 'residuals at the noise level'


def test_fit_check_refuses_mislabelled_corners_with_the_figures():
    obs = paper_scene(n_poses=4, noise_px=0.2, rng=np.random.default_rng(0))[3]
    # one pose's corners labelled one board square off: the model cannot fit them
    board = board_points()
    first = obs.pose == obs.pose.min()
    point = obs.point.copy()
    point[first] = (point[first] + 1) % len(board)
    wrong = dataclasses.replace(obs, point=point, board=board[point])
    # 100 steps, not 500: no start fits these corners, and the default's 500 from each of the
    # two closed forms took 20-37 s (the RMS stays 50-100 px either way)
    result = calibrate(wrong, max_iterations=100)
    assert result.rms_reprojection_px > FIT_LIMIT * 0.28
    with pytest.raises(DetectionError, match=r'RMS reprojection [0-9.]+ px is [0-9.]+ x the '
                                             r'corner noise 0.283 px .*limit 3 x'):
        check_model_fit(result.rms_reprojection_px, 0.2 * np.sqrt(2))
