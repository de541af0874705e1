"""The calibration node on a robot arm over DDS: captures refused for a missing, stale or moving
base -> tool transform, and a session with the simulated arm that solves the mount against the
simulator's truth (published on /tf_static, saved in the calibration file and the manifest)."""

import json

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from lf_mpc_calib.camera import transforms  # noqa: E402
from lf_mpc_calib.io.calibration_file import loads  # noqa: E402
from lf_mpc_calib.ros.calibration_node import CalibrationNode  # noqa: E402
from lf_mpc_calib.ros.image_conversion import array_to_image  # noqa: E402
from lf_mpc_calib.ros.messages import rotation_vector_from_quaternion, \
    transform_stamped  # noqa: E402
from lf_mpc_calib.ros.sim_camera_node import SimCameraNode  # noqa: E402
from ros.background import spinning  # noqa: E402
from ros.rclpy_helpers import LATCHED_QOS, MessageCollector, call_service, wait_for, \
    wait_for_subscribers  # noqa: E402

pytestmark = pytest.mark.cost(20)   # s on the CI machine: scheduled early (conftest)

POSES = 6
SMALL_BOARD = [Parameter('board_cols', value=6), Parameter('board_rows', value=6),
               Parameter('square_size', value=0.005115499090161524)]
ARM = [Parameter('base_frame', value='base_link'), Parameter('tool_frame', value='tool0')]


def test_capture_refused_without_a_valid_robot_pose(ros_context, ros_executor, ros_node):
    from lf_mpc_calib.simulation.optics import preset
    from lf_mpc_calib.simulation.render import quantize, render_white
    node = CalibrationNode(context=ros_context, parameter_overrides=SMALL_BOARD + ARM + [
        Parameter('capture_timeout', value=5.0), Parameter('tf_timeout', value=0.3)])
    with spinning(ros_context, node):
        white_pub = ros_node.create_publisher(Image, 'white_image', LATCHED_QOS)
        white_pub.publish(array_to_image(
            quantize(render_white(preset('lytro', scale=0.3)), 8), 'mono8'))
        wait_for(ros_executor, lambda: node.session.ready, 'the grid from the white image')
        image_pub = ros_node.create_publisher(Image, 'image_raw', 10)
        tf_pub = ros_node.create_publisher(TFMessage, '/tf', 100)
        wait_for_subscribers(ros_executor, image_pub)
        wait_for_subscribers(ros_executor, tf_pub)
        capture = ros_node.create_client(Trigger, '/lf_calibration/capture')
        frame = array_to_image(np.zeros((8, 8), np.uint8), 'mono8')

        def capture_with(poses):
            """Capture while the test publishes ``poses`` [(dt s, w, t)] then the frame."""
            future = capture.call_async(Trigger.Request())
            wait_for(ros_executor, lambda: node._waiters, 'the capture to wait for a frame')
            now = ros_node.get_clock().now()
            for dt, w, t in poses:
                stamp = (now + rclpy.duration.Duration(nanoseconds=int(dt * 1e9))).to_msg()
                tf_pub.publish(TFMessage(transforms=[transform_stamped(
                    w, t, parent='base_link', child='tool0', stamp=stamp)]))
            frame.header.stamp = now.to_msg()
            image_pub.publish(frame)
            wait_for(ros_executor, future.done, 'the capture answer')
            return future.result()

        missing = capture_with([])
        assert not missing.success
        assert "frame 'base_link' is unknown to TF" in missing.message, missing.message
        w, t = np.array([0.1, 0.2, 0.3]), np.array([0.4, 0.0, 0.5])
        stale = capture_with([(-1.0, w, t)])
        assert not stale.success
        assert 'base_link -> tool0: the nearest is 1.0' in stale.message, stale.message
        assert 'limit 0.100 s' in stale.message and 'stale' in stale.message
        w2 = w + [0.0, 0.0, 0.02]
        moving = capture_with([(-0.1, w, t), (0.0, w2, t)])
        turned = transforms.difference((w2, t), (w, t))[0][0]
        assert not moving.success
        assert 'the arm is moving' in moving.message, moving.message
        assert f'0.00 mm / {turned:.3f} deg within 0.200 s' in moving.message
        assert node.session.num_poses == 0


def test_calibration_node_rejects_half_an_arm(ros_context):
    from lf_mpc_calib.errors import InvalidInputError
    with pytest.raises(InvalidInputError, match="'base_frame' = 'base_link'"):
        CalibrationNode(context=ros_context,
                        parameter_overrides=[Parameter('base_frame', value='base_link')])


@pytest.fixture(scope='module')
def arm_run(ros_context, ros_executor, tmp_path_factory):
    """Capture POSES poses from the simulated arm (eye-in-hand), calibrate, save."""
    out = tmp_path_factory.mktemp('arm')
    helper = rclpy.create_node('arm_helper', context=ros_context)
    ros_executor.add_node(helper)
    sim = SimCameraNode(context=ros_context, parameter_overrides=[
        Parameter('scale', value=0.3), Parameter('num_poses', value=POSES),
        Parameter('rate', value=5.0), Parameter('seed', value=3),
        Parameter('arm', value='eye-in-hand')])
    node = CalibrationNode(context=ros_context, parameter_overrides=SMALL_BOARD + ARM + [
        Parameter('output_dir', value=str(out))])
    with spinning(ros_context, sim, node):
        capture = helper.create_client(Trigger, '/lf_calibration/capture')
        next_pose = helper.create_client(Trigger, '/lf_sim_camera/next_pose')
        wait_for(ros_executor, lambda: node.session.ready, 'the white image', 30.0)
        status = MessageCollector(helper, String, '/lf_calibration/status', LATCHED_QOS)
        answers = []
        for k in range(POSES):
            if k:
                assert call_service(ros_executor, next_pose).success
            answers.append(call_service(ros_executor, capture, timeout_sec=30.0))
        calibrated = call_service(ros_executor, helper.create_client(
            Trigger, '/lf_calibration/calibrate'), timeout_sec=120.0)
        saved = call_service(ros_executor, helper.create_client(Trigger, '/lf_calibration/save'))
        tf = MessageCollector(helper, TFMessage, '/tf_static', LATCHED_QOS)
        info = MessageCollector(helper, CameraInfo, '/lf_calibration/camera_info', LATCHED_QOS)
        wait_for(ros_executor, lambda: info.messages, 'the camera info')
        wait_for(ros_executor, lambda: any(t.child_frame_id == 'lf_camera_optical_frame'
                                           for m in tf.messages for t in m.transforms),
                 'the mount on /tf_static')
        wait_for(ros_executor, lambda: 'mount' in json.loads(status.last.data)
                 .get('hand_eye', {}), 'the hand-eye status after the calibration')
        yield dict(sim=sim, node=node, answers=answers, calibrated=calibrated, saved=saved,
                   tf=tf.messages, info=info.messages[-1], out=out,
                   status=[json.loads(m.data) for m in status.messages])
    ros_executor.remove_node(helper)
    helper.destroy_node()


def test_arm_session_captures_with_robot_poses_and_guides(arm_run):
    answers = arm_run['answers']
    assert all(a.success for a in answers), [a.message for a in answers]
    assert 'hand-eye: 1 capture(s) with robot poses; hand-eye calibration needs >= 3' in \
        answers[0].message
    assert 'the mount is determined' in answers[-1].message
    he = arm_run['status'][-1]['hand_eye']
    assert he['captures'] == POSES and he['determined'] and he['axis_spread_deg'] >= 15.0
    np.testing.assert_allclose(np.array([r[0] for r in arm_run['node'].session.robot_poses]),
                               arm_run['sim'].robot_rvecs, atol=1e-9)


def test_arm_session_solves_the_mount_against_the_truth(arm_run):
    sim, node = arm_run['sim'], arm_run['node']
    assert arm_run['calibrated'].success, arm_run['calibrated'].message
    assert 'hand-eye eye-in-hand: tool0 -> lf_camera_optical_frame' in \
        arm_run['calibrated'].message
    he, result = node.session.hand_eye, node.session.published_result
    # the intrinsics are refined jointly with the mount and that joint calibration is the
    # published one: the mount refers to its optical frame
    assert result is he.extras['joint_calibration']
    np.testing.assert_array_equal(he.model.to_vector(), result.model.to_vector())
    assert 'published: the intrinsics refined jointly with the hand-eye; moved from the ' \
        'camera-only calibration by at most' in arm_run['calibrated'].message
    truth_model = sim.camera.ground_truth_model(node.session.grid)
    truth = sim.arm.in_calibrated_frame(truth_model, result.model).mount
    err_r, err_t = transforms.difference(he.mount, truth)
    err_r, err_t = float(err_r[0]), float(np.linalg.norm(err_t))
    sd_t = float(np.linalg.norm(he.mount_stddev[1]))
    sd_r = float(np.degrees(np.linalg.norm(he.mount_stddev[0])))
    print(f'mount error {1e3 * err_t:.3f} mm, {err_r:.4f} deg (sigma {1e3 * sd_t:.3f} mm, '
          f'{sd_r:.4f} deg)')
    # 6 rendered poses on the 0.3 crop determine the camera poorly (principal point sigma
    # 3-4 px, flagged in the reply), and the optical frame with it: measured 1.24 mm,
    # 1.25 deg against sigmas of 0.65 mm, 0.68 deg (the full-size figures are
    # test_demo_hand_eye's and benchmarks/bench_hand_eye.py's); the sigma must cover it
    assert 'sigma of principal point u' in arm_run['calibrated'].message
    assert err_t < 2e-3 and err_t < 3 * sd_t and err_r < 3 * sd_r, (err_t, err_r, sd_t, sd_r)


def test_arm_session_publishes_and_saves_the_mount(arm_run):
    he = arm_run['node'].session.hand_eye
    full = [m for m in arm_run['tf'] if any(t.child_frame_id == 'lf_camera_optical_frame'
                                            for t in m.transforms)][-1]
    names = [t.child_frame_id for t in full.transforms]
    assert names == [f'lf_camera_board_{n}' for n in range(POSES)] + ['lf_camera_optical_frame']
    mount = full.transforms[-1]
    assert mount.header.frame_id == 'tool0'
    tr, q = mount.transform.translation, mount.transform.rotation
    np.testing.assert_allclose([tr.x, tr.y, tr.z], he.mount[1], atol=1e-12)
    np.testing.assert_allclose(rotation_vector_from_quaternion([q.x, q.y, q.z, q.w]),
                               he.mount[0], atol=1e-9)
    latest = arm_run['out'] / 'latest'
    cal = loads((latest / 'lf_camera.yaml').read_text())
    # the saved and published intrinsics are those the mount was solved with
    np.testing.assert_allclose(cal.model.to_vector(), he.model.to_vector(), rtol=1e-12)
    from lf_mpc_calib.ros.messages import camera_info
    expected = camera_info(he.model, arm_run['node'].session.view_size, frame_id='x')
    np.testing.assert_allclose(np.array(arm_run['info'].k), np.array(expected.k), rtol=1e-12)
    assert cal.hand_eye['errors']['intrinsics'] == 'joint'
    assert cal.hand_eye['parent_frame'] == 'tool0'
    assert cal.hand_eye['child_frame'] == 'lf_camera_optical_frame'
    np.testing.assert_allclose(cal.hand_eye['translation_m'], he.mount[1], atol=1e-12)
    from lf_mpc_calib.pipeline.hand_eye import robot_poses_for_dataset
    robot = robot_poses_for_dataset(latest)
    assert robot.setup == 'eye-in-hand' and robot.frames[0] == 'frame_000.png'
    np.testing.assert_allclose(robot.translations, arm_run['sim'].robot_tvecs, atol=1e-12)
