"""Tests of the checkerboard geometry and of corner detection across sub-aperture views."""

import numpy as np
import pytest

from lf_mpc_calib.camera.board import Checkerboard
from lf_mpc_calib.errors import DetectionError, InvalidInputError
from lf_mpc_calib.features.corners import CornerOptions, detect_corners
from lf_mpc_calib.features.interface import Detection
from lf_mpc_calib.features.synthetic_views import project_to_views, render_views, ViewStack
from lf_mpc_calib.camera.model import MPCModel

pytestmark = pytest.mark.cost(19)   # s on the CI machine: scheduled early (conftest)

# A Lytro-like camera at half resolution (160 px views): k_3 = k_4 = -1/0.3 m (focus shear).
MODEL = MPCModel(2.4e-4, 2.5e-4, 4.0e-3, 3.8e-3, -0.32, -0.31, 0.0, 0.0, -3.3, -3.3)
BOARD = Checkerboard(7, 5, 0.005)
POSE = ([0.2, -0.3, 0.1], [-0.015, -0.01, 0.09])


def _errors(det, truth):
    """Detected minus true pixel (N, 2) for every observation."""
    o = det.observations
    n_j, n_i = truth.shape[:2]
    ii = o.ijuv[:, 0].astype(int) + (n_i - 1) // 2
    jj = o.ijuv[:, 1].astype(int) + (n_j - 1) // 2
    return o.ijuv[:, 2:] - truth[jj, ii, o.point]


def _rms(e):
    return float(np.sqrt(np.mean(np.sum(e ** 2, axis=1))))


def test_board_points_layout():
    b = Checkerboard(4, 3, 0.02)
    p = b.points()
    assert p.shape == (12, 3)
    # Point index row * cols + col lies at (col, row) * square, z = 0.
    np.testing.assert_allclose(p[4 * 2 + 3], [0.06, 0.04, 0.0], atol=1e-15)
    np.testing.assert_array_equal(b.point_rc([11, 5]), [[2, 3], [1, 1]])
    assert not b.symmetric and Checkerboard(4, 4, 0.02).symmetric


def test_board_colours_and_spec_round_trip():
    b = Checkerboard.from_spec('8x6', 0.01)
    assert (b.cols, b.rows, b.square) == (8, 6, 0.01)
    # Square (0, 0) (before corner 0) is black; its neighbours along x and y are white.
    np.testing.assert_array_equal(b.is_black([[-0.005, -0.005], [0.005, -0.005],
                                              [-0.005, 0.005], [0.005, 0.005]]),
                                  [True, False, False, True])
    c = Checkerboard.from_dict(b.to_dict())
    assert c.to_dict() == b.to_dict()


def test_board_bad_input_raises():
    with pytest.raises(InvalidInputError, match='COLSxROWS'):
        Checkerboard.from_spec('8 by 6', 0.01)
    with pytest.raises(InvalidInputError, match='square must be a positive'):
        Checkerboard(8, 6, -1.0)
    with pytest.raises(InvalidInputError, match='cols must be an integer'):
        Checkerboard(1, 6, 0.01)
    with pytest.raises(InvalidInputError, match='first_square'):
        Checkerboard(8, 6, 0.01, first_square='red')


def test_project_to_views_round_trip_through_rays():
    rng = np.random.default_rng(0)
    model = MODEL.replace(k_1=0.3, k_2=-0.2)
    pts = np.column_stack([rng.uniform(-0.02, 0.02, (20, 2)), rng.uniform(0.07, 0.12, 20)])
    ij = np.array([[-3.0, 2.0], [0.0, 0.0], [4.0, -1.0]])
    uv = project_to_views(model, pts, ij)
    for v in range(3):
        ijuv = np.column_stack([np.tile(ij[v], (20, 1)), uv[v]])
        s, t, x, y = model.rays(ijuv).T
        # The ray of the projected pixel passes through the point: X = s + x Z.
        np.testing.assert_allclose(s + x * pts[:, 2], pts[:, 0], atol=1e-12)
        np.testing.assert_allclose(t + y * pts[:, 2], pts[:, 1], atol=1e-12)


def test_detect_corners_matches_ground_truth():
    stack, truth = render_views(MODEL, BOARD, *POSE, views=(9, 9), size=(160, 160))
    det = detect_corners(stack, BOARD, pose=3)
    assert isinstance(det, Detection)
    o = det.observations
    # Every corner in every view of a clean render is found.
    assert len(o) == 81 * BOARD.n_points
    assert np.all(o.pose == 3)
    np.testing.assert_allclose(o.board, BOARD.points()[o.point])
    e = _errors(det, truth)
    # cornerSubPix on 160 px views blurred by 0.6 px: ~0.05 px RMS, no gross error.
    assert _rms(e) < 0.08
    assert np.abs(e).max() < 0.3
    # The errors are not systematic: their mean is far below their RMS.
    assert np.all(np.abs(e.mean(axis=0)) < 0.01)
    assert det.diagnostics['line_residual_rms_px'] < 0.08
    np.testing.assert_allclose(det.central_uv, truth[4, 4], atol=0.3)


def test_detect_corners_with_noise_stays_accurate():
    stack, truth = render_views(MODEL, BOARD, *POSE, views=(5, 5), size=(160, 160),
                                noise_sigma=0.02, rng=1)
    det = detect_corners(stack, BOARD)
    e = _errors(det, truth)
    # 2 % sensor noise: a few hundredths of a pixel more than noise-free, nothing mislabelled.
    assert len(det.observations) >= 0.95 * 25 * BOARD.n_points
    assert _rms(e) < 0.12
    assert np.abs(e).max() < 0.5


def test_detect_corners_asymmetric_board_rotated_180_is_labelled_by_colour():
    board = Checkerboard(7, 6, 0.005)
    stack, truth = render_views(MODEL, board, [0.2, -0.3, 3.1], [0.015, 0.01, 0.09],
                                views=(3, 3), size=(160, 160))
    det = detect_corners(stack, board)
    # cols + rows odd: the colours tell the true first corner even upside down (a wrong
    # label would be off by a square, ~14 px here).
    assert np.abs(_errors(det, truth)).max() < 0.5


def test_detect_corners_symmetric_board_labelled_top_left_first():
    # A symmetric board turned by 180 degrees is indistinguishable from the upright one:
    # both poses must get the labelling whose first corner is top-left (x to the right).
    upright, t_up = render_views(MODEL, BOARD, [0.2, -0.3, 0.1], [-0.015, -0.01, 0.09],
                                 views=(3, 3), size=(160, 160))
    turned, t_turn = render_views(MODEL, BOARD, [0.2, -0.3, 0.1 + np.pi],
                                  [0.015, 0.01, 0.09], views=(3, 3), size=(160, 160))
    d_up = detect_corners(upright, BOARD)
    d_turn = detect_corners(turned, BOARD)
    # Labels within half a pixel of their corners (a wrong one is off by a square, ~14 px).
    assert np.abs(_errors(d_up, t_up)).max() < 0.5
    # Turned: detected point k is true point (n - 1 - k).
    flipped = t_turn[:, :, ::-1]
    assert np.abs(_errors(d_turn, flipped)).max() < 0.5
    for d in (d_up, d_turn):
        c = d.central_uv
        assert c[0, 0] < c[BOARD.cols - 1, 0] and c[0, 1] < c[-1, 1]


def test_detect_corners_board_shifted_by_one_square_is_skipped():
    # The printed pattern is one square off the board frame (colours swapped): no proper
    # labelling of a symmetric 7x5 board fits, so the pose is skipped, not mislabelled.
    stack, _ = render_views(MODEL, BOARD, *POSE, views=(3, 3), size=(160, 160),
                            shift_squares=(1, 0))
    with pytest.raises(DetectionError, match='square colours do not match'):
        detect_corners(stack, BOARD)


def test_detect_corners_larger_board_than_declared_is_skipped():
    # A board with one more column than declared: any 7x5 subset would be one square off.
    stack, _ = render_views(MODEL, Checkerboard(8, 5, 0.005), *POSE, views=(3, 3),
                            size=(160, 160))
    with pytest.raises(DetectionError, match='7x5'):
        detect_corners(stack, BOARD)


@pytest.mark.parametrize('case', ['partial', 'blurred', 'overexposed'])
def test_detect_corners_hard_images_detect_correctly_or_skip(case):
    kwargs = {'partial': dict(tvec=[0.012, -0.01, 0.09]),
              'blurred': dict(blur_sigma=2.5),
              'overexposed': dict(exposure=2.5)}[case]
    tvec = kwargs.pop('tvec', POSE[1])
    stack, truth = render_views(MODEL, BOARD, POSE[0], tvec, views=(5, 5), size=(160, 160),
                                **kwargs)
    try:
        det = detect_corners(stack, BOARD)
    except DetectionError:
        return  # skipping is allowed; a wrong label is not.
    e = _errors(det, truth)
    # Whatever is reported is at its true corner (a one-square error would be ~20 px).
    assert np.abs(e).max() < 0.5


def test_detect_corners_drops_only_corrupted_views():
    stack, truth = render_views(MODEL, BOARD, *POSE, views=(5, 5), size=(160, 160))
    views = stack.views.copy()
    # A dark blob on corner 10 in view (i, j) = (1, -2) (indices [0, 3]) spoils that corner
    # there only; vignetted corner views (1 % contrast) are unusable.
    u, v = np.round(truth[0, 3, 10]).astype(int)
    views[0, 3, v - 3:v + 4, u - 1:u + 6] = 0.0
    views[[0, 0, 4, 4], [0, 4, 0, 4]] = 0.5 + 0.01 * (views[[0, 0, 4, 4], [0, 4, 0, 4]] - 0.5)
    det = detect_corners(ViewStack(views, stack.i_values, stack.j_values, stack.valid), BOARD)
    o = det.observations
    e = _errors(det, truth)
    assert np.abs(e).max() < 0.3
    bad = (o.ijuv[:, 0] == 1) & (o.ijuv[:, 1] == -2) & (o.point == 10)
    assert not bad.any()
    corner_views = (np.abs(o.ijuv[:, 0]) == 2) & (np.abs(o.ijuv[:, 1]) == 2)
    assert not corner_views.any()
    # Everything else is kept: 21 views x 35 corners minus the one spoilt observation
    # (neighbours of the blob may go too, at most a few).
    assert len(o) >= 21 * BOARD.n_points - 4


def test_detect_corners_respects_valid_mask():
    stack, truth = render_views(MODEL, BOARD, *POSE, views=(3, 3), size=(160, 160))
    valid = np.ones((3, 3), bool)
    valid[0, :] = False
    det = detect_corners(ViewStack(stack.views, stack.i_values, stack.j_values, valid), BOARD,
                         options=CornerOptions(min_views=3))
    # Row j = -1 is unusable: no observation comes from it.
    assert np.all(det.observations.ijuv[:, 1] >= 0)
    assert len(det.observations) == 6 * BOARD.n_points


def test_detect_corners_bad_input_raises():
    with pytest.raises(InvalidInputError, match='n_j, n_i, rows, cols'):
        detect_corners(ViewStack(np.zeros((3, 40, 40)), np.arange(3), np.arange(3),
                                 np.ones((3, 3), bool)), BOARD)
    with pytest.raises(DetectionError, match='no checkerboard of 7x5'):
        detect_corners(ViewStack(np.zeros((1, 1, 60, 60), np.float32), np.zeros(1),
                                 np.zeros(1), np.ones((1, 1), bool)), BOARD)


def test_rendered_hex_views_give_corners_without_a_row_parity_offset():
    # Rendered Lytro (hexagonal lattice), decoded with the true grid: the detected corners'
    # v error against the optics' exact model must not depend on which pair of lens rows the
    # corner falls between. Shifted hex rows are a two-lens mean (blurred along u), and when
    # unshifted rows were not blurred alike cornerSubPix pulled corners towards the shifted
    # rows: mean v error +0.027 px for v in (0, 1) mod 2 and -0.028 px in (1, 2) here (0.055
    # apart; after the matching blur 0.015). As the corners move across rows from view to
    # view, that offset biased k_j (0.59 -> 0.44 % on full-size Lytro, 6 default poses).
    from scipy.spatial.transform import Rotation
    from lf_mpc_calib.lenslet.decode import Decoder
    from lf_mpc_calib.simulation.dataset import capture_poses
    from lf_mpc_calib.simulation.optics import default_board, preset
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    cam = preset('lytro', scale=0.3)
    board = default_board(cam)
    rvecs, tvecs = capture_poses(cam, board, 2, rng=np.random.default_rng(0))
    grid = cam.lenslet_grid()
    model = cam.ground_truth_model(grid)
    decoder = Decoder(grid, white=quantize(render_white(cam), 8))
    errors = []
    for pose, (rvec, tvec) in enumerate(zip(rvecs, tvecs)):
        lf = decoder.decode(quantize(render_raw(cam, board, rvec, tvec), 8))
        obs = detect_corners(lf, board, pose=pose).observations
        rot = Rotation.from_rotvec(rvec).as_matrix()
        # the labelling may be the renderer's turned by 180 deg (a calibration does not mind)
        best = None
        for points in (board.points(), board.points()[::-1]):
            xyz = points[obs.point] @ rot.T + tvec
            d = obs.ijuv[:, 2:] - model.project(xyz, obs.ijuv[:, :2])
            if best is None or np.mean(d ** 2) < np.mean(best ** 2):
                best = d
        assert np.sqrt(np.mean(best ** 2)) < 0.25, 'detections match the true model'
        errors.append(np.column_stack([obs.ijuv[:, 3], best[:, 1]]))
    v, dv = np.concatenate(errors).T
    phase = np.mod(v, 2.0)
    low = dv[(phase > 0.2) & (phase < 0.8)].mean()
    high = dv[(phase > 1.2) & (phase < 1.8)].mean()
    assert abs(low - high) < 0.03, (low, high)
