"""The decode node with a focused camera's calibration: the image rendered from the
micro-images on ~/center with its pinhole on ~/camera_info and its frame on /tf_static, its
depth on ~/depth, and the board corners triangulated from the micro-images on ~/points, against
the optics' ground truth."""

import dataclasses
import time
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, PointCloud2  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from lf_mpc_calib.ros.decode_node import DecodeNode  # noqa: E402
from lf_mpc_calib.ros.image_conversion import array_to_image, image_to_array  # noqa: E402
from lf_mpc_calib.ros.messages import (cloud_columns,  # noqa: E402
                                       rotation_vector_from_quaternion)
from ros.background import spinning  # noqa: E402
from ros.rclpy_helpers import (LATCHED_QOS, MessageCollector,  # noqa: E402
                               wait_for, wait_for_subscribers)

pytestmark = pytest.mark.cost(47)   # s on the CI machine: scheduled early (conftest)

OUT_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope='module')
def scene(tmp_path_factory):
    from scipy.spatial.transform import Rotation

    from lf_mpc_calib.io.calibration_file import default_frames, save_calibration
    from lf_mpc_calib.io.images import write_image
    from lf_mpc_calib.simulation.dataset import ground_truth_file
    from lf_mpc_calib.simulation.focused_raw import board_pose
    from lf_mpc_calib.simulation.optics import LATTICE_LENSES, Checkerboard, preset
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    # lenses on their lattice points: the rays' micro-images are then the optics' own
    # (test_decode_node_rays...: realistic lenses sit 0.02 px off them, past its 0.71 px bound)
    cam = preset('focused-keplerian', scale=0.5, sensor__noise=0.0, **LATTICE_LENSES)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    rv, tv = board_pose(cam, board, 1.25 * cam.scene_distance, (12.0, -9.0, 4.0))
    white = quantize(render_white(cam, samples=4), 8)
    raw = quantize(render_raw(cam, board, rv, tv, samples=8, noise=0.0), 8)
    truth = dataclasses.replace(ground_truth_file(cam, rv[None], tv[None]),
                                frames=default_frames('lf_camera'))
    folder = tmp_path_factory.mktemp('decode_focused')
    save_calibration(folder / 'truth.yaml', truth)
    write_image(folder / 'white.png', white)
    # the truth in the optical frame, from the optics: the physical frame (main lens at 0)
    rot, trans = cam.pose_to_physical(rv, tv)
    corners = board.points() @ rot.T + trans
    return dict(camera=cam, board=board, raw=raw, folder=folder, corners=corners, pose=(rv, tv),
                optical_pose=(Rotation.from_matrix(rot).as_rotvec(), trans))


def test_decode_node_measures_a_focused_camera(ros_context, ros_executor, ros_node, scene):
    b = scene['board']
    node = DecodeNode(context=ros_context, parameter_overrides=[
        Parameter('board_cols', value=b.cols), Parameter('board_rows', value=b.rows),
        Parameter('square_size', value=b.square),
        Parameter('calibration_file', value=str(scene['folder'] / 'truth.yaml')),
        Parameter('white_image_file', value=str(scene['folder'] / 'white.png'))])
    assert node.measurer is not None and node.measurer.white is not None
    out = {name: MessageCollector(ros_node, kind, f'/lf_decoder/{name}', OUT_QOS)
           for name, kind in (('center', Image), ('points', PointCloud2),
                              ('camera_info', CameraInfo))}
    tf = MessageCollector(ros_node, TFMessage, '/tf_static', LATCHED_QOS)
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        # a stream: the full search runs beside it, its corners come with a later frame
        found = _stream_until(ros_executor, node, pub, scene['raw'],
                              lambda st: st['corners'].startswith('tracked'))
        for c in list(out.values()) + [tf]:
            c.wait(ros_executor, timeout_sec=30.0)
        wait_for(ros_executor, lambda: len(cloud_columns(out['points'].last)['x']) > 0,
                 'the corners on ~/points', timeout_sec=10.0)
    assert found[0]['corners'].startswith('full search running: no full detection')
    assert found[0]['points'] == 0 and found[-1]['full_search_ms'] > 0
    center = image_to_array(out['center'].last)
    assert center.dtype == np.uint8 and center.ndim == 2 and center.max() > 100
    cols = cloud_columns(out['points'].last)
    pts = np.column_stack([cols['x'], cols['y'], cols['z']]).astype(float)
    assert len(pts) >= 0.9 * b.n_points
    truth = scene['corners'][cols['id'].astype(int)]
    # in front of the camera: z > 0, the distance from the main lens (1.25 x the scene's)
    assert np.all(pts[:, 2] > 0)
    assert np.median(pts[:, 2]) == pytest.approx(np.median(truth[:, 2]), rel=0.02)
    err = np.linalg.norm(pts - truth, axis=1)
    # the truth model on detected corners: the detection noise over a few-millimetre baseline
    # of micro-images, ~1 % of the distance from the main lens (measurement/test_focused_...)
    assert np.median(err) < 0.02 * 1.25 * scene['camera'].scene_distance
    assert np.all(cols['rays'] >= 2)


def test_a_burst_of_frames_is_counted_once_with_the_corners_beside_the_render(
        ros_context, ros_executor, ros_node, scene):
    """Frames faster than the node (a board: the corners in the points thread): each frame
    received is processed or dropped once; each processed frame's center goes out, and its
    corners unless a newer frame took its place in the points thread (points_skipped)."""
    b = scene['board']
    node = DecodeNode(context=ros_context, parameter_overrides=[
        Parameter('board_cols', value=b.cols), Parameter('board_rows', value=b.rows),
        Parameter('square_size', value=b.square),
        Parameter('calibration_file', value=str(scene['folder'] / 'truth.yaml')),
        Parameter('white_image_file', value=str(scene['folder'] / 'white.png'))])
    center = MessageCollector(ros_node, Image, '/lf_decoder/center', OUT_QOS)
    points = MessageCollector(ros_node, PointCloud2, '/lf_decoder/points', OUT_QOS)
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    msg = array_to_image(scene['raw'], 'mono8')
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        wait_for(ros_executor, lambda: node.points_pub.get_subscription_count() > 0,
                 'the points subscription')
        for _ in range(12):
            pub.publish(msg)
            ros_executor.spin_once(timeout_sec=0.01)

        def settled():
            return (node.frames_processed + node.frames_dropped == node.frames_received
                    and len(center.messages) == node.frames_processed
                    and len(points.messages) == node.frames_processed - node.points_skipped)
        wait_for(ros_executor, settled, 'every frame processed or dropped, its outputs out',
                 timeout_sec=60.0)
        counts = (node.frames_received, node.frames_processed, node.frames_dropped,
                  node.points_skipped, len(center.messages), len(points.messages))
        time.sleep(0.5)
        ros_executor.spin_once(timeout_sec=0.1)
        # nothing counted twice or published late
        assert counts == (node.frames_received, node.frames_processed, node.frames_dropped,
                          node.points_skipped, len(center.messages), len(points.messages))
    assert node.frames_received >= 2 and node.frames_processed >= 2, counts
    assert node.last_stats['frames']['processed'] == node.frames_processed


def _rendered_frame(tf_msg):
    """(rotation (3, 3), translation (3,)) of lf_camera_optical_frame -> ..._rendered."""
    t = next(t for t in tf_msg.transforms
             if t.child_frame_id == 'lf_camera_optical_frame_rendered')
    assert t.header.frame_id == 'lf_camera_optical_frame'
    q = t.transform.rotation
    rot = Rotation.from_rotvec(rotation_vector_from_quaternion([q.x, q.y, q.z, q.w]))
    tr = t.transform.translation
    return rot.as_matrix(), np.array([tr.x, tr.y, tr.z])


def test_decode_node_camera_info_and_depth_of_the_rendered_image(
        ros_context, ros_executor, ros_node, scene):
    """The true corners, taken into the rendered frame through /tf_static and projected with
    ~/camera_info's K, fall where OpenCV finds them in ~/center; ~/depth in the same pixels
    is the board's depth."""
    from lf_mpc_calib.simulation.focused_raw import board_depth_truth
    b = scene['board']
    node = DecodeNode(context=ros_context, parameter_overrides=[
        Parameter('measure_points', value=False),
        Parameter('calibration_file', value=str(scene['folder'] / 'truth.yaml')),
        Parameter('white_image_file', value=str(scene['folder'] / 'white.png'))])
    center = MessageCollector(ros_node, Image, '/lf_decoder/center', OUT_QOS)
    info = MessageCollector(ros_node, CameraInfo, '/lf_decoder/camera_info', OUT_QOS)
    tf = MessageCollector(ros_node, TFMessage, '/tf_static', LATCHED_QOS)
    depth = MessageCollector(ros_node, Image, '/lf_decoder/depth', OUT_QOS)
    depth_info = MessageCollector(ros_node, CameraInfo, '/lf_decoder/depth/camera_info',
                                  OUT_QOS)
    cloud = MessageCollector(ros_node, PointCloud2, '/lf_decoder/cloud', OUT_QOS)
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        wait_for(ros_executor, lambda: node.depth_pub.get_subscription_count() > 0,
                 'the depth subscription')
        pub.publish(array_to_image(scene['raw'], 'mono8'))
        for c in (center, info, tf, depth, depth_info, cloud):
            c.wait(ros_executor, timeout_sec=30.0)
    image, ci = center.last, info.last
    assert image.header.frame_id == ci.header.frame_id == 'lf_camera_optical_frame_rendered'
    assert (ci.width, ci.height) == (image.width, image.height)
    K = np.array(ci.k).reshape(3, 3)
    assert K[0, 0] > 0 and K[1, 1] > 0 and list(ci.d) == [0.0] * 5
    found, corners = cv2.findChessboardCornersSB(image_to_array(image), (b.cols, b.rows))
    assert found
    rot, trans = _rendered_frame(tf.last)
    local = (scene['corners'] - trans) @ rot            # optical -> rendered frame
    assert np.all(local[:, 2] > 0)
    proj = local @ K.T
    proj = proj[:, :2] / proj[:, 2:]
    dist = np.linalg.norm(corners.reshape(-1, 2)[:, None] - proj[None], axis=2).min(axis=1)
    # measured median 0.21 px, max 0.43 px (rendered pixels of 5 raw pixels) with the truth
    assert np.median(dist) < 0.4 and dist.max() < 1.0, dist
    d = np.frombuffer(bytes(depth.last.data), np.float32).reshape(ci.height, ci.width)
    assert depth.last.encoding == '32FC1' and depth.last.header.frame_id == ci.header.frame_id
    assert list(depth_info.last.k) == list(ci.k)
    pinhole = SimpleNamespace(K=K, centre=trans, size=(ci.width, ci.height),
                              rotation_vector=Rotation.from_matrix(rot).as_rotvec())
    truth = board_depth_truth(pinhole, b, *scene['optical_pose'])
    both = np.isfinite(d) & np.isfinite(truth)
    rel = np.abs(d[both] - truth[both]) / truth[both]
    # the core's figures (test_focused_depth): median 1.3 %, 90 % within 5 %
    assert both.sum() > 0.75 * np.isfinite(truth).sum()
    assert np.median(rel) < 0.03 and np.mean(rel < 0.05) > 0.85
    # ~/cloud: those depths as points in the optical frame, on the board's true plane
    cols = cloud_columns(cloud.last)
    assert cloud.last.header.frame_id == 'lf_camera_optical_frame'
    pts = np.column_stack([cols['x'], cols['y'], cols['z']])
    rv, tv = scene['optical_pose']
    assert np.all(pts[:, 2] > 0)
    off = np.abs((pts - tv) @ Rotation.from_rotvec(rv).as_matrix()[:, 2])
    assert len(pts) > 0.5 * np.isfinite(d[::2, ::2]).sum()
    assert np.median(off / np.linalg.norm(pts, axis=1)) < 0.03
    assert np.all((cols['intensity'] >= 0) & (cols['intensity'] <= 1))


def test_focused_corners_are_tracked_and_a_lost_board_is_named_once(
        ros_context, ros_executor, ros_node, scene):
    """Frame 1 is searched in full, frame 2 tracked; a frame without the board loses the
    track: named once under problems (not per frame), cleared when tracking resumes."""
    import yaml
    from std_msgs.msg import String
    b = scene['board']
    node = DecodeNode(context=ros_context, parameter_overrides=[
        Parameter('board_cols', value=b.cols), Parameter('board_rows', value=b.rows),
        Parameter('square_size', value=b.square),
        Parameter('calibration_file', value=str(scene['folder'] / 'truth.yaml')),
        Parameter('white_image_file', value=str(scene['folder'] / 'white.png'))])
    stats = MessageCollector(ros_node, String, '/lf_decoder/stats', OUT_QOS)
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    rng = np.random.default_rng(1)
    white = cv2.imread(str(scene['folder'] / 'white.png'), cv2.IMREAD_GRAYSCALE)
    noise = (rng.uniform(0.2, 1.0, white.shape) * white).astype(np.uint8)
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        _stream_until(ros_executor, node, pub, scene['raw'],
                      lambda st: st['corners'] == 'tracked')
        seen = [_one_frame(ros_executor, node, pub, frame)
                for frame in (noise, noise, noise, scene['raw'], scene['raw'])]
        # and the same goes out on ~/stats
        wait_for(ros_executor, lambda: any('tracking' in yaml.safe_load(m.data)['problems']
                                           for m in stats.messages), 'the problem on ~/stats')
    corners = [s['corners'] for s in seen]
    # lost: re-acquisition on the first frame, then the full search beside the stream
    assert corners[0].startswith('re-acquiring: tracking kept')
    assert 'tracking' not in seen[0]['problems']
    assert corners[1].startswith('full search running: tracking kept')
    assert 'tracking' in seen[1]['problems'] and 'tracking' in seen[2]['problems']
    # the board back: re-acquired at once from its last place, the problem cleared
    assert corners[3].startswith(('tracked', 're-acquired')) and corners[4] == 'tracked'
    assert 'tracking' not in seen[4]['problems']
    logged = [c for ch, c in node.causes.history if ch == 'tracking']
    assert len(logged) == 2 and logged[1] == ''          # once, then cleared once


def _one_frame(executor, node, pub, frame):
    """Publish one frame and wait until it is processed: the node's stats of it."""
    before = node.frames_processed
    pub.publish(array_to_image(frame, 'mono8'))
    wait_for(executor, lambda: node.frames_processed > before, 'the frame', timeout_sec=60.0)
    return dict(node.last_stats)


def _stream_until(executor, node, pub, frame, done, *, timeout_sec=60.0, period=0.02):
    """Publish ``frame`` every ``period`` s or slower until ``done(stats)``; the stats of
    every frame."""
    import time
    seen, end = [], time.monotonic() + timeout_sec
    while time.monotonic() < end:
        seen.append(_one_frame(executor, node, pub, frame))
        if done(seen[-1]):
            return seen
        time.sleep(period)
    raise AssertionError(f'not done after {timeout_sec} s ({len(seen)} frames): {seen[-1]}')


def test_decode_node_rays_of_a_focused_camera_pass_the_corners(
        ros_context, ros_executor, ros_node, scene):
    """~/rays with a focused calibration (only while subscribed): the ray of the raw pixel
    where the optics image a board corner in a micro-image passes that corner, within the
    pixel's offset from the corner's image; ray_view_step decimates the micro-images."""
    import yaml
    from std_msgs.msg import String

    from lf_mpc_calib.simulation.focused_observations import focused_observations
    b, (rv, tv) = scene['board'], scene['pose']
    node = DecodeNode(context=ros_context, parameter_overrides=[
        Parameter('measure_points', value=False), Parameter('ray_step', value=1),
        Parameter('ray_view_step', value=2),
        Parameter('calibration_file', value=str(scene['folder'] / 'truth.yaml')),
        Parameter('white_image_file', value=str(scene['folder'] / 'white.png'))])
    rays = MessageCollector(ros_node, PointCloud2, '/lf_decoder/rays', OUT_QOS)
    stats = MessageCollector(ros_node, String, '/lf_decoder/stats', OUT_QOS)
    pub = ros_node.create_publisher(Image, 'image_raw', 10)
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        wait_for(ros_executor, lambda: node.rays_pub.get_subscription_count() > 0,
                 'the rays subscription')
        pub.publish(array_to_image(scene['raw'], 'mono8'))
        rays.wait(ros_executor, timeout_sec=30.0)
        stats.wait(ros_executor, timeout_sec=30.0)
    assert rays.last.header.frame_id == 'lf_camera_optical_frame'
    assert 'rays' in yaml.safe_load(stats.last.data)['stages_ms']
    cols = cloud_columns(rays.last)
    o = np.column_stack([cols['x'], cols['y'], cols['z']]).astype(float)
    d = np.column_stack([cols['normal_x'], cols['normal_y'], cols['normal_z']]).astype(float)
    geometry = node.measurer.rays            # the same pixels, in the order of the cloud
    assert len(o) == len(geometry.pixels) > 1000
    lattice = node.measurer.detector.lattice
    lens = lattice.nearest(geometry.ijuv[:, :2])
    assert np.all(lens % lattice.cols % 2 == 0) and np.all(lens // lattice.cols % 2 == 0)
    exact = focused_observations(scene['camera'], b, rv[None], tv[None], radius_fraction=0.8)
    q = exact.ijuv[:, :2] + exact.ijuv[:, 2:]
    pix = np.rint(q).astype(np.int64)
    index = {(int(x), int(y)): n for n, (x, y) in enumerate(geometry.pixels)}
    found = [(n, index[tuple(p)]) for n, p in enumerate(pix.tolist()) if tuple(p) in index]
    assert len(found) > 0.15 * len(q)          # a quarter of the micro-images
    rows, pos = (np.array(v) for v in zip(*found))
    x = scene['corners'][exact.point[rows]]
    rel = x - o[pos]
    dist = np.linalg.norm(rel - np.einsum('ij,ij->i', rel, d[pos])[:, None] * d[pos], axis=1)
    # a pixel's footprint at the corner: the ray of the next pixel over
    model = node.measurer.model
    ijuv = exact.ijuv[rows]
    a, c = model.rays(ijuv), model.rays(ijuv + [0.0, 0.0, 1.0, 0.0])
    foot = np.linalg.norm((a[:, :2] - c[:, :2]) + (a[:, 2:] - c[:, 2:]) * x[:, 2:], axis=1)
    offset = np.linalg.norm(pix[rows] - q[rows], axis=1)
    assert np.all(dist <= 1.05 * offset * foot + 1e-4 * x[:, 2]), np.max(dist / foot)
    assert np.all((cols['intensity'] >= 0) & (cols['intensity'] <= 1))


def test_the_live_loop_is_tracked_at_camera_rate(ros_context, ros_executor, ros_node,
                                                 tmp_path):
    """The simulated camera's live loop (a few frames at low samples, 15 Hz) through the
    decode node over DDS: after the first full search (beside the stream) every look at
    ~/stats says tracked, the board is never named lost, and the frames keep coming; the
    simulated camera's <camera>_true_board on /tf (the frame's stamp) and the corners on
    ~/points are in one frame, the optical frame at the main lens: they agree directly."""
    from lf_mpc_calib.io.calibration_file import default_frames, save_calibration
    from lf_mpc_calib.ros.sim_camera_node import SimCameraNode
    from lf_mpc_calib.simulation.dataset import ground_truth_file
    sim = SimCameraNode(context=ros_context, parameter_overrides=[
        Parameter('preset', value='focused-keplerian'), Parameter('scale', value=0.4),
        Parameter('num_poses', value=2), Parameter('rate', value=15.0),
        Parameter('samples', value=4), Parameter('motion_frames', value=6)])
    truth = dataclasses.replace(ground_truth_file(sim.camera, sim.rvecs, sim.tvecs),
                                frames=default_frames('lf_camera'))
    save_calibration(tmp_path / 'truth.yaml', truth)
    b = sim.board
    node = DecodeNode(context=ros_context, parameter_overrides=[
        Parameter('board_cols', value=b.cols), Parameter('board_rows', value=b.rows),
        Parameter('square_size', value=b.square),
        Parameter('calibration_file', value=str(tmp_path / 'truth.yaml'))])
    looks = []
    with spinning(ros_context, sim, node):
        tf = MessageCollector(ros_node, TFMessage, '/tf', 100)
        points = MessageCollector(ros_node, PointCloud2, '/lf_decoder/points', OUT_QOS)
        wait_for(ros_executor, lambda: node.last_stats.get('corners', '').startswith(
            ('tracked', 're-acquired')), 'the board tracked', timeout_sec=90.0)
        start = node.frames_processed
        t_end = time.monotonic() + 3.0

        def look():
            looks.append(dict(node.last_stats))
            return time.monotonic() > t_end
        wait_for(ros_executor, look, 'the live window', timeout_sec=30.0)
        processed = node.frames_processed - start
    followed = sum(s['corners'].startswith(('tracked', 're-acquired')) for s in looks)
    assert followed >= 0.95 * len(looks), [s['corners'] for s in looks]
    assert not any('tracking' in s['problems'] for s in looks)
    # the frames keep coming (15 Hz sent; the CI machine is shared, so a low bar: a full
    # search per frame, as before tracking held, gave 0.3 frames/s)
    assert processed >= 3.0 * 2.0, (processed, looks[-1])
    assert all(s['points'] >= 0.7 * b.n_points for s in looks[-3:])
    _true_board_agrees_with_the_points(tf.messages, points.messages, b, sim.camera)


def _true_board_agrees_with_the_points(tf_msgs, cloud_msgs, board, camera):
    """Each ~/points cloud against the <camera>_true_board TF of its frame's stamp: the
    corners within 2 % of the distance (the detection noise over the micro-images' baseline,
    as above), z > 0 on both sides. The TF in the MPC frame (origin 1/k_3 = 0.34 m from the
    main lens), as it was, measured 0.78 of the distance off."""
    def ns(stamp):
        return stamp.sec * 1_000_000_000 + stamp.nanosec
    true = {ns(t.header.stamp): t for m in tf_msgs for t in m.transforms
            if t.child_frame_id == 'lf_camera_true_board'}
    assert true and all(t.header.frame_id == 'lf_camera_optical_frame' for t in true.values())
    errors = []
    for msg in cloud_msgs:
        t = true.get(ns(msg.header.stamp))
        cols = cloud_columns(msg)
        if t is None or len(cols['x']) == 0:
            continue
        assert msg.header.frame_id == 'lf_camera_optical_frame'
        q, tr = t.transform.rotation, t.transform.translation
        rot = Rotation.from_rotvec(rotation_vector_from_quaternion([q.x, q.y, q.z, q.w]))
        expected = rot.apply(board.points()) + [tr.x, tr.y, tr.z]
        pts = np.column_stack([cols['x'], cols['y'], cols['z']]).astype(float)
        assert np.all(pts[:, 2] > 0) and np.all(expected[:, 2] > 0)
        errors.append(np.median(np.linalg.norm(pts - expected[cols['id'].astype(int)],
                                               axis=1)) / np.median(pts[:, 2]))
    assert len(errors) >= 3, (len(true), len(cloud_msgs))
    assert max(errors) < 0.02, errors
