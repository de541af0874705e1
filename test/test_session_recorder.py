"""
Tests of lf_mpc_calib.pipeline.session_recorder and io.capture_store: captures written as they
are taken come back in a new session (the same frames, rays and robot poses as the session that
took them), damaged ones are skipped by name, leftovers of killed writes are removed, a write
error midway leaves nothing half-written, and a reset moves the stored captures aside.
"""

import errno
import shutil

import numpy as np
import pytest

from lf_mpc_calib.io import capture_store
from lf_mpc_calib.io.atomic import remove_partials
from lf_mpc_calib.io.capture_store import CaptureStore
from lf_mpc_calib.pipeline.session import CalibrationSession
from lf_mpc_calib.pipeline.session_recorder import SessionRecorder

POSES = 4


@pytest.fixture(scope='module')
def scene():
    """A 0.3-crop Lytro camera (984 px square): its board, white image, 4 rendered frames and a
    robot pose for each."""
    from lf_mpc_calib.simulation.dataset import random_poses
    from lf_mpc_calib.simulation.optics import default_board, preset
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    camera = preset('lytro', scale=0.3)
    board = default_board(camera)
    rng = np.random.default_rng(3)
    rvecs, tvecs = random_poses(camera, board, POSES, rng=rng)
    white = quantize(render_white(camera), 8)
    frames = [quantize(render_raw(camera, board, r, t, rng=rng), 8)
              for r, t in zip(rvecs, tvecs)]
    robot = [(rng.normal(size=3), rng.normal(size=3)) for _ in frames]
    return board, white, frames, robot


@pytest.fixture(scope='module')
def recorded(scene, tmp_path_factory):
    """(the session that took the 4 captures, its session folder)."""
    board, white, frames, robot = scene
    folder = tmp_path_factory.mktemp('recorded') / 'session'
    session = CalibrationSession(board, white=white)
    recorder = SessionRecorder(session, folder)
    assert recorder.start() == []
    for frame, pose in zip(frames, robot):
        assert session.capture(frame, robot_pose=pose).accepted
        assert recorder.captured() == ''
    return session, folder


def _copy(folder, tmp_path):
    return shutil.copytree(folder, tmp_path / 'session')


def test_stored_captures_come_back_as_they_were_taken(scene, recorded, tmp_path):
    taken, folder = recorded
    folder = _copy(folder, tmp_path)
    session = CalibrationSession(scene[0])          # no white: the stored one is used
    recorder = SessionRecorder(session, folder)
    lines = recorder.start()
    assert lines[-1].startswith('captures found: 4 (resumed)')
    assert recorder.status()['captures_found'] == recorder.status()['resumed'] == POSES
    np.testing.assert_array_equal(session.white, taken.white)
    assert session.num_poses == POSES
    for k in range(POSES):
        np.testing.assert_array_equal(session.frames[k], scene[2][k])
        for got, given in zip(session.robot_poses[k], scene[3][k]):
            np.testing.assert_array_equal(got, given)
    a, b = session.observations, taken.observations
    np.testing.assert_array_equal(a.pose, b.pose)
    np.testing.assert_array_equal(a.point, b.point)
    np.testing.assert_array_equal(a.ijuv, b.ijuv)


def test_a_damaged_capture_is_skipped_by_name_and_the_others_resume(scene, recorded, tmp_path):
    folder = _copy(recorded[1], tmp_path)
    frame = folder / 'capture_001' / 'frame.png'
    frame.write_bytes(frame.read_bytes()[:-100])             # a truncated frame
    (folder / 'capture_003' / 'capture.yaml').write_text('format: [')   # a broken manifest
    session = CalibrationSession(scene[0])
    recorder = SessionRecorder(session, folder)
    lines = recorder.start()
    assert session.num_poses == 2
    status = recorder.status()
    assert status['captures_found'] == 4 and status['resumed'] == 2
    assert sorted(status['skipped']) == ['capture_001', 'capture_003']
    assert 'frame.png changed since it was written' in status['skipped']['capture_001']
    assert 'not valid YAML' in status['skipped']['capture_003']
    assert any(line.startswith('skipped stored capture_001') for line in lines)
    assert status['summary'] == 'captures found: 4 (2 resumed, 2 skipped: capture_001, ' \
                                'capture_003)'
    np.testing.assert_array_equal(session.frames[1], scene[2][2])
    assert (folder / 'capture_001').is_dir()                  # never deleted
    # a new capture goes to a new folder after every stored one, skipped ones included
    assert session.capture(scene[2][1]).accepted and recorder.captured() == ''
    assert recorder.stored == ['capture_000', 'capture_002', 'capture_004']


def test_captures_wait_for_a_white_image_when_the_stored_one_is_damaged(
        scene, recorded, tmp_path):
    folder = _copy(recorded[1], tmp_path)
    (folder / 'white.png').write_bytes(b'not a png')
    session = CalibrationSession(scene[0])
    recorder = SessionRecorder(session, folder)
    lines = recorder.start()
    assert 'waiting for a white image' in lines[-1] and 'changed since' in lines[-1]
    assert session.num_poses == 0 and recorder.status()['waiting_for_white'] == POSES
    session.set_white(scene[1])
    assert recorder.white_set()[0].startswith('captures found: 4 (resumed)')
    assert session.num_poses == POSES
    assert recorder.store.read_white(recorder.store.read_setup()).shape == scene[1].shape


def test_leftovers_of_killed_writes_are_removed_at_start(scene, recorded, tmp_path):
    folder = _copy(recorded[1], tmp_path)
    half = folder / '.capture_004.1a2b3c4d.partial'
    half.mkdir()
    (half / 'frame.png').write_bytes(b'half')
    (folder / '.session.0123abcd.partial.yaml').write_text('half')
    keep = folder / '.hidden_user_file'
    keep.write_text('mine')
    recorder = SessionRecorder(CalibrationSession(scene[0]), folder)
    lines = recorder.start()
    assert sum('a capture cut off when the node stopped' in line for line in lines) == 2
    assert not half.exists() and not (folder / '.session.0123abcd.partial.yaml').exists()
    assert keep.exists() and recorder.status()['resumed'] == POSES


def test_remove_partials_takes_only_names_with_the_prefix(tmp_path):
    (tmp_path / '.cam_20260101-000000.ab12.partial').mkdir()
    (tmp_path / '.other_20260101-000000.ab12.partial').mkdir()
    (tmp_path / 'cam_20260101-000000').mkdir()
    removed = remove_partials(tmp_path, prefix='.cam_')
    assert [p.name for p in removed] == ['.cam_20260101-000000.ab12.partial']
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        '.other_20260101-000000.ab12.partial', 'cam_20260101-000000']
    assert remove_partials(tmp_path / 'missing') == []


def test_a_write_error_midway_leaves_no_half_capture_and_keeps_the_pose(
        scene, tmp_path, monkeypatch):
    board, white, frames, _ = scene
    folder = tmp_path / 'session'
    session = CalibrationSession(board, white=white)
    recorder = SessionRecorder(session, folder)
    recorder.start()
    written = []

    def full_disk(path, obs):                      # the frame is written, then the disk is full
        written.extend(p.name for p in path.parent.iterdir())
        raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(capture_store, 'write_observations', full_disk)
    assert session.capture(frames[0]).accepted
    note = recorder.captured()
    assert written == ['frame.png']
    assert note.startswith('NOT on disk') and 'No space left on device' in note
    assert sorted(p.name for p in folder.iterdir()) == ['session.yaml', 'white.png']
    status = recorder.status()
    assert status['unstored'] == 1 and 'No space left' in status['write_error']
    assert session.num_poses == 1                     # kept in memory
    monkeypatch.undo()
    assert session.capture(frames[1]).accepted
    assert recorder.captured() == ''                  # both written now
    assert 'write_error' not in recorder.status()
    assert [p.name for p in recorder.store.capture_folders()] == ['capture_000', 'capture_001']
    again = CalibrationSession(board)
    assert SessionRecorder(again, folder).start()[-1].startswith('captures found: 2 (resumed)')
    np.testing.assert_array_equal(again.frames[0], frames[0])


def test_reset_moves_the_stored_captures_aside(scene, recorded, tmp_path):
    folder = _copy(recorded[1], tmp_path)
    session = CalibrationSession(scene[0])
    recorder = SessionRecorder(session, folder)
    recorder.start()
    line = recorder.reset()
    backups = list(tmp_path.glob('session_before_reset_*'))
    assert len(backups) == 1 and line == f'stored captures moved to {backups[0]}'
    assert len(CaptureStore(backups[0]).capture_folders()) == POSES
    assert session.num_poses == 0 and not folder.exists()
    assert session.capture(scene[2][2]).accepted and recorder.captured() == ''
    assert [p.name for p in recorder.store.capture_folders()] == ['capture_000']
    assert (folder / 'session.yaml').is_file() and (folder / 'white.png').is_file()


def test_captures_of_another_board_are_moved_aside_not_resumed(scene, recorded, tmp_path):
    from lf_mpc_calib.camera.board import Checkerboard
    folder = _copy(recorded[1], tmp_path)
    session = CalibrationSession(Checkerboard(7, 5, 0.004))
    recorder = SessionRecorder(session, folder)
    lines = recorder.start()
    assert 'not resumed (taken with board' in lines[-1]
    assert session.num_poses == 0 and recorder.status()['captures_found'] == 0
    backups = list(tmp_path.glob('session_before_reset_*'))
    assert len(backups) == 1 and len(CaptureStore(backups[0]).capture_folders()) == POSES


def test_a_session_folder_that_cannot_be_read_is_reported_and_not_written(
        scene, tmp_path, monkeypatch):
    from lf_mpc_calib.pipeline import session_recorder
    board, white, frames, _ = scene

    def unreadable(folder):
        raise PermissionError(errno.EACCES, 'Permission denied', str(folder))
    monkeypatch.setattr(session_recorder, 'remove_partials', unreadable)
    session = CalibrationSession(board, white=white)
    recorder = SessionRecorder(session, tmp_path / 'session')
    line, = recorder.start()
    assert 'cannot be used' in line and 'Permission denied' in line
    assert session.capture(frames[0]).accepted
    note = recorder.captured()
    assert note.startswith('NOT on disk') and '1 captures in memory only' in note
    assert not (tmp_path / 'session').exists() and recorder.status()['unstored'] == 1
    assert recorder.reset() == 'no stored captures to move'       # starts afresh
    assert session.capture(frames[1]).accepted and recorder.captured() == ''
    assert [p.name for p in recorder.store.capture_folders()] == ['capture_000']
