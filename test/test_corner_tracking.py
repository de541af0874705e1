"""Tests of lf_mpc_calib.features.corner_tracking: corners followed between rendered frames."""

import cv2
import numpy as np
import pytest

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.features.corner_tracking import CornerTracker
from lf_mpc_calib.features.corners import detect_corners


@pytest.fixture(scope='module')
def frames():
    """Decoded light fields of a 0.3-crop Lytro: a pose, small moves of it, a jump, a square
    shift along the board (every corner lands on its neighbour's place)."""
    from lf_mpc_calib.measurement.live import LiveMeasurer
    from lf_mpc_calib.simulation.dataset import random_poses
    from lf_mpc_calib.simulation.optics import default_board, preset
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    camera = preset('lytro', scale=0.3)
    board = default_board(camera)
    rng = np.random.default_rng(7)
    rvecs, tvecs = random_poses(camera, board, 1, rng=rng)
    rot = cv2.Rodrigues(rvecs[0])[0]
    moves = {'start': np.zeros(3), 'small': np.array([0.0008, -0.0005, 0.001]),
             'small2': np.array([0.0012, -0.0002, 0.002]),
             'jump': np.array([0.03, 0.02, 0.0]), 'square': rot @ [board.square, 0.0, 0.0]}
    grid = camera.lenslet_grid()
    white = quantize(render_white(camera), 8)
    m = LiveMeasurer(camera.ground_truth_model(grid), grid, white=white)
    lfs = {name: m.measure(quantize(render_raw(camera, board, rvecs[0], tvecs[0] + d,
                                               rng=rng), 8), points=False,
                           rays=False).lightfield
           for name, d in moves.items()}
    return board, lfs


def _table(det):
    obs = det.observations
    return {(int(p), float(q[0]), float(q[1])): q[2:] for p, q in zip(obs.point, obs.ijuv)}


def test_tracked_corners_equal_the_full_search_on_small_moves(frames):
    board, lfs = frames
    tracker = CornerTracker(board)
    first = tracker.detect(lfs['start'])
    assert tracker.last_mode == 'full search' and tracker.last_reason == 'no previous frame'
    assert _table(first).keys() == _table(detect_corners(lfs['start'], board)).keys()
    for name in ('small', 'small2'):
        det = tracker.detect(lfs[name])
        assert tracker.last_mode == 'tracked', tracker.last_reason
        assert det.diagnostics['tracked'] and det.diagnostics['motion_px'] > 0.2
        tracked, full = _table(det), _table(detect_corners(lfs[name], board))
        # the same corner views (labels included), at the same pixels to a few thousandths
        # of a pixel (measured 1e-4 px at most: cornerSubPix stops at 1e-3 px of its
        # upsampled view from another start)
        assert tracked.keys() == full.keys()
        diff = np.array([np.abs(tracked[k] - full[k]).max() for k in full])
        assert diff.max() < 0.02


@pytest.mark.parametrize('name', ['jump', 'square'])
def test_a_jump_falls_back_to_the_full_search(frames, name):
    board, lfs = frames
    tracker = CornerTracker(board)
    tracker.detect(lfs['start'])
    det = tracker.detect(lfs[name])
    assert tracker.last_mode == 'full search' and tracker.last_reason
    # the full search's answer, labels included (a square shift must not relabel the board)
    assert _table(det).keys() == _table(detect_corners(lfs[name], board)).keys()
    tracker.detect(lfs[name])
    assert tracker.last_mode == 'tracked'


def test_tracker_rejects_bad_options(frames):
    board, _ = frames
    with pytest.raises(InvalidInputError, match='min_kept'):
        CornerTracker(board, min_kept=0.0)
