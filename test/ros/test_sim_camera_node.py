"""The simulated camera node over DDS: frames, white image, ground truth, poses, TF."""

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from lf_mpc_calib.io.calibration_file import loads  # noqa: E402
from lf_mpc_calib.errors import InvalidInputError  # noqa: E402
from lf_mpc_calib.ros import defaults as D  # noqa: E402
from lf_mpc_calib.ros.image_conversion import image_to_array  # noqa: E402
from lf_mpc_calib.ros.messages import rotation_vector_from_quaternion  # noqa: E402
from lf_mpc_calib.ros.sim_camera_node import SimCameraNode  # noqa: E402
from lf_mpc_calib.simulation.dataset import capture_board  # noqa: E402
from lf_mpc_calib.simulation.planning_scene import in_optical_frame  # noqa: E402
from ros.background import spinning  # noqa: E402
from ros.rclpy_helpers import LATCHED_QOS, MessageCollector, call_service, wait_for  # noqa: E402

SMALL = [Parameter('scale', value=0.3), Parameter('num_poses', value=3),
         Parameter('rate', value=10.0), Parameter('seed', value=4)]


def test_defaults_match_the_simulated_board():
    from lf_mpc_calib.simulation.optics import default_board, preset
    board = default_board(preset(D.SIM_PRESET, scale=D.SIM_SCALE))
    assert (board.cols, board.rows) == (D.BOARD_COLS, D.BOARD_ROWS)
    assert abs(board.square - D.SQUARE_SIZE) < 1e-12  # the calibration node's default board


def test_sim_camera_publishes_frames_white_truth_and_advances(ros_context, ros_executor,
                                                              ros_node):
    sim = SimCameraNode(context=ros_context, parameter_overrides=SMALL)
    with spinning(ros_context, sim):
        # latched outputs reach subscribers that join after publishing
        white = MessageCollector(ros_node, Image, 'white_image', LATCHED_QOS)
        truth = MessageCollector(ros_node, String, '/lf_sim_camera/ground_truth', LATCHED_QOS)
        tf = MessageCollector(ros_node, TFMessage, '/tf_static', LATCHED_QOS)
        frames = MessageCollector(ros_node, Image, 'image_raw', 10)
        white.wait(ros_executor)
        truth.wait(ros_executor)
        frames.wait(ros_executor, count=2)
        w = image_to_array(white.last)
        f = image_to_array(frames.last)
        assert w.shape == f.shape == (984, 984) and f.dtype == np.uint8
        assert frames.last.header.frame_id == 'lf_camera_optical_frame'
        np.testing.assert_array_equal(f, sim.frame(0))  # pose 0 shown first
        cal = loads(truth.last.data)
        assert cal.num_poses == 3 and cal.frames['optical'] == 'lf_camera_optical_frame'
        np.testing.assert_allclose(cal.rotation_vectors, sim.rvecs, atol=1e-12)

        client = ros_node.create_client(Trigger, '/lf_sim_camera/next_pose')
        answer = call_service(ros_executor, client)
        assert answer.success and answer.message.startswith('pose 1 ')
        wait_for(ros_executor, lambda: np.array_equal(image_to_array(frames.last),
                                                      sim.frame(1)), 'a frame of pose 1')
        assert not np.array_equal(sim.frame(0), sim.frame(1))
        # the true board in the optical frame a calibration reports (that of ~/points): the
        # Lytro preset's a half turn about the axis from the optics' own frame (sim.tvecs)
        rv1, tv1 = in_optical_frame(sim.truth.model, sim.rvecs[1], sim.tvecs[1])
        assert np.allclose(tv1[:2], -sim.tvecs[1][:2]) and tv1[2] == sim.tvecs[1][2] > 0
        wait_for(ros_executor, lambda: any(
            t.child_frame_id == 'lf_camera_true_board' and np.allclose(
                [t.transform.translation.x, t.transform.translation.y,
                 t.transform.translation.z], tv1)
            for m in tf.messages for t in m.transforms), 'the pose-1 board TF')
        t = [t for m in tf.messages for t in m.transforms][-1]
        q = t.transform.rotation
        np.testing.assert_allclose(rotation_vector_from_quaternion([q.x, q.y, q.z, q.w]),
                                   rv1, atol=1e-9)  # TF round trip of the pose


def test_sim_camera_is_realistic_unless_ideal_sensor(ros_context, ros_executor, ros_node):
    """The realistic sensor (default) publishes its dark frame on ~/dark_image: the black
    level the frames sit on (their darkest pixels); an ideal sensor has none."""
    from lf_mpc_calib.simulation.optics import REALISTIC_SENSOR
    tiny = [Parameter('scale', value=0.05), Parameter('num_poses', value=1)]
    for ideal in (False, True):
        sim = SimCameraNode(context=ros_context, parameter_overrides=tiny + [
            Parameter('ideal_sensor', value=ideal)] * ideal)
        try:
            assert sim.camera.sensor.response == (None if ideal else REALISTIC_SENSOR)
            assert (sim.dark is None) == ideal
        finally:
            sim.destroy_node()
    sim = SimCameraNode(context=ros_context, parameter_overrides=tiny)
    with spinning(ros_context, sim):
        dark = MessageCollector(ros_node, Image, '/lf_sim_camera/dark_image', LATCHED_QOS)
        dark.wait(ros_executor)
        pixels = image_to_array(dark.last)
        np.testing.assert_array_equal(pixels, sim.dark)
        frame = sim.frame(0)
        assert pixels.shape == frame.shape and pixels.dtype == frame.dtype
        level = np.median(pixels)
        assert level > 0 and abs(np.percentile(frame, 1) - level) <= 3, \
            (level, np.percentile(frame, 1))


def test_sim_camera_rejects_bad_parameter(ros_context):
    with pytest.raises(InvalidInputError, match="parameter 'encoding'"):
        SimCameraNode(context=ros_context,
                      parameter_overrides=[Parameter('encoding', value='rgb8')])
    with pytest.raises(InvalidInputError, match="parameter 'scale'"):
        SimCameraNode(context=ros_context, parameter_overrides=[Parameter('scale', value=2.0)])
    with pytest.raises(InvalidInputError, match="'board_cols', 'board_rows', 'square_size'"):
        SimCameraNode(context=ros_context, parameter_overrides=[Parameter('board_cols', value=9)])


def test_live_mode_plays_a_drifting_board_with_its_truth(ros_context, ros_executor, ros_node):
    sim = SimCameraNode(context=ros_context, parameter_overrides=[
        Parameter('preset', value='focused-keplerian'), Parameter('scale', value=0.25),
        Parameter('num_poses', value=2), Parameter('rate', value=20.0),
        Parameter('samples', value=1), Parameter('motion_frames', value=3)])
    # board parameters 0: the focused preset's capture board, simulate's
    board = capture_board(sim.camera)
    assert (sim.board.cols, sim.board.rows, sim.board.square) == \
        (board.cols, board.rows, board.square)
    with spinning(ros_context, sim):
        frames = MessageCollector(ros_node, Image, 'image_raw', 20)
        tf = MessageCollector(ros_node, TFMessage, '/tf', 20)
        frames.wait(ros_executor, count=7)
        arrays = [image_to_array(m) for m in frames.messages[:7]]
        # a loop of 3 different frames, replayed in order
        assert not np.array_equal(arrays[0], arrays[1])
        for a, b in zip(arrays, arrays[3:]):
            np.testing.assert_array_equal(a, b)
        rvecs, tvecs = sim.motion_poses(0)
        assert len(tvecs) == 3 and np.ptp(tvecs[:, 0]) > 0.003       # 2 mm circle
        # every frame's true board pose: by stamp in-process and on /tf
        for m in frames.messages[:7]:
            stamp = m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec
            pose = sim.true_pose_at(stamp)
            assert pose is not None and any(np.allclose(pose[1], t) for t in tvecs)
        wait_for(ros_executor, lambda: any(t.child_frame_id == 'lf_camera_true_board'
                                           for m in tf.messages for t in m.transforms),
                 'the board on /tf')
        t = [t for m in tf.messages for t in m.transforms][-1]
        stamp = t.header.stamp.sec * 1_000_000_000 + t.header.stamp.nanosec
        # in the optical frame (origin at the main lens: z the distance from it), the
        # in-process pose in the optics' own frame (z from the plane conjugate to the MLA)
        shown = in_optical_frame(sim.truth.model, *sim.true_pose_at(stamp), 'focused')[1]
        np.testing.assert_allclose([t.transform.translation.x, t.transform.translation.y,
                                    t.transform.translation.z], shown, atol=1e-12)
        z_f = sim.camera.main_lens.focus_distance
        assert shown[2] == pytest.approx(sim.true_pose_at(stamp)[1][2] + z_f, abs=1e-12)


def test_frames_rendered_ahead_are_the_frames_rendered_on_demand(ros_context):
    from lf_mpc_calib.simulation.frame_pool import render_frame
    sim = SimCameraNode(context=ros_context, parameter_overrides=SMALL + [
        Parameter('samples', value=1), Parameter('render_ahead', value=True)])
    try:
        assert sim._pool is not None and len(sim._pool) == 3
        for k in (0, 2):    # pose 0 is shown at the start; 2 waits for the worker
            here = render_frame(sim.camera, sim.board, sim.rvecs[k], sim.tvecs[k], samples=1,
                                seed=4, index=k, noise=None, bits=8)
            np.testing.assert_array_equal(sim.frame(k), here)
    finally:
        sim.destroy_node()
