"""Tests of lf_mpc_calib.calibration.guidance: what a pose set determines, what to add."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.calibration import calibrate
from lf_mpc_calib.calibration.guidance import capture_guidance, MIN_TILT_SPREAD_DEG
from lf_mpc_calib.simulation.observations import simulate_observations, view_grid
from lf_mpc_calib.simulation.optics import default_board, preset

pytestmark = pytest.mark.cost(22)   # s on the CI machine: scheduled early (conftest)

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


def test_focused_guidance_is_the_same_for_either_mirror_image_of_the_rays():
    from dataclasses import replace
    from lf_mpc_calib.camera.rotations import rotation_matrix
    _, result = _guidance([0.7, 0.85, 1.0, 1.1, 1.3, 1.45], TILTS)
    m = result.model        # the point reflection the focused rays cannot tell apart
    mirrored = replace(result, model=m.replace(k_i=-m.k_i, k_j=-m.k_j, k_3=-m.k_3, k_4=-m.k_4),
                       rotation_vectors=Rotation.from_matrix(
                           -rotation_matrix(result.rotation_vectors) @ np.diag([1, 1, -1])
                       ).as_rotvec(), translations=-np.asarray(result.translations))
    a, b = (capture_guidance(r, board_points=BOARD.points(), camera_type='focused')
            for r in (result, mirrored))
    np.testing.assert_allclose(a.depth_m, b.depth_m, atol=1e-9)
    assert a.depth_span() == pytest.approx(b.depth_span()) and a.summary() == b.summary()


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
    wide = g.wide_at_three_sigma()
    assert ('pose set complete' in g.summary()) == (not wide), g.summary()


def test_a_sufficient_set_whose_3_sigma_exceed_the_target_is_not_called_complete():
    from lf_mpc_calib.calibration.guidance import CaptureGuidance
    g = CaptureGuidance(12, {'k_i': 0.1, 'k_j': 0.1, 'k_u': 0.2, 'k_v': 0.2}, (0.1, 0.19))
    assert g.sufficient and g.wide_at_three_sigma() == ['principal point v 0.57 px']
    assert 'complete' not in g.summary()
    assert '3 sigma of principal point v 0.57 px exceed' in g.summary()
    assert 'pose set complete' in CaptureGuidance(12, g.sigma_pct, (0.1, 0.1)).summary()


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


# focused cameras: exact optics rows (simulation.focused_observations), 0.1 px noise
FOCUSED = preset('focused-keplerian')


def _focused_guidance(depth_fractions, cols, rows, square, offsets=None, seed=0,
                      camera=FOCUSED):
    from lf_mpc_calib.calibration.focused import orient_focused
    from lf_mpc_calib.camera.board import Checkerboard
    from lf_mpc_calib.simulation.focused_observations import focused_observations
    from lf_mpc_calib.simulation.focused_raw import board_pose
    board = Checkerboard(cols, rows, square)
    rng = np.random.default_rng(seed)
    rv, tv = [], []
    for p, frac in enumerate(depth_fractions):
        off = (0.0, 0.0) if offsets is None else offsets[p]
        r, t = board_pose(camera, board, frac * camera.scene_distance,
                          rng.uniform(-20, 20, 3) * [1.0, 1.0, 0.3], off)
        rv.append(r)
        tv.append(t)
    obs = focused_observations(camera, board, np.array(rv), np.array(tv), noise_px=0.1,
                               rng=rng)
    result = orient_focused(calibrate(obs))
    return capture_guidance(result, board_points=board.points(), camera_type='focused')


FOCUSED_DEPTHS = np.linspace(0.94, 1.5, 6)    # the Keplerian's usable span (capture_depth_range)


def test_focused_principal_point_asks_for_a_larger_board_not_for_corner_poses():
    h = FOCUSED.field_of_view(FOCUSED.scene_distance)[1]
    small = _focused_guidance(FOCUSED_DEPTHS, 9, 6, 0.44 * h / 7)
    assert max(small.sigma_principal_point_px) > 0.5
    text = ' '.join(small.advice)
    assert 'larger board' in text and 'image corners' not in text and 'nearer than' not in text
    # why: the same board near the image corners determines it no better ...
    views = [FOCUSED.field_of_view(f * FOCUSED.scene_distance) for f in FOCUSED_DEPTHS]
    corners = [(0.2 * s * vw, 0.2 * t * vh) for (vw, vh), (s, t) in zip(
        views, [(1, 1), (-1, -1), (1, -1), (-1, 1), (1, 0), (-1, 0)])]
    placed = _focused_guidance(FOCUSED_DEPTHS, 9, 6, 0.44 * h / 7, offsets=corners)
    assert max(placed.sigma_principal_point_px) > 0.8 * max(small.sigma_principal_point_px)
    # ... while a 12 x 8 board filling 0.85 of the view at the nearest pose does
    large = _focused_guidance(FOCUSED_DEPTHS, 12, 8, 0.85 * 0.94 * FOCUSED.field_of_view(
        FOCUSED.scene_distance)[0] / 13)
    assert max(large.sigma_principal_point_px) < 0.5 * max(small.sigma_principal_point_px)


def test_focused_narrow_depths_ask_for_a_spread_not_for_both_sides_of_focus():
    h = FOCUSED.field_of_view(FOCUSED.scene_distance)[1]
    narrow = _focused_guidance(np.linspace(1.2, 1.3, 6), 12, 8, 0.6 * h / 9)
    wide = _focused_guidance(FOCUSED_DEPTHS, 12, 8, 0.6 * h / 9)
    text = ' '.join(narrow.advice)
    assert 'spread the boards in depth' in text and 'nearer than' not in text, narrow.advice
    # distances from the main lens (the MPC frame's Z counts from the conjugate plane, 1/k3)
    z_conj = 1.0 / FOCUSED.main_lens.inverse_focus
    assert narrow.focus_distance_m == pytest.approx(z_conj, rel=0.01)
    assert narrow.depth_m.min() == pytest.approx(1.2 * FOCUSED.scene_distance, rel=0.02)
    assert f'{z_conj:.2f} m (the plane conjugate' in text
    assert 'x the conjugate plane' in narrow.summary()
    assert not any('spread' in a for a in wide.advice)
    assert narrow.sigma_pct['k_i'] > 1.5 * wide.sigma_pct['k_i']


def test_focused_galilean_boards_before_the_conjugate_plane_are_distances_too():
    galilean = preset('focused-galilean')
    h = galilean.field_of_view(galilean.scene_distance)[1]
    g = _focused_guidance(np.linspace(0.65, 1.0, 6), 12, 8, 0.6 * h / 9, camera=galilean)
    # Galilean: the boards lie between the main lens and the conjugate plane (MPC Z < 0)
    assert g.depth_m.min() == pytest.approx(0.65 * galilean.scene_distance, rel=0.02)
    assert g.depth_m.max() == pytest.approx(1.0 * galilean.scene_distance, rel=0.02)
    assert not any('spread' in a for a in g.advice), g.advice


def test_guidance_refuses_an_unknown_camera_type():
    from lf_mpc_calib.errors import InvalidInputError
    with pytest.raises(InvalidInputError, match="got 'plenoptic'"):
        capture_guidance(None, poses=1, camera_type='plenoptic')
