"""Partial ChArUco boards in the picture and the guidance (issue 42 #2): the quick look names
the corners a board partly out of view shows, the picture outlines the markers with their ids
and tints the image regions no captured corner has reached, and the guidance stops asking
for the whole board and sends the board into the corners not reached yet."""

import dataclasses

import cv2
import numpy as np
import pytest

from lf_mpc_calib.calibration.guidance import capture_guidance
from lf_mpc_calib.camera.board import CharucoBoard, Checkerboard
from lf_mpc_calib.features.quick_corners import quick_corners
from lf_mpc_calib.report.detections_overlay import (
    draw_detections, MARKER, picture_scale, region_names, UNCOVERED, uncovered_regions)

BOARD = CharucoBoard(6, 4, 0.02, dictionary='DICT_4X4_50')
SPX = 40                                  # texture px per square
SHAPE = (240, 320)                        # the image (rows, cols)


def _image(board, shift):
    """(image SHAPE float32, true uv (n_points, 2) px, homography) of ``board``'s texture
    turned 10 deg and moved by ``shift`` px (partly out of view for a large shift)."""
    tex = board.cv_board().generateImage(((board.cols + 1) * SPX, (board.rows + 1) * SPX),
                                         marginSize=0, borderBits=1)
    tex = cv2.copyMakeBorder(tex, SPX, SPX, SPX, SPX, cv2.BORDER_CONSTANT, value=255)
    a = np.radians(10.0)
    h = np.array([[np.cos(a), -np.sin(a), shift[0]], [np.sin(a), np.cos(a), shift[1]],
                  [0.0, 0.0, 1.0]]) @ np.diag([0.9, 0.9, 1.0])
    img = cv2.warpPerspective(tex, h, SHAPE[::-1], flags=cv2.INTER_AREA,
                              borderValue=128).astype(np.float32) / 255.0
    rc = board.point_rc(np.arange(board.n_points))
    src = (rc[:, ::-1] + 2) * SPX - 0.5          # corner (r, c) between squares, plus border
    uv = cv2.perspectiveTransform(src.reshape(-1, 1, 2).astype(float), h).reshape(-1, 2)
    return cv2.GaussianBlur(img, (0, 0), 0.7), uv


@pytest.fixture(scope='module')
def partial():
    """The board slid so that its right part leaves the image."""
    return _image(BOARD, (130.0, -20.0))


def test_quick_look_names_the_corners_of_a_board_partly_out_of_view(partial):
    img, truth = partial
    look = quick_corners(img, BOARD)
    inside = (truth[:, 0] > 8) & (truth[:, 0] < SHAPE[1] - 8) & (truth[:, 1] > 8) & \
        (truth[:, 1] < SHAPE[0] - 8)
    assert 0 < inside.sum() < BOARD.n_points            # the scene is partial
    found = np.isfinite(look.corners).all(axis=1)
    assert look.reason == '' and 6 <= look.found == found.sum(), look.reason
    assert not np.any(found & ~inside)                  # only corners in view ...
    # ... each named by the markers: at its own true place (a neighbour is 36 px off)
    err = np.linalg.norm(look.corners[found] - truth[found], axis=1)
    assert err.max() < 1.0, err
    assert len(look.marker_ids) >= 2 and look.marker_corners.shape == (
        len(look.marker_ids), 4, 2)


def test_quick_look_names_another_dictionary_instead_of_corners():
    other = CharucoBoard(6, 4, 0.02, dictionary='DICT_5X5_50')
    img, _ = _image(other, (20.0, 10.0))
    look = quick_corners(img, BOARD)
    assert look.corners is None and look.found == 0
    assert 'configured dictionary DICT_4X4_50' in look.reason and 'DICT_5X5' in look.reason, \
        look.reason


def test_uncovered_regions_are_the_cells_without_a_point():
    pts = np.array([[5.0, 5.0], [310.0, 230.0], [160.0, 120.0], [np.nan, 1.0],
                    [-50.0, 10.0]])                         # NaN and out of view ignored
    mask = uncovered_regions(pts, SHAPE)
    assert mask.shape == (3, 3) and mask.sum() == 6
    assert not mask[0, 0] and not mask[2, 2] and not mask[1, 1]
    assert region_names(mask) == ['top', 'top-right', 'left', 'right', 'bottom-left',
                                  'bottom']


def _near(picture, colour, tol=40):
    return np.all(np.abs(picture.astype(int) - np.array(colour)) <= tol, axis=-1)


def test_picture_outlines_the_markers_and_tints_uncovered_regions(partial):
    img, truth = partial
    look = quick_corners(img, BOARD)
    mask = np.zeros((3, 3), bool)
    mask[0, 0] = True                                     # top-left not reached
    picture = draw_detections(img, look.corners, board_size=(BOARD.cols, BOARD.rows),
                              markers=(look.marker_ids, look.marker_corners), corner_ids=True,
                              uncovered=mask, status='live')
    f = picture_scale(SHAPE)
    marker = np.all(picture == np.array(MARKER, np.uint8), axis=-1)
    # along the first marker's edges the marker colour within 2 px
    quad = np.round((look.marker_corners[0] + 0.5) * f - 0.5).astype(int)
    for a, b in zip(quad, np.roll(quad, -1, axis=0)):
        x, y = np.round(a + 0.5 * (b - a)).astype(int)
        assert marker[y - 2:y + 3, x - 2:x + 3].any(), (a, b)
    # the tinted cell's border in the tint colour, an untinted cell's not
    h, w = f * SHAPE[0], f * SHAPE[1]
    assert np.all(picture[0, 5:w // 3 - 5] == np.array(UNCOVERED, np.uint8))
    assert not _near(picture[:h], UNCOVERED)[0, w // 3 + 5:w - 5].any()
    # no marker colour where no marker was read (the image's empty lower right)
    assert not marker[int(0.8 * h):h, int(0.9 * w):].any()


@pytest.fixture(scope='module')
def sufficient_result():
    """A calibration of a well-spread simulated pose set (no depth or tilt advice)."""
    from test_guidance import _guidance, TILTS
    g, result = _guidance([0.7, 0.85, 1.0, 1.1, 1.3, 1.45] * 2, TILTS * 2)
    assert g.sufficient, g.advice
    return result


def _wide_pp(result):
    """``result`` with a principal point sigma of 2 px (everything else as it was)."""
    stddev = dict(result.stddev)
    stddev['u_0'] = 2.0 * abs(result.model.k_u)
    return dataclasses.replace(result, stddev=stddev)


def test_guidance_for_partial_boards_sends_the_board_into_the_corners_not_reached(
        sufficient_result):
    from test_guidance import BOARD as CHECKERBOARD
    result = _wide_pp(sufficient_result)
    whole = capture_guidance(result, board_points=CHECKERBOARD.points())
    assert whole.advice[-1].startswith('add tilted poses near the image corners')
    part = capture_guidance(result, board_points=CHECKERBOARD.points(), partial_views=True,
                            uncovered=['top', 'top-right', 'bottom-left'])
    assert 'pushed partly out of view into the image corners' in part.advice[-1]
    assert '(no corner captured yet: top-right, bottom-left)' in part.advice[-1], part.advice
    assert 'principal point sigma (2.00' in part.advice[-1]


def test_guidance_before_calibration_asks_for_the_whole_board_only_without_markers():
    whole = capture_guidance(None, poses=1)
    part = capture_guidance(None, poses=1, partial_views=True)
    assert 'showing the whole board' in whole.advice[0]
    assert 'whole board' not in part.advice[0] and 'partly out of view' in part.advice[0]
    assert 'capture 2 more poses' in part.advice[0]


def test_calibrate_raw_guidance_names_the_image_corners_its_charuco_poses_missed(
        sufficient_result):
    from types import SimpleNamespace

    from lf_mpc_calib.cli.calibrate_raw import pose_set_guidance
    # two poses' corners in the central views (240 x 320): the top-left and centre cells
    uv = [np.array([[10.0, 10.0], [60.0, 50.0]]), np.array([[160.0, 120.0], [np.nan] * 2])]
    dets = [(f'frame_{k}.png', SimpleNamespace(central_uv=c, reference_image=np.zeros(SHAPE)))
            for k, c in enumerate(uv)]
    run = SimpleNamespace(result=_wide_pp(sufficient_result), board=BOARD, detections=dets)
    advice = pose_set_guidance(run, 'conventional').advice[-1]
    assert 'pushed partly out of view into the image corners (no corner captured yet: ' \
        'top-right, bottom-left, bottom-right)' in advice, advice
    checker = SimpleNamespace(result=run.result, board=Checkerboard(6, 4, 0.02),
                              detections=dets)
    assert pose_set_guidance(checker, 'conventional').advice[-1].startswith(
        'add tilted poses near the image corners')
