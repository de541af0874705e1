"""Focused corners tracked from frame to frame against full detections of the same frames."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.features.micro_image_corners import MicroImageCornerDetector
from lf_mpc_calib.features.micro_image_tracking import MicroImageCornerTracker
from lf_mpc_calib.measurement.focused import FocusedMeasurer, triangulate_rows
from lf_mpc_calib.simulation.focused_raw import board_pose
from lf_mpc_calib.simulation.optics import Checkerboard, preset
from lf_mpc_calib.simulation.render import render_raw, render_white


@pytest.fixture(scope='module')
def moving():
    """A white and 3 frames of a board (8 x 5 inner corners: labels unambiguous) drifting in
    depth and sideways by about 1 px of the micro-images a frame."""
    cam = preset('focused-keplerian', scale=0.4, sensor__noise=0.0)
    white = render_white(cam, samples=4)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    raws, truth = [], []
    for k in range(3):
        rv, tv = board_pose(cam, board, (1.25 + 0.004 * k) * cam.scene_distance,
                            (12.0, -9.0, 4.0), offset=(0.0003 * k, 0.0))
        raws.append(render_raw(cam, board, rv, tv, samples=4, noise=0.0).astype(np.float32))
        truth.append(board.points() @ Rotation.from_rotvec(rv).as_matrix().T + tv)
    return cam, white, board, raws, truth


def _rows(obs):
    return {(int(p), round(i), round(j)): uv
            for p, i, j, uv in zip(obs.point, obs.ijuv[:, 0], obs.ijuv[:, 1], obs.ijuv[:, 2:])}


def test_tracked_rows_are_the_full_detections(moving):
    cam, white, board, raws, truth = moving
    det = MicroImageCornerDetector(white)
    tracker = MicroImageCornerTracker(det, board)
    tracker.start(det.detect(raws[0], board))
    model = cam.ground_truth_model()
    for k in (1, 2):
        obs, why = tracker.track(det.normalise(raws[k]))
        assert why is None
        full = det.detect(raws[k], board).observations
        a, b = _rows(obs), _rows(full)
        common = set(a) & set(b)
        # the same corners, nearly the same micro-images, the same positions to 0.05 px
        assert len(set(obs.point) & set(full.point)) >= 0.9 * len(set(full.point))
        assert len(common) >= 0.8 * len(b)
        d = np.array([np.hypot(*(a[key] - b[key])) for key in common])
        assert np.median(d) < 0.05 and np.percentile(d, 90) < 0.12
        # and the 3-D corners as accurate as the full detection's
        errors = []
        for rows in (obs, full):
            pts, keys = triangulate_rows(model, rows)
            errors.append(np.median(np.linalg.norm(pts - truth[k][keys[:, 1]], axis=1)))
        assert errors[0] < max(1.3 * errors[1], 0.005 * truth[k][:, 2].mean())
    assert tracker.tracked_frames == 2


def test_tracking_reports_a_lost_board_and_the_measurer_searches_again(moving):
    cam, white, board, raws, _ = moving
    det = MicroImageCornerDetector(white)
    meas = FocusedMeasurer(cam.ground_truth_model(), det.grid, board=board, white=white)
    first = meas.measure(raws[0])
    assert first.corner_search.startswith('full search: no full detection')
    second = meas.measure(raws[1])
    assert second.corner_search == 'tracked' and len(second.points) >= 0.9 * len(first.points)
    # a frame without the board: tracking loses it and says so
    rng = np.random.default_rng(0)
    noise = (rng.uniform(0.2, 1.0, raws[0].shape) * white).astype(np.float32)
    obs, why = meas.tracker.track(meas.detector.normalise(noise))
    assert obs is None and why.startswith('tracking kept') and 'of the' in why
    # the measurer then searches in full, and a uniform frame is refused with the reason
    lost = meas.measure(np.full_like(raws[0], float(np.median(raws[0]))))
    assert len(lost.points) == 0 and 'texture' in lost.reason
    # the next good frame is tracked again from the last good one: no full search
    again = meas.measure(raws[2])
    assert again.corner_search.startswith('tracked')
    assert len(again.points) >= 0.9 * len(first.points)
    # lost on a processed frame: no corners while it is re-acquired, no full search yet
    m = meas.measure(noise)
    assert m.corner_search.startswith('re-acquiring: tracking kept') and len(m.points) == 0
    assert 'lost' in m.reason
    assert meas.measure(raws[1]).corner_search.startswith(('tracked', 're-acquired'))
