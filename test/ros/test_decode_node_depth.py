"""The decode node's ~/depth, ~/cloud and ~/refocus over DDS, against the optics' depth truth."""

import cv2
import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip('rclpy')

from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, PointCloud2  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from lf_mpc_calib.ros.decode_node import DecodeNode  # noqa: E402
from lf_mpc_calib.ros.image_conversion import array_to_image, image_to_array  # noqa: E402
from lf_mpc_calib.ros.messages import cloud_columns  # noqa: E402
from ros.background import spinning  # noqa: E402
from ros.rclpy_helpers import MessageCollector, wait_for, wait_for_subscribers  # noqa: E402

OUT_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope='module')
def strips(tmp_path_factory):
    """0.3-crop Lytro seeing strips at 0.6, 1 and 1.6 x focus; white; calibration file."""
    from lf_mpc_calib.io.calibration_file import save_calibration
    from lf_mpc_calib.io.images import write_image
    from lf_mpc_calib.simulation.dataset import ground_truth_file
    from lf_mpc_calib.simulation.optics import preset
    from lf_mpc_calib.simulation.render import quantize, render_scene, render_white
    from lf_mpc_calib.simulation.scene import depth_truth, strips_scene
    camera = preset('lytro', scale=0.3)
    z_f = camera.main_lens.focus_distance
    scene = strips_scene(camera, z_f * np.array([0.6, 1.0, 1.6]), seed=2)
    raw = quantize(render_scene(camera, scene, rng=np.random.default_rng(0)), 8)
    folder = tmp_path_factory.mktemp('depth_node')
    save_calibration(folder / 'truth.yaml',
                     ground_truth_file(camera, np.zeros((1, 3)), [[0.0, 0.0, z_f]]))
    write_image(folder / 'white.png', quantize(render_white(camera), 8))
    return dict(raw=raw, truth=depth_truth(camera, scene), folder=folder, z_f=z_f)


def _node(ros_context, strips, *extra):
    return DecodeNode(context=ros_context, parameter_overrides=[
        Parameter('calibration_file', value=str(strips['folder'] / 'truth.yaml')),
        Parameter('white_image_file', value=str(strips['folder'] / 'white.png')),
        Parameter('measure_points', value=False), *extra])


def test_decode_node_publishes_depth_cloud_and_refocus(ros_context, ros_executor, ros_node,
                                                       strips):
    node = _node(ros_context, strips, Parameter('cloud_step', value=3))
    out = {name: MessageCollector(ros_node, kind, f'/lf_decoder/{name}', OUT_QOS)
           for name, kind in (('depth', Image), ('depth/camera_info', CameraInfo),
                              ('cloud', PointCloud2), ('refocus', Image), ('stats', String))}
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        for name in ('depth', 'cloud', 'refocus'):
            wait_for(ros_executor, lambda n=name: getattr(node, f'{n}_pub')
                     .get_subscription_count() > 0, f'the {name} subscription')
        frame = array_to_image(strips['raw'], 'mono8')
        frame.header.stamp.sec = 7
        pub.publish(frame)
        for c in out.values():
            c.wait(ros_executor, timeout_sec=30.0)
    msg = out['depth'].last
    assert msg.encoding == '32FC1' and msg.header.stamp.sec == 7
    depth = np.frombuffer(bytes(msg.data), dtype=np.float32).reshape(msg.height, msg.width)
    truth = strips['truth']
    assert depth.shape == truth.shape
    info = out['depth/camera_info'].last
    assert (info.width, info.height) == (msg.width, msg.height)
    at_focus = cv2.erode((np.abs(truth - strips['z_f']) < 1e-6).astype(np.uint8),
                         np.ones((7, 7), np.uint8)) > 0
    rel = np.abs(depth[at_focus] - strips['z_f']) / strips['z_f']
    assert np.isfinite(rel).mean() > 0.9 and np.nanmedian(rel) < 0.01
    cols = cloud_columns(out['cloud'].last)
    assert set(cols) == {'x', 'y', 'z', 'intensity', 'confidence'}
    known = np.count_nonzero(np.isfinite(depth[::3, ::3]))
    assert len(cols['z']) == known > 100
    assert np.all((cols['confidence'] >= 0.3) & (cols['confidence'] <= 1))
    assert image_to_array(out['refocus'].last).shape == truth.shape
    stats = yaml.safe_load(out['stats'].last.data)
    assert {'depth', 'cloud', 'refocus'} <= set(stats['stages_ms'])
    assert all(v >= 0 for v in stats['stages_ms'].values())


def test_decode_node_with_an_empty_depth_range_keeps_serving(
        ros_context, ros_executor, ros_node, strips):
    node = _node(ros_context, strips, Parameter('depth_near', value=0.5),
                 Parameter('depth_far', value=0.3))
    depth = MessageCollector(ros_node, Image, '/lf_decoder/depth', OUT_QOS)
    center = MessageCollector(ros_node, Image, '/lf_decoder/center', OUT_QOS)
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        wait_for(ros_executor, lambda: node.depth_pub.get_subscription_count() > 0,
                 'the depth subscription')
        for n in range(2):
            pub.publish(array_to_image(strips['raw'], 'mono8'))
            center.wait(ros_executor, count=n + 1, timeout_sec=30.0)
    assert not depth.messages
    depth_log = [cause for channel, cause in node.causes.history if channel == 'depth']
    assert len(depth_log) == 1 and 'empty' in depth_log[0]    # logged once, not per frame
