"""~/detections of the calibration node over DDS: nothing published without a subscriber; rgb8
pictures of the central view's size while subscribed, the board's corners on them; each
capture's picture published and saved by ~/save."""

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from lf_mpc_calib.io.images import read_image  # noqa: E402
from lf_mpc_calib.report.detections_overlay import GREEN, picture_scale, \
    picture_shape  # noqa: E402
from lf_mpc_calib.ros.calibration_node import CalibrationNode  # noqa: E402
from lf_mpc_calib.ros.image_conversion import image_to_array  # noqa: E402
from lf_mpc_calib.ros.sim_camera_node import SimCameraNode  # noqa: E402
from ros.background import spinning  # noqa: E402
from ros.rclpy_helpers import call_service, MessageCollector, wait_for  # noqa: E402

# default_board(preset('lytro', scale=0.3)), as in test_calibration_node
SMALL_BOARD = [Parameter('board_cols', value=6), Parameter('board_rows', value=6),
               Parameter('square_size', value=0.005115499090161524)]
SMALL_SIM = [Parameter('scale', value=0.3), Parameter('num_poses', value=3),
             Parameter('rate', value=5.0), Parameter('seed', value=3)]


def test_detections_topic_while_subscribed_and_with_each_capture(ros_context, ros_executor,
                                                                 ros_node, tmp_path):
    sim = SimCameraNode(context=ros_context, parameter_overrides=SMALL_SIM)
    node = CalibrationNode(context=ros_context, parameter_overrides=SMALL_BOARD + [
        Parameter('output_dir', value=str(tmp_path)),
        Parameter('detections_rate', value=5.0)])
    topic = node.detections_topic
    with spinning(ros_context, sim, node):
        wait_for(ros_executor, lambda: node.session.ready, 'the white image', 30.0)
        start = node.frames_received
        wait_for(ros_executor, lambda: node.frames_received >= start + 3, '3 frames')
        assert topic.published == 0                  # no subscriber: nothing drawn or sent

        pictures = MessageCollector(ros_node, Image, '/lf_calibration/detections',
                                    QoSProfile(depth=1))
        pictures.wait(ros_executor, count=2)
        view = node.session.decoder.view_shape
        shape = picture_shape(view)
        for msg in pictures.messages:
            assert msg.encoding == 'rgb8' and (msg.height, msg.width) == shape[:2]
            assert msg.header.frame_id == 'lf_camera_optical_frame'
        live = image_to_array(pictures.last, max_pixels=10 ** 7)
        f = picture_scale(view)
        assert np.all(live == np.array(GREEN, np.uint8), axis=-1)[:f * view[0]].sum() > 36

        # a capture: its own picture is kept, published and saved
        capture = ros_node.create_client(Trigger, '/lf_calibration/capture')
        answer = call_service(ros_executor, capture, timeout_sec=30.0)
        assert answer.success, answer.message
        kept = node.session.pictures[0]
        assert kept.shape == shape
        wait_for(ros_executor, lambda: any(
            np.array_equal(image_to_array(m, max_pixels=10 ** 7), kept)
            for m in pictures.messages[-5:]), "the capture's picture on ~/detections")
        save = ros_node.create_client(Trigger, '/lf_calibration/save')
        assert call_service(ros_executor, save).success
        np.testing.assert_array_equal(read_image(tmp_path / 'latest' / 'detections_000.png'),
                                      kept)

        # the subscriber leaves: the node stops drawing
        ros_node.destroy_subscription(pictures.subscription)
        wait_for(ros_executor, lambda: not topic.subscribed, 'the subscriber gone')
        published, start = topic.published, node.frames_received
        wait_for(ros_executor, lambda: node.frames_received >= start + 3, '3 more frames')
        assert topic.published == published
