"""The calibration session (what the calibration node drives) with a focused camera: capture
from rendered raw frames, refuse a repeated pose, calibrate, save a data set calibrate-raw
reads back."""

import numpy as np
import pytest

from lf_mpc_calib.io.calibration_file import load_calibration
from lf_mpc_calib.pipeline.session import CalibrationSession
from lf_mpc_calib.simulation.focused_raw import board_pose
from lf_mpc_calib.simulation.optics import Checkerboard, preset
from lf_mpc_calib.simulation.render import quantize, render_raw, render_white


@pytest.fixture(scope='module')
def scene():
    cam = preset('focused-keplerian', scale=0.5, sensor__noise=0.0)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    white = quantize(render_white(cam, samples=4), 8)
    frames = []
    for z, ang in ((1.0, (15, -10, 3)), (1.2, (-12, 18, -5)), (1.4, (20, 8, 2)),
                   (1.6, (-8, -20, 6))):
        rv, tv = board_pose(cam, board, z * cam.scene_distance, ang)
        frames.append(quantize(render_raw(cam, board, rv, tv, samples=8, noise=0.0), 8))
    return cam, board, white, frames


def test_focused_session_captures_calibrates_and_saves(scene, tmp_path):
    cam, board, white, frames = scene
    session = CalibrationSession(board, camera_type='focused', white=white, min_poses=3)
    reports = [session.capture(f) for f in frames]
    assert all(r.accepted for r in reports), [r.reason for r in reports]
    assert 'micro-images' in reports[0].summary() and 'per corner' in reports[0].summary()
    again = session.capture(frames[1])
    assert not again.accepted and 'has not moved' in again.reason
    result = session.calibrate()
    gt = cam.ground_truth_model()
    assert result.model.k_3 > 0                       # the focused orientation
    assert abs(result.model.k_i / gt.k_i - 1) < 0.03
    assert result.rms_reprojection_px < 0.3
    # 4 poses: the leave-one-pose-out sigmas come with it (the node's answer quotes them), and
    # each sigma quoted is the larger of the residual and the jackknife one, as calibrate-raw's
    jk = session.jackknife
    assert jk is not None and list(jk.pose_ids) == [0, 1, 2, 3]
    assert session.published_result is result
    assert result.stddev == jk.covering_result().stddev
    for name, sd in jk.stddev.items():
        assert result.stddev[name] == max(jk.full.stddev[name], sd)
    assert np.all(result.principal_point_stddev() >= jk.full.principal_point_stddev())
    assert jk.one_line().startswith('leave-one-pose-out over 4 poses: principal point sd')
    paths = session.save(tmp_path)
    cal = load_calibration([p for p in paths if p.suffix == '.yaml'
                            and p.name != 'manifest.yaml'][0])
    assert cal.camera_type == 'focused'
    assert tuple(cal.image_size) == cam.sensor.size


def test_focused_session_refuses_a_frame_of_another_size(scene):
    _, board, white, frames = scene
    session = CalibrationSession(board, camera_type='focused', white=white)
    from lf_mpc_calib.errors import InvalidInputError
    with pytest.raises(InvalidInputError, match='white image is'):
        session.capture(frames[0][:-2])
