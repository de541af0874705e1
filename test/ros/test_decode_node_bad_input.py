"""The decode node under bad input that repeats every frame: one error per cause (not per
frame), again only when the cause changes or clears, and the node keeps serving."""

import dataclasses

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip('rclpy')

from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from lf_mpc_calib.ros.decode_node import DecodeNode  # noqa: E402
from lf_mpc_calib.ros.image_conversion import array_to_image  # noqa: E402
from ros.background import spinning  # noqa: E402
from ros.rclpy_helpers import MessageCollector, wait_for, wait_for_subscribers  # noqa: E402

OUT_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope='module')
def scene(tmp_path_factory):
    """0.3-crop Lytro: one 8-bit frame, white, the true calibration and one without its grid."""
    from lf_mpc_calib.io.calibration_file import save_calibration
    from lf_mpc_calib.io.images import write_image
    from lf_mpc_calib.simulation.dataset import ground_truth_file, random_poses
    from lf_mpc_calib.simulation.optics import default_board, preset
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    camera = preset('lytro', scale=0.3)
    board = default_board(camera)
    rng = np.random.default_rng(5)
    rvecs, tvecs = random_poses(camera, board, 1, rng=rng)
    truth = ground_truth_file(camera, rvecs, tvecs)
    folder = tmp_path_factory.mktemp('bad_input')
    save_calibration(folder / 'truth.yaml', truth)
    save_calibration(folder / 'no_grid.yaml', dataclasses.replace(truth, lenslet_grid=None))
    write_image(folder / 'white.png', quantize(render_white(camera), 8))
    raw = quantize(render_raw(camera, board, rvecs[0], tvecs[0], rng=rng), 8)
    return dict(raw=raw, folder=folder)


def _node(ros_context, scene, calibration='truth.yaml', *extra):
    return DecodeNode(context=ros_context, parameter_overrides=[
        Parameter('calibration_file', value=str(scene['folder'] / calibration)),
        Parameter('white_image_file', value=str(scene['folder'] / 'white.png')),
        Parameter('measure_points', value=False), *extra])


def _send(executor, pub, node, frames, counter):
    """Publish frames one at a time, each taken by the worker before the next."""
    for k, frame in enumerate(frames):
        before = counter()
        pub.publish(frame)
        wait_for(executor, lambda: counter() > before and node._pending is None,
                 f'frame {k} taken')


def test_frames_of_another_size_are_logged_once_per_size_and_the_node_recovers(
        ros_context, ros_executor, ros_node, scene):
    node = _node(ros_context, scene)
    center = MessageCollector(ros_node, Image, '/lf_decoder/center', OUT_QOS)
    stats = MessageCollector(ros_node, String, '/lf_decoder/stats', OUT_QOS)
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    raw = scene['raw']
    small = array_to_image(raw[:-8, :-8].copy(), 'mono8')
    other = array_to_image(raw[:-16].copy(), 'mono8')
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        bad = lambda: node.bad_images  # noqa: E731
        _send(ros_executor, pub, node, [small] * 4, bad)
        frames_log = [c for ch, c in node.causes.history if ch == 'frames']
        assert len(frames_log) == 1          # four frames, one error
        h, w = raw.shape
        assert f'frames are {w - 8}x{h - 8} px' in frames_log[0]
        assert f'lenslet grid is for {w}x{h} px' in frames_log[0]
        _send(ros_executor, pub, node, [other] * 3, bad)   # another cause: logged again
        frames_log = [c for ch, c in node.causes.history if ch == 'frames']
        assert len(frames_log) == 2 and f'{w}x{h - 16} px' in frames_log[1]
        assert node.frames_processed == 0 and node.bad_images == 7
        pub.publish(array_to_image(raw, 'mono8'))          # the cause clears
        center.wait(ros_executor, timeout_sec=30.0)
        stats.wait(ros_executor, timeout_sec=30.0)
        wait_for(ros_executor, lambda: ('frames', '') in node.causes.history, 'the clearing')
        _send(ros_executor, pub, node, [small], bad)       # and comes back: logged again
    frames_log = [c for ch, c in node.causes.history if ch == 'frames']
    assert frames_log[2] == '' and len(frames_log) == 4
    assert node.frames_processed == 1
    assert yaml.safe_load(stats.last.data)['problems'] == {}


def test_a_calibration_without_lenslet_grid_is_logged_once_and_the_node_keeps_serving(
        ros_context, ros_executor, ros_node, scene):
    node = _node(ros_context, scene, 'no_grid.yaml')        # does not stop at startup
    assert node.measurer is None
    assert 'no lenslet_grid' in node.causes.active['calibration']
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    frame = array_to_image(scene['raw'], 'mono8')
    node.causes.logger = _Lines()
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        _send(ros_executor, pub, node, [frame] * 3, lambda: node.frames_waiting)
    assert node.frames_waiting == 3
    # one line for the calibration, one for the frames waiting: not one per frame
    assert [ch for ch, _ in node.causes.history] == ['calibration', 'frames']
    assert 'no usable calibration' in node.causes.active['frames']
    # waiting for a calibration is normal: said once at INFO, not as an error
    assert [level for level, text in node.causes.logger.lines
            if 'no usable calibration' in text] == ['info'], node.causes.logger.lines


class _Lines:
    """A logger that keeps (level, text) of what it is given."""

    def __init__(self):
        self.lines = []

    def __getattr__(self, level):
        if level not in ('debug', 'info', 'warning', 'warn', 'error', 'fatal'):
            raise AttributeError(level)
        return lambda text: self.lines.append((level, text))


@pytest.mark.parametrize('near, far, words', [(0.5, 0.3, 'empty'),
                                              (0.0, 0.4, 'in front of the camera')])
def test_a_depth_range_the_camera_cannot_serve_is_logged_once(
        ros_context, ros_executor, ros_node, scene, near, far, words):
    node = _node(ros_context, scene, 'truth.yaml', Parameter('depth_near', value=near),
                 Parameter('depth_far', value=far))
    depth = MessageCollector(ros_node, Image, '/lf_decoder/depth', OUT_QOS)
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    frame = array_to_image(scene['raw'], 'mono8')
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        wait_for(ros_executor, lambda: node.depth_pub.get_subscription_count() > 0,
                 'the depth subscription')
        _send(ros_executor, pub, node, [frame] * 3, lambda: node.frames_processed)
    assert not depth.messages and node.frames_processed == 3   # the other outputs go on
    depth_log = [c for ch, c in node.causes.history if ch == 'depth']
    assert len(depth_log) == 1 and words in depth_log[0]


def test_a_white_or_transposed_frame_is_named_once_and_cleared_by_a_good_one(
        ros_context, ros_executor, ros_node, scene):
    """The white image as frames: named once under problems ('frame check'), processed
    anyway, cleared by the next good frame; a transposed frame is caught at the next scheduled
    check (every 10th frame) and cleared the same way."""
    import cv2

    from lf_mpc_calib.ros.decode_node import FRAME_CHECK_EVERY
    raw = scene['raw']
    assert raw.shape[0] == raw.shape[1]          # square: a transposed frame keeps its size
    white = cv2.imread(str(scene['folder'] / 'white.png'), cv2.IMREAD_GRAYSCALE)
    node = _node(ros_context, scene)
    stats = MessageCollector(ros_node, String, '/lf_decoder/stats', OUT_QOS)
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    frames = [white, white, raw] + [raw] * (FRAME_CHECK_EVERY - 3) + [raw.T.copy(), raw]
    problems = []
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        for frame in frames:
            _send(ros_executor, pub, node, [array_to_image(frame, 'mono8')],
                  lambda: node.frames_processed)
            problems.append(dict(node.last_stats['problems']))
        wait_for(ros_executor, lambda: any('frame check' in yaml.safe_load(m.data)['problems']
                                           for m in stats.messages), 'the problem on ~/stats')
    named = [p.get('frame check', '') for p in problems]
    assert 'the frame is (nearly) the white image' in named[0] and named[1] == named[0]
    assert all(n == '' for n in named[2:FRAME_CHECK_EVERY])
    assert 'transposed' in named[FRAME_CHECK_EVERY] and named[-1] == ''
    assert node.frames_processed == len(frames)          # processed anyway
    logged = [c for ch, c in node.causes.history if ch == 'frame check']
    assert len(logged) == 4 and logged[1] == logged[3] == ''
