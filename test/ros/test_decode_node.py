"""The decode node over DDS: outputs against the optics' ground truth, calibration from a file
or the latched topic, malformed images, frame dropping, bad parameters; PointCloud2 packing."""

import dataclasses
import subprocess
import sys

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip('rclpy')

from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, PointCloud2  # noqa: E402
from std_msgs.msg import Float32, String  # noqa: E402

from lf_mpc_calib.errors import InvalidInputError  # noqa: E402
from lf_mpc_calib.measurement.live import central_view_intrinsics  # noqa: E402
from lf_mpc_calib.ros.decode_node import DecodeNode  # noqa: E402
from lf_mpc_calib.ros.image_conversion import array_to_image, image_to_array  # noqa: E402
from lf_mpc_calib.ros.messages import cloud_columns, point_cloud, points_cloud  # noqa: E402
from ros.background import spinning  # noqa: E402
from lf_mpc_calib.simulation.decode_scene import write_decode_scene  # noqa: E402
from ros.rclpy_helpers import LATCHED_QOS, MessageCollector, wait_for, \
    wait_for_subscribers  # noqa: E402

SMALL_BOARD = [Parameter('board_cols', value=6), Parameter('board_rows', value=6),
               Parameter('square_size', value=0.005115499090161524)]
OUT_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope='module')
def scene(tmp_path_factory):
    """0.3-crop Lytro: white, one 8-bit frame, true corners, a ground-truth calibration file."""
    from lf_mpc_calib.io.calibration_file import dumps
    from lf_mpc_calib.simulation.optics import preset
    out = write_decode_scene(preset('lytro', scale=0.3), tmp_path_factory.mktemp('decode'))
    return dict(out, text=dumps(out['truth']))


def test_point_cloud_packing_round_trip():
    rng = np.random.default_rng(1)
    pts = rng.normal(size=(7, 3))
    msg = points_cloud(pts, np.arange(7), np.full(7, 12), rng.random(7), frame_id='f')
    cols = cloud_columns(msg)
    assert [f.name for f in msg.fields] == ['x', 'y', 'z', 'id', 'rays', 'residual']
    assert msg.width == 7 and msg.point_step == 24 and msg.header.frame_id == 'f'
    # float32 in the message: 6e-8 relative
    np.testing.assert_allclose(np.column_stack([cols['x'], cols['y'], cols['z']]), pts,
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(cols['id'], np.arange(7))
    # byte-swapped data with the flag set decodes to the same values
    swapped = point_cloud([('a', np.arange(3, dtype=np.float64))], frame_id='f')
    swapped.is_bigendian = not swapped.is_bigendian
    swapped.data = np.arange(3, dtype=np.float64).byteswap().tobytes()
    np.testing.assert_array_equal(cloud_columns(swapped)['a'], [0.0, 1.0, 2.0])
    with pytest.raises(InvalidInputError, match="field 'b' has 2 values, expected 3"):
        point_cloud([('a', np.zeros(3, np.float32)), ('b', np.zeros(2, np.float32))],
                    frame_id='f')
    with pytest.raises(InvalidInputError, match='dtype'):
        point_cloud([('a', np.zeros(3, np.int64))], frame_id='f')


def test_decode_node_rejects_bad_parameters(ros_context, scene):
    for name, value in (('ray_step', 0), ('views', [8, 9]), ('square_size', 0.0),
                        ('calibration_file', str(scene['folder'] / 'missing.yaml'))):
        with pytest.raises(InvalidInputError, match=f"parameter '{name}'"):
            DecodeNode(context=ros_context, parameter_overrides=[Parameter(name, value=value)])
    with pytest.raises(InvalidInputError, match="'board_cols' x 'board_rows' 6x2"):
        DecodeNode(context=ros_context, parameter_overrides=[
            Parameter('board_cols', value=6), Parameter('board_rows', value=2)])


def test_decode_node_main_exits_nonzero_on_bad_parameter():
    proc = subprocess.run(
        [sys.executable, '-m', 'lf_mpc_calib.ros.decode_node', '--ros-args', '-p',
         'ray_step:=0'], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "parameter 'ray_step'" in proc.stdout + proc.stderr


def _outputs(helper):
    return {name: MessageCollector(helper, kind, f'/lf_decoder/{name}', OUT_QOS)
            for name, kind in (('center', Image), ('camera_info', CameraInfo),
                               ('views', Image), ('rays', PointCloud2), ('points', PointCloud2),
                               ('rate', Float32), ('stats', String))}


def _check_points(msg, scene):
    cols = cloud_columns(msg)
    pts = np.column_stack([cols['x'], cols['y'], cols['z']]).astype(float)
    corners = scene['corners']
    assert msg.header.frame_id == 'lf_camera_optical_frame'
    assert len(pts) == len(corners)  # every corner of the board is in view
    # the 6 x 6 board is symmetric under a half turn: the labels may be rotated
    n = len(corners)
    err = min((np.linalg.norm(pts - corners[ids], axis=1)
               for ids in (cols['id'], n - 1 - cols['id'])), key=np.mean)
    # exact model, decoded-view disparity bias: ~2-3 % of the depth (test_measure); 5 %
    assert err.mean() < 0.05 * np.linalg.norm(corners.mean(axis=0))
    assert np.all(cols['rays'] >= 5) and np.all(cols['residual'] < 2e-4)


def test_decode_node_from_file_publishes_everything_and_survives_bad_images(
        ros_context, ros_executor, ros_node, scene):
    node = DecodeNode(context=ros_context, parameter_overrides=SMALL_BOARD + [
        Parameter('calibration_file', value=str(scene['folder'] / 'truth.yaml')),
        Parameter('white_image_file', value=str(scene['folder'] / 'white.png'))])
    assert node.measurer is not None and node.measurer.white is not None
    out = _outputs(ros_node)
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        for name in ('rays', 'views'):  # these are computed only for subscribers
            wait_for(ros_executor, lambda n=name: getattr(node, f'{n}_pub')
                     .get_subscription_count() > 0, f'the {name} subscription')
        bad = [Image(height=4, width=6, encoding='yuv422', step=12, data=bytes(48)),
               Image(height=4, width=6, encoding='mono8', step=5, data=bytes(20)),
               Image(height=4, width=6, encoding='mono8', step=6, data=bytes(23)),
               Image(height=0, width=0, encoding='mono8', step=0, data=b''),
               Image(height=200_000, width=200_000, encoding='mono8', step=200_000,
                     data=bytes(16)),
               array_to_image(np.zeros((4, 6), np.uint8), 'mono8')]  # wrong size for the grid
        for msg in bad:
            pub.publish(msg)
            # one at a time: the node keeps only the newest frame
            wait_for(ros_executor, lambda: node.frames_received >= bad.index(msg) + 1 and
                     node._pending is None, 'the bad image taken')
        wait_for(ros_executor, lambda: node.bad_images == len(bad), 'six rejected images')
        assert node.frames_processed == 0
        frame = array_to_image(scene['raw'], 'mono8')
        frame.header.stamp.sec = 42
        pub.publish(frame)
        for c in out.values():
            c.wait(ros_executor, timeout_sec=30.0)
        assert node.frames_processed == 1  # the node kept serving after the bad images

    _check_points(out['points'].last, scene)
    model = scene['truth'].model
    rows, cols = scene['truth'].lenslet_grid.shape[1], scene['truth'].lenslet_grid.shape[0]
    center = image_to_array(out['center'].last)
    assert center.shape == (rows, cols) and center.dtype == np.uint8
    assert out['center'].last.header.stamp.sec == 42  # outputs carry the frame's stamp
    info = out['camera_info'].last
    np.testing.assert_allclose(np.reshape(info.k, (3, 3)), central_view_intrinsics(model),
                               rtol=1e-12)
    assert (info.width, info.height) == (cols, rows)
    assert image_to_array(out['views'].last).shape == (9 * rows, 9 * cols)
    rays = cloud_columns(out['rays'].last)
    d = np.column_stack([rays['normal_x'], rays['normal_y'], rays['normal_z']])
    np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-6)  # float32
    assert len(d) == len(node.measurer._rays[0]) > 100
    stats = yaml.safe_load(out['stats'].last.data)
    assert set(stats['stages_ms']) == {'convert', 'decode', 'rectify', 'detect', 'triangulate',
                                       'rays', 'views', 'publish'}
    assert stats['corners'] == 'full search: no previous frame'  # the node's first frame
    assert stats['frames']['bad'] == len(bad) and stats['points'] == 36


def test_decode_node_follows_the_calibration_topic_and_drops_frames(
        ros_context, ros_executor, ros_node, scene):
    node = DecodeNode(context=ros_context, parameter_overrides=SMALL_BOARD)
    out = _outputs(ros_node)
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    cal_pub = ros_node.create_publisher(String, '/lf_calibration/calibration', LATCHED_QOS)
    white_pub = ros_node.create_publisher(Image, 'white_image', LATCHED_QOS)
    frame = array_to_image(scene['raw'], 'mono8')
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        pub.publish(frame)  # before any calibration: counted, not processed
        wait_for(ros_executor, lambda: node.frames_waiting == 1, 'the early frame')
        cal_pub.publish(String(data=scene['text']))
        white_pub.publish(array_to_image(scene['white'], 'mono8'))
        wait_for(ros_executor, lambda: node.measurer is not None and
                 node.measurer.white is not None, 'calibration and white from the topics')
        # a burst faster than the node decodes (~0.1 s a frame): the depth-1 subscription
        # and the one-frame slot drop the older frames; nothing queues
        for _ in range(8):
            pub.publish(frame)
        out['points'].wait(ros_executor, timeout_sec=30.0)
        wait_for(ros_executor, lambda: node._pending is None and node.frames_processed +
                 node.frames_dropped + node.frames_waiting == node.frames_received,
                 'the burst processed', timeout_sec=60.0)
        out['rate'].wait(ros_executor)
        wait_for(ros_executor, lambda: len(out['stats'].messages) >= node.frames_processed,
                 'the stats of every frame')
    assert 1 <= node.frames_processed < 8
    _check_points(out['points'].last, scene)
    rate = out['rate'].last.data
    assert rate > 0 if node.frames_processed > 1 else rate == 0  # frames/s, 2-s window
    # after the first frame the corners are tracked from the previous one (same frame here)
    modes = [yaml.safe_load(m.data)['corners'] for m in out['stats'].messages]
    assert modes[0] == 'full search: no previous frame' and set(modes[1:]) <= {'tracked'}


def test_decode_node_refuses_hostile_files(ros_context, scene):
    """Fuzz issue 13 #5.4-5.5: a binary calibration file gave a bare UnicodeDecodeError, and a
    white image contradicting the calibration's grid was accepted at startup."""
    from lf_mpc_calib.io.images import write_image
    folder = scene['folder']
    binary = folder / 'binary.yaml'
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(InvalidInputError, match=f"'calibration_file'.*{binary}: not UTF-8"):
        DecodeNode(context=ros_context,
                   parameter_overrides=[Parameter('calibration_file', value=str(binary))])
    half = folder / 'half_white.png'
    write_image(half, scene['white'][::2, ::2])
    with pytest.raises(InvalidInputError, match="'calibration_file' and 'white_image_file' "
                                                'disagree: the lenslet grid is for'):
        DecodeNode(context=ros_context, parameter_overrides=[
            Parameter('calibration_file', value=str(folder / 'truth.yaml')),
            Parameter('white_image_file', value=str(half))])


def test_decode_node_publishes_the_robot_mount(ros_context, ros_executor, ros_node, scene,
                                               tmp_path):
    from tf2_msgs.msg import TFMessage
    from lf_mpc_calib.io.calibration_file import save_calibration
    from lf_mpc_calib.ros.messages import rotation_vector_from_quaternion
    from lf_mpc_calib.simulation.arm import default_arm
    arm = default_arm('eye-in-hand')
    cal = dataclasses.replace(scene['truth'], hand_eye=arm.truth_dict('lf_camera_optical_frame'))
    save_calibration(tmp_path / 'arm.yaml', cal)
    tf = MessageCollector(ros_node, TFMessage, '/tf_static', LATCHED_QOS)
    node = DecodeNode(context=ros_context, parameter_overrides=SMALL_BOARD + [
        Parameter('calibration_file', value=str(tmp_path / 'arm.yaml'))])
    with spinning(ros_context, node):
        wait_for(ros_executor, lambda: any(t.header.frame_id == 'tool0' for m in tf.messages
                                           for t in m.transforms), 'the mount on /tf_static')
    t, = [t for m in tf.messages for t in m.transforms if t.header.frame_id == 'tool0']
    assert t.child_frame_id == 'lf_camera_optical_frame'
    tr, q = t.transform.translation, t.transform.rotation
    np.testing.assert_allclose([tr.x, tr.y, tr.z], arm.mount[1], atol=1e-12)
    np.testing.assert_allclose(rotation_vector_from_quaternion([q.x, q.y, q.z, q.w]),
                               arm.mount[0], atol=1e-9)


def test_decode_node_subtracts_its_dark_frame_and_names_a_mismatch(ros_context, scene):
    # dark_image_file (issue 38): the black level comes off the white and every frame first;
    # a frame of another size than the dark is named, the node stays up
    from lf_mpc_calib.io.images import read_image, write_image
    folder = scene['folder']
    white = read_image(folder / 'white.png')
    dark = np.full_like(white, 3)
    write_image(folder / 'dark3.png', dark)
    node = DecodeNode(context=ros_context, parameter_overrides=[
        Parameter('calibration_file', value=str(folder / 'truth.yaml')),
        Parameter('white_image_file', value=str(folder / 'white.png')),
        Parameter('dark_image_file', value=str(folder / 'dark3.png'))])
    try:
        got = node._white
        expect = np.clip(white.astype(int) - 3, 0, None)
        np.testing.assert_array_equal(np.asarray(got, dtype=int), expect)
        small = array_to_image(white[::2, ::2], 'mono8' if white.dtype == np.uint8
                               else 'mono16')
        assert node._to_mono(small, 'image_raw') is None
        assert 'dark frame' in str(node.causes.active)
    finally:
        node.destroy_node()
