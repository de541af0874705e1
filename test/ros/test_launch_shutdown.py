"""
Stopping a launch (docs/ros-session.md, "Stopping a launch"): SIGINT ends it and every node
cleanly, exit code 0 within 2 s, even while ``~/capture`` waits for a frame.

SIGINT to the launch process when launch runs without a terminal (``ros2 launch -n``, the
default when stdin is not a terminal: ``docker stop`` with ``STOPSIGNAL SIGINT``), SIGINT to
the process group of an interactive launch (a terminal's ctrl-c), and to the process group of
a launch -n (systemd's ``KillSignal=SIGINT``: every process of the unit at once). Before the
capture's wait ended with the stop, launch waited 5 s and escalated to SIGTERM. Needs the
launch packages and lf_mpc_calib in the ament index (:mod:`ros.launch_runner`); skipped
otherwise.
"""

import os
import signal
import time

import pytest

rclpy = pytest.importorskip('rclpy')

from std_srvs.srv import Trigger  # noqa: E402

from ros.launch_runner import finish, installed_share, start_launch  # noqa: E402
from ros.rclpy_helpers import spin_until, wait_for  # noqa: E402

EXIT_WITHIN_S = 2.0


@pytest.fixture(scope='module')
def white_file(tmp_path_factory):
    """A small simulated camera's white: with it ~/capture waits for a frame."""
    import cv2
    from lf_mpc_calib.simulation.optics import preset
    from lf_mpc_calib.simulation.render import quantize, render_white
    path = tmp_path_factory.mktemp('white') / 'white.png'
    cv2.imwrite(str(path), quantize(render_white(preset('lytro', scale=0.2)), 8))
    return path


def _params(tmp_path):
    path = tmp_path / 'params.yaml'
    path.write_text('/**/lf_calibration:\n  ros__parameters:\n'
                    f"    output_dir: '{tmp_path / 'out'}'\n")
    return path


@pytest.mark.parametrize('noninteractive, group', [(True, False), (False, True), (True, True)],
                         ids=['launch -n (docker)', 'process group (a terminal)',
                              'launch -n, process group (systemd)'])
def test_sigint_ends_a_launch_while_a_capture_waits(ros_node, ros_executor, tmp_path,
                                                    white_file, noninteractive, group):
    installed_share()
    how = f'SIGINT to {"the process group of " if group else ""}' + (
        'launch -n' if noninteractive else 'an interactive launch')
    proc = start_launch('calibrate.launch.py', [f'white_image_file:={white_file}',
                                                f'params_file:={_params(tmp_path)}'],
                        tmp_path / 'log', noninteractive=noninteractive, new_session=group)
    capture = ros_node.create_client(Trigger, '/lf_calibration/capture')
    try:
        wait_for(ros_executor, capture.service_is_ready, 'the ~/capture service', 60.0)
        pending = capture.call_async(Trigger.Request())
        assert not spin_until(ros_executor, pending.done, timeout_sec=1.0), pending.result()
        sent = time.monotonic()
        if group:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
    finally:
        out, left = finish(proc, timeout_s=10 * EXIT_WITHIN_S)
    took = time.monotonic() - sent
    assert proc.returncode == 0 and not left, f'{how}: exit {proc.returncode}, left {left}'
    assert took < EXIT_WITHIN_S, f'{how}: launch ended {took:.2f} s after SIGINT\n{out[-2000:]}'
    assert 'process has finished cleanly' in out and 'escalating' not in out, out[-2000:]
