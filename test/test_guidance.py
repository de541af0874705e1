"""Tests of lf_mpc_calib.calibration.guidance: what a pose set determines, what to add."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.calibration import calibrate
from lf_mpc_calib.calibration.guidance import capture_guidance, MIN_TILT_SPREAD_DEG
from lf_mpc_calib.simulation.observations import simulate_observations, view_grid
from lf_mpc_calib.simulation.optics import default_board, preset

CAMERA = preset('lytro', scale=0.5)
BOARD = default_board(CAMERA)
TRUTH = CAMERA.ground_truth_model()
FOCUS = CAMERA.main_lens.focus_distance


def _poses(depth_fractions, tilts_deg):
    """Board poses (MPC frame) with the board centre on the axis at depth x focus, tilted."""
    centre = BOARD.points().mean(axis=0)
    rvecs, tvecs = [], []
    for frac, (ax, ay) in zip(depth_fractions, tilts_deg):
        rmat = Rotation.from_euler('yx', [ay, ax], degrees=True).as_matrix()
        t = np.array([0.0, 0.0, frac * FOCUS]) - rmat @ centre
        rvec, tvec = CAMERA.pose_from_physical(rmat, t)
        rvecs.append(rvec)
        tvecs.append(tvec)
    return np.array(rvecs), np.array(tvecs)


def _guidance(depth_fractions, tilts_deg, seed=0):
    rv, tv = _poses(depth_fractions, tilts_deg)
    rng = np.random.default_rng(seed)
    obs = simulate_observations(TRUTH, rv, tv, BOARD.points(), view_grid(9), noise_px=0.1,
                                rng=rng)
    result = calibrate(obs)
    return capture_guidance(result, board_points=BOARD.points()), result


TILTS = [(15, 0), (-15, 0), (0, 15), (0, -15), (10, 10), (-10, -10)]


def test_guidance_before_calibration_asks_for_poses():
    g = capture_guidance(None, poses=1)
    assert not g.sufficient and g.poses == 1
    assert 'capture 2 more poses' in g.advice[0]
    assert g.to_dict()['advice'] == list(g.advice)


def test_guidance_recovers_focus_distance_and_depth_span():
    g, _ = _guidance([0.7, 0.85, 1.0, 1.1, 1.3, 1.45], TILTS)
    # k3 = -1/Z_f for a camera focused at Z_f (NOTES section 3): the optics say 0.4 m
    assert g.focus_distance_m == pytest.approx(FOCUS, rel=0.02)
    lo, hi = g.depth_span()
    assert lo == pytest.approx(0.7, abs=0.03) and hi == pytest.approx(1.45, abs=0.05)
    assert np.ptp(g.tilt_x_deg) >= MIN_TILT_SPREAD_DEG and np.ptp(g.tilt_y_deg) >= 20
    assert not any(w in a for a in g.advice for w in ('nearer', 'farther', 'tilt the board'))


def test_guidance_enough_poses_is_sufficient():
    g, _ = _guidance([0.7, 0.85, 1.0, 1.1, 1.3, 1.45] * 2, TILTS * 2)
    assert g.sufficient, g.advice
    assert max(g.sigma_pct.values()) < 0.5 and max(g.sigma_principal_point_px) < 0.5
    assert 'pose set complete' in g.summary()


def test_guidance_near_focus_only_asks_for_nearer_and_farther_boards():
    narrow, r_narrow = _guidance([0.9, 0.95, 1.0, 1.05, 1.1, 1.0], TILTS)
    wide, r_wide = _guidance([0.7, 0.85, 1.0, 1.1, 1.3, 1.45], TILTS)
    text = ' '.join(narrow.advice)
    assert 'nearer than' in text and 'farther than' in text
    assert not narrow.sufficient
    # the reason for the advice: k_i, k_j are worse determined near the focus distance only
    assert narrow.sigma_pct['k_i'] > 1.5 * wide.sigma_pct['k_i']
    assert narrow.sigma_pct['k_j'] > 1.5 * wide.sigma_pct['k_j']


def test_guidance_boards_facing_the_camera_ask_for_tilts_about_both_axes():
    g, _ = _guidance([0.7, 0.85, 1.0, 1.1, 1.3, 1.45], [(0, 0)] * 3 + [(1, 1)] * 3)
    tilt_advice = [a for a in g.advice if a.startswith('tilt the board')]
    assert len(tilt_advice) == 2, g.advice
    assert 'camera x axis' in tilt_advice[0] and 'camera y axis' in tilt_advice[1]
