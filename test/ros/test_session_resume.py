"""
The calibration node loses no capture when it dies: killed with SIGKILL after 4 captures and
started again on the same output folder, it says on ~/status that it found the 4 captures and
resumed them, and calibrates them to the very figures the killed node got from them. The hidden
``.partial`` folders a killed save and a killed capture leave are removed at start, with a log
line each. A capture the node cannot write (its session folder replaced by a file) is kept in
memory, and the answer and ~/status say so.

The simulated camera and the node run in their own processes, as ``ros2 run`` starts them,
and the test talks to them over DDS.
"""

import json
import os
import re
import signal
import subprocess
import sys

import pytest

rclpy = pytest.importorskip('rclpy')

from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from ros.rclpy_helpers import LATCHED_QOS, call_service, spin_until  # noqa: E402

POSES = 4
SMALL_SIM = ['-p', 'scale:=0.3', '-p', 'rate:=5.0', '-p', f'num_poses:={POSES + 1}',
             '-p', 'seed:=3']
SMALL_BOARD = ['-p', 'board_cols:=6', '-p', 'board_rows:=6',
               '-p', 'square_size:=0.005115499090161524']
FIGURES = re.compile(r'calibrated (\d+) poses: RMS reprojection ([\d.]+) px, ray '
                     r'reprojection ([\d.]+) mm')


def _start(module, *ros_args):
    env = dict(os.environ, PYTHONUNBUFFERED='1')
    return subprocess.Popen(
        [sys.executable, '-m', f'lf_mpc_calib.ros.{module}', '--ros-args', *ros_args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _calibration_node(output_dir):
    # reliable: best-effort delivery loses most frames of a megabyte between processes
    return _start('calibration_node', *SMALL_BOARD, '-p', f'output_dir:={output_dir}',
                  '-p', 'image_reliability:=reliable')


def _capture(executor, clients, pose):
    if pose:
        assert call_service(executor, clients['next_pose'], timeout_sec=30.0).success
    answer = call_service(executor, clients['capture'], timeout_sec=60.0)
    for _ in range(300):                    # the white image arrives over DDS first
        if not answer.message.startswith('no white image yet'):
            break
        spin_until(executor, lambda: False, timeout_sec=0.2)
        answer = call_service(executor, clients['capture'], timeout_sec=60.0)
    assert answer.success, answer.message
    return answer


def test_calibration_node_resumes_its_captures_after_kill_9(ros_node, ros_executor, tmp_path):
    clients = {s: ros_node.create_client(Trigger, f'/lf_calibration/{s}')
               for s in ('capture', 'calibrate')}
    clients['next_pose'] = ros_node.create_client(Trigger, '/lf_sim_camera/next_pose')
    statuses = []
    ros_node.create_subscription(String, '/lf_calibration/status',
                                 lambda m: statuses.append(json.loads(m.data)), LATCHED_QOS)
    procs = [_start('sim_camera_node', *SMALL_SIM), _calibration_node(tmp_path)]
    try:
        assert clients['capture'].wait_for_service(timeout_sec=60.0)
        for pose in range(POSES):
            _capture(ros_executor, clients, pose)
        before = call_service(ros_executor, clients['calibrate'], timeout_sec=60.0)
        assert before.success, before.message
        procs[1].send_signal(signal.SIGKILL)
        procs[1].communicate(timeout=10.0)
        session = tmp_path / 'lf_camera_session'
        assert len(list(session.glob('capture_*'))) == POSES
        # what a save and a capture killed midway leave behind
        killed_save = tmp_path / '.lf_camera_20260101-000000.ab12cd34.partial'
        killed_capture = session / f'.capture_{POSES:03d}.ab12cd34.partial'
        for leftover in (killed_save, killed_capture):
            leftover.mkdir()
            (leftover / 'frame_000.png').write_bytes(b'half a frame')

        procs[1] = _calibration_node(tmp_path)
        assert spin_until(ros_executor, lambda: any(
            s.get('session', {}).get('captures_found') for s in statuses), timeout_sec=60.0)
        status = next(s for s in statuses if s.get('session', {}).get('captures_found'))
        assert status['session']['summary'] == f'captures found: {POSES} (resumed)'
        assert status['session']['resumed'] == POSES
        assert not killed_save.exists() and not killed_capture.exists()
        after = call_service(ros_executor, clients['calibrate'], timeout_sec=60.0)
        assert after.success, after.message
        # the same frames, detected again with the same white: the same calibration
        assert FIGURES.search(after.message).groups() == FIGURES.search(before.message).groups()
        assert FIGURES.search(after.message).group(1) == str(POSES)
        assert float(FIGURES.search(after.message).group(2)) < 0.5, after.message

        session.rename(tmp_path / 'moved')            # a session folder that cannot be written
        session.write_text('a file')
        statuses.clear()
        answer = _capture(ros_executor, clients, POSES)
        assert 'NOT on disk: writing to' in answer.message, answer.message
        assert spin_until(ros_executor, lambda: any(
            'write_error' in s.get('session', {}) for s in statuses), timeout_sec=20.0)
        status = next(s for s in statuses if 'write_error' in s.get('session', {}))
        assert status['session']['unstored'] == 1
        assert f'writing to {session} failed' in status['session']['write_error']
        fifth = call_service(ros_executor, clients['calibrate'], timeout_sec=60.0)
        assert fifth.success and FIGURES.search(fifth.message).group(1) == str(POSES + 1)
        procs[1].send_signal(signal.SIGTERM)
        log, _ = procs[1].communicate(timeout=10.0)
        assert f'removed {killed_save}: a ~/save cut off' in log, log
        assert f'removed {killed_capture.name} in {session}: a capture cut off' in log, log
        assert f'captures found: {POSES} (resumed) from {session}' in log, log
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
