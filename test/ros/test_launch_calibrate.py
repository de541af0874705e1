"""
launch/calibrate.launch.py run for real with launch_testing: the calibration node and the
simulated camera (sim:=true) as launched processes, a calibration session through their
services, then a clean shutdown.

launch, launch_ros and launch_testing are not on PyPI: this module is skipped unless they are
importable (a ROS 2 install, or the launch packages built from their public sources) and
lf_mpc_calib is in the ament index (``colcon build`` and source install/setup.bash, or
AMENT_PREFIX_PATH naming an install prefix of the package).
"""

import os
import shutil
import tempfile
import time
import unittest

import pytest

launch_testing = pytest.importorskip(
    'launch_testing', reason='launch_testing is not installed (not on PyPI; comes with ROS 2)')
pytest.importorskip('launch_ros', reason='launch_ros is not installed (not on PyPI)')
rclpy = pytest.importorskip('rclpy')

import launch  # noqa: E402
from launch.actions import IncludeLaunchDescription, SetEnvironmentVariable  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402

try:
    from ament_index_python.packages import get_package_share_directory  # noqa: E402
    SHARE = get_package_share_directory('lf_mpc_calib')
except (ImportError, LookupError) as exc:  # PackageNotFoundError is a KeyError
    pytest.skip(f'lf_mpc_calib is not in the ament index ({exc}): colcon build it and source '
                'install/setup.bash, or set AMENT_PREFIX_PATH', allow_module_level=True)

POSES = 3
TIMEOUT = 120.0
OUTPUT = tempfile.mkdtemp(prefix='lf_launch_calibrate_')


@pytest.mark.launch_test
def generate_test_description():
    """calibrate.launch.py with the simulated camera; results under a temporary ROS_HOME."""
    return launch.LaunchDescription([
        SetEnvironmentVariable('ROS_HOME', OUTPUT),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource(os.path.join(SHARE, 'launch', 'calibrate.launch.py')),
            launch_arguments={'sim': 'true', 'image_reliability': 'reliable'}.items()),
        launch_testing.actions.ReadyToTest(),
    ])


class TestCalibrateSession(unittest.TestCase):
    """Capture, calibrate and save through the launched nodes' services."""

    @classmethod
    def setUpClass(cls):
        cls.context = rclpy.context.Context()
        rclpy.init(context=cls.context)
        cls.node = rclpy.create_node('launch_calibrate_client', context=cls.context)
        cls.executor = rclpy.executors.SingleThreadedExecutor(context=cls.context)
        cls.executor.add_node(cls.node)

    @classmethod
    def tearDownClass(cls):
        cls.executor.remove_node(cls.node)
        cls.node.destroy_node()
        cls.executor.shutdown()
        rclpy.shutdown(context=cls.context)

    def _call(self, name):
        from std_srvs.srv import Trigger
        client = self.node.create_client(Trigger, name)
        deadline = time.monotonic() + TIMEOUT
        while not client.service_is_ready():
            self.assertLess(time.monotonic(), deadline, f'service {name} never appeared')
            self.executor.spin_once(timeout_sec=0.2)
        future = client.call_async(Trigger.Request())
        while not future.done():
            self.assertLess(time.monotonic(), deadline, f'{name} gave no answer')
            self.executor.spin_once(timeout_sec=0.2)
        self.node.destroy_client(client)
        return future.result()

    def test_session_through_the_launched_nodes(self, proc_output):
        # The white image comes over the latched topic; captures before it arrive are refused
        # with that reason (and change nothing), so wait until the node reports the grid.
        proc_output.assertWaitFor('lenslet grid', timeout=TIMEOUT)
        kept = 0
        for k in range(POSES):
            if k:
                self.assertTrue(self._call('/lf_sim_camera/next_pose').success)
            answer = self._call('/lf_calibration/capture')
            self.assertTrue(answer.success, answer.message)
            kept += 1
            self.assertIn(f'{kept} poses kept', answer.message)
        answer = self._call('/lf_calibration/calibrate')
        self.assertTrue(answer.success, answer.message)
        rms = float(answer.message.split('RMS reprojection ')[1].split(' px')[0])
        # Simulated Lytro x0.5 frames: 0.14 px measured (3-4 poses); a broken decode or a
        # wrong white gives pixels.
        self.assertLess(rms, 0.5, answer.message)
        answer = self._call('/lf_calibration/save')
        self.assertTrue(answer.success, answer.message)
        saved = os.path.join(OUTPUT, 'lf_mpc_calib', 'latest', 'lf_camera.yaml')  # newest save
        self.assertTrue(os.path.isfile(saved), f'{saved} not written')
        from lf_mpc_calib.io.calibration_file import load_calibration
        self.assertEqual(load_calibration(saved).num_poses, POSES)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    """Both launched nodes end cleanly on the launch's SIGINT."""

    def test_exit_codes(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(OUTPUT, ignore_errors=True)
