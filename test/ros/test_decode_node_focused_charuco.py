"""The decode node's ~/points with a focused camera and a ChArUco board over DDS (issue 42):
markers read in the rendered image name the corners of a board partly out of view (turned by
180 degrees: named by the markers, not by where the grid starts), refined in the micro-images
and tracked from frame to frame; a board of another dictionary gives no points and the reason
on ~/stats."""

import dataclasses
import time

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip('rclpy')

from rclpy.parameter import Parameter  # noqa: E402

from lf_mpc_calib.ros.image_conversion import array_to_image  # noqa: E402
from lf_mpc_calib.ros.messages import cloud_columns  # noqa: E402
from ros.rclpy_helpers import decoder_on, wait_for  # noqa: E402

COLS, ROWS, DICTIONARY = 8, 5, 'DICT_4X4_50'


@pytest.fixture(scope='module')
def scene(tmp_path_factory):
    """0.4-crop focused Keplerian, lenses on their lattice, no noise (test_charuco's focused
    pose): white, a frame of the ChArUco board a third out of view and one of a DICT_5X5_250
    board at that pose, the truth calibration, the true corners in the optical frame."""
    from lf_mpc_calib.io.calibration_file import default_frames, save_calibration
    from lf_mpc_calib.io.images import write_image
    from lf_mpc_calib.simulation.dataset import ground_truth_file
    from lf_mpc_calib.simulation.focused_raw import board_pose
    from lf_mpc_calib.simulation.optics import LATTICE_LENSES, CharucoBoard, preset
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    cam = preset('focused-keplerian', scale=0.4, sensor__noise=0.0, **LATTICE_LENSES)
    h = cam.field_of_view(cam.scene_distance)[1]
    board = CharucoBoard(COLS, ROWS, 0.55 * h / 7, dictionary=DICTIONARY)
    rv, tv = board_pose(cam, board, cam.scene_distance, (10.0, -8.0, 183.0),
                        (-0.5 * h, 0.35 * h))
    frames = {name: quantize(render_raw(cam, b, rv, tv, samples=8, noise=0.0), 8)
              for name, b in (('charuco', board), ('other', CharucoBoard(
                  COLS, ROWS, board.square, dictionary='DICT_5X5_250')))}
    folder = tmp_path_factory.mktemp('decode_focused_charuco')
    truth = dataclasses.replace(ground_truth_file(cam, rv[None], tv[None]),
                                frames=default_frames('lf_camera'))
    save_calibration(folder / 'truth.yaml', truth)
    write_image(folder / 'white.png', quantize(render_white(cam, samples=4), 8))
    # the truth in the optical frame, from the optics: the physical frame (main lens at 0)
    rot, trans = cam.pose_to_physical(rv, tv)
    return dict(camera=cam, board=board, frames=frames, folder=folder,
                corners=board.points() @ rot.T + trans)


def _frame_stats(stats, k):
    """The ~/stats mapping of the ``k``-th processed frame that carries its corners, or None."""
    for msg in stats.messages:
        s = yaml.safe_load(msg.data)
        if 'points' in s and s.get('frames', {}).get('processed') == k:
            return s
    return None


def _stream_until(executor, node, pub, stats, frame, done, what, timeout_sec=30.0,
                  period=0.2):
    """Publish ``frame``, once the last is processed and ``period`` s later, until ``done(its
    stats)``: the stats of every frame."""
    seen, end = [], time.monotonic() + timeout_sec
    while time.monotonic() < end:
        k = node.frames_processed + 1
        pub.publish(array_to_image(frame, 'mono8'))
        # the points thread's stats of the frame (the centre's go out first)
        wait_for(executor, lambda: _frame_stats(stats, k) is not None, what, timeout_sec=30.0)
        seen.append(_frame_stats(stats, k))
        if done(seen[-1]):
            return seen
        time.sleep(period)      # the full search beside the stream shares the interpreter
    raise AssertionError(f'{what}: not after {timeout_sec} s ({len(seen)} frames): {seen[-1]}')


@pytest.fixture(scope='module')
def published(ros_context, ros_executor, scene):
    """The ChArUco frame streamed until its corners are tracked, then the other board's frame
    until its reason names the dictionaries: (stats of every frame, ~/points) per board."""
    board = [Parameter('board_cols', value=COLS), Parameter('board_rows', value=ROWS),
             Parameter('square_size', value=scene['board'].square),
             Parameter('board_type', value='charuco'), Parameter('dictionary', value=DICTIONARY)]
    got = {}
    with decoder_on(ros_context, ros_executor, scene['folder'], board,
                    'decode_focused_charuco_helper') as (node, points, stats, pub):
        wait_for(ros_executor, lambda: node.points_pub.get_subscription_count() > 0,
                 'the points subscription')
        # a tracked frame after the full search: its corners, then those of the next one
        seen = _stream_until(ros_executor, node, pub, stats, scene['frames']['charuco'],
                             lambda s: s['corners'] == 'tracked' and s['points'] > 0,
                             'the ChArUco board tracked')
        wait_for(ros_executor, lambda: len(points.messages) >= node.frames_processed
                 - node.points_skipped, 'the corners on ~/points')
        got['charuco'] = (seen, points.messages[-1])
        n = len(points.messages)
        seen = _stream_until(ros_executor, node, pub, stats, scene['frames']['other'],
                             lambda s: 'DICT_5X5_250' in s['reason'] and 'the last full '
                             'search found no board' in s['reason'], 'the other board named')
        wait_for(ros_executor, lambda: len(points.messages) >= n + len(seen),
                 'the other board on ~/points')
        got['other'] = (seen, points.messages[n:])
    return got


def test_focused_charuco_points_are_named_by_the_markers(published, scene):
    seen, msg = published['charuco']
    # the full search beside the stream first, then tracked: ids from the markers throughout
    assert seen[0]['corners'].startswith('full search running') and seen[0]['points'] == 0
    assert not any('tracking' in s['problems'] for s in seen), seen
    cols = cloud_columns(msg)
    ids = np.asarray(cols['id'], int)
    pts = np.column_stack([cols['x'], cols['y'], cols['z']]).astype(float)
    n = scene['board'].n_points
    # a third of the board out of view: some corners, each once, ids of the board
    assert 6 <= len(ids) < n and len(np.unique(ids)) == len(ids) and ids.max() < n, ids
    assert seen[-1]['points'] == len(ids)
    truth = scene['corners'][ids]
    # in front of the camera, each point at its own true corner: a corner one square off (a
    # turned board numbered from where its grid starts) would be a square, 0.55 h / 7 away
    assert np.all(pts[:, 2] > 0)
    err = np.linalg.norm(pts - truth, axis=1)
    distance = scene['camera'].scene_distance
    # test_decode_node_focused's bound: the detection noise over the micro-images' baseline
    # (measured: median 2.4 mm, max 10 mm at 0.45 m, 21 of the 40 corners)
    assert np.median(err) < 0.02 * distance, err
    # the error is along the line of sight; across it each point is at its own corner
    # (measured: 0.025 of a square's angle at most)
    angle = np.arccos(np.clip(np.sum(pts * truth, axis=1) / np.linalg.norm(pts, axis=1)
                              / np.linalg.norm(truth, axis=1), -1, 1))
    square_angle = scene['board'].square / np.linalg.norm(truth, axis=1).mean()
    assert np.max(angle) < 0.2 * square_angle, (np.max(angle), square_angle)
    assert np.all(cols['rays'] >= 2)


def test_focused_charuco_gives_no_points_for_another_dictionary(published):
    seen, msgs = published['other']
    assert all(m.width == 0 for m in msgs) and all(s['points'] == 0 for s in seen)
    # the tracker refuses the frame by its markers, then the full search beside the stream
    # names them (its reason on the frames while it searches again)
    assert seen[0]['corners'].startswith('re-acquiring'), seen[0]
    for s in (seen[0], seen[-1]):
        assert 'configured dictionary DICT_4X4_50' in s['reason'], s['reason']
        assert 'DICT_5X5_250' in s['reason'], s['reason']
    assert seen[-1]['corners'].startswith('full search running')
