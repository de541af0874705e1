"""The decode node's calibration-drift watch over DDS: its figures on ~/stats every frame, and a
calibration whose RMS is far below the residual the node sees named under problems."""

import dataclasses

import pytest
import yaml

rclpy = pytest.importorskip('rclpy')

from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from lf_mpc_calib.io.calibration_file import save_calibration  # noqa: E402
from lf_mpc_calib.measurement.drift import MIN_FRAMES  # noqa: E402
from lf_mpc_calib.ros.decode_node import DecodeNode  # noqa: E402
from lf_mpc_calib.ros.image_conversion import array_to_image  # noqa: E402
from lf_mpc_calib.simulation.decode_scene import write_decode_scene  # noqa: E402
from ros.background import spinning  # noqa: E402
from ros.rclpy_helpers import MessageCollector, wait_for, wait_for_subscribers  # noqa: E402

SMALL_BOARD = [Parameter('board_cols', value=6), Parameter('board_rows', value=6),
               Parameter('square_size', value=0.005115499090161524)]


@pytest.fixture(scope='module')
def scene(tmp_path_factory):
    """0.3-crop Lytro: white, one 8-bit frame and its ground-truth calibration."""
    from lf_mpc_calib.simulation.optics import preset
    return write_decode_scene(preset('lytro', scale=0.3), tmp_path_factory.mktemp('drift'))


def _run(ros_context, ros_executor, helper, scene, rms_px, frames):
    """The ~/stats of ``frames`` frames with the truth calibration stating ``rms_px``."""
    errors = dict(scene['truth'].errors, rms_reprojection_px=rms_px)
    path = scene['folder'] / f'cal_{rms_px:.6f}.yaml'
    save_calibration(path, dataclasses.replace(scene['truth'], errors=errors))
    node = DecodeNode(context=ros_context, parameter_overrides=SMALL_BOARD + [
        Parameter('calibration_file', value=str(path)),
        Parameter('white_image_file', value=str(scene['folder'] / 'white.png'))])
    stats = MessageCollector(helper, String, '/lf_decoder/stats',
                             QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE))
    pub = helper.create_publisher(Image, 'image_raw', 10)
    frame = array_to_image(scene['raw'], 'mono8')
    try:
        with spinning(ros_context, node):
            wait_for_subscribers(ros_executor, pub)
            for n in range(1, frames + 1):
                pub.publish(frame)
                wait_for(ros_executor, lambda n=n: len(stats.messages) >= n,
                         f'the stats of frame {n}', timeout_sec=30.0)
    finally:
        node.destroy_node()
    return [yaml.safe_load(m.data) for m in stats.messages]


def test_drift_figures_always_and_a_drift_named(ros_context, ros_executor, ros_node, scene):
    loose = _run(ros_context, ros_executor, ros_node, scene, 1.0, 3)
    drift = loose[-1]['calibration_drift']
    assert [s['calibration_drift']['frames'] for s in loose] == [1, 2, 3]
    assert drift['calibration_px'] == 1.0 and drift['rays'] > 100
    assert drift['residual_px'] < drift['limit_px'] and not drift['drifting']
    assert 'calibration drift' not in loose[-1]['problems']

    tight = _run(ros_context, ros_executor, ros_node, scene, drift['residual_px'] / 3,
                 MIN_FRAMES)
    last = tight[-1]
    assert last['calibration_drift']['drifting'] and last['calibration_drift']['beyond']
    assert last['problems']['calibration drift'].startswith('calibration drift: residual')
    assert 'calibration drift' not in tight[-2]['problems']   # needs MIN_FRAMES frames
