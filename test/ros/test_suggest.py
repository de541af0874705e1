"""~/suggest and the latched ~/suggested_pose over DDS, with the simulated camera following:
the pose within the constraints, the same pose latched, the board shown and captured there."""

import json

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from lf_mpc_calib.calibration.planning import QUANTITIES, pose_geometry  # noqa: E402
from lf_mpc_calib.io.calibration_file import save_calibration  # noqa: E402
from lf_mpc_calib.ros.calibration_node import CalibrationNode  # noqa: E402
from lf_mpc_calib.ros.messages import rotation_vector_from_quaternion  # noqa: E402
from lf_mpc_calib.ros.sim_camera_node import SimCameraNode  # noqa: E402
from ros.background import spinning  # noqa: E402
from ros.rclpy_helpers import LATCHED_QOS, MessageCollector, call_service, \
    wait_for  # noqa: E402

# default_board(preset('lytro', scale=0.3)), as test_calibration_node
SMALL_BOARD = [Parameter('board_cols', value=6), Parameter('board_rows', value=6),
               Parameter('square_size', value=0.005115499090161524)]
DEPTHS = [0.2, 0.6]
TILT = 25.0


def test_suggest_gives_a_pose_within_the_constraints_latched_and_followed(
        ros_context, ros_executor, ros_node, tmp_path):
    sim = SimCameraNode(context=ros_context, parameter_overrides=[
        Parameter('scale', value=0.3), Parameter('num_poses', value=1),
        Parameter('rate', value=5.0), Parameter('seed', value=3),
        Parameter('follow_suggestions', value=True)])
    nominal = tmp_path / 'nominal.yaml'          # the simulator's design model
    save_calibration(nominal, sim.truth)
    node = CalibrationNode(context=ros_context, parameter_overrides=SMALL_BOARD + [
        Parameter('output_dir', value=str(tmp_path)),
        Parameter('nominal_model_file', value=str(nominal)),
        Parameter('plan_depth_range', value=DEPTHS),
        Parameter('plan_max_tilt_deg', value=TILT), Parameter('plan_seed', value=0)])
    with spinning(ros_context, sim, node):
        suggest = ros_node.create_client(Trigger, '/lf_calibration/suggest')
        capture = ros_node.create_client(Trigger, '/lf_calibration/capture')
        wait_for(ros_executor, lambda: node.session.ready, 'the white image', 30.0)
        answer = call_service(ros_executor, suggest, timeout_sec=30.0)
        assert answer.success, answer.message
        d = json.loads(answer.message)
        assert d['model'] == 'nominal' and d['captures'] == 0 and d['reached'] is False
        assert all(d['sigma_now'][q] is None for q in QUANTITIES)   # nothing captured yet
        pose = d['board_pose']
        assert pose['frame_id'] == 'lf_camera_optical_frame'
        rvec, tvec = np.array(pose['rotation_vector']), np.array(pose['translation_m'])
        z, ax, ay, _ = pose_geometry(rvec, tvec, node.session.board.points())
        assert DEPTHS[0] <= z <= DEPTHS[1] and abs(ax) <= TILT and abs(ay) <= TILT
        assert d['why'].startswith('of 120 poses within the constraints')

        # latched: a subscriber that joins afterwards gets the same pose
        late = MessageCollector(ros_node, PoseStamped, '/lf_calibration/suggested_pose',
                                LATCHED_QOS)
        late.wait(ros_executor)
        msg = late.last
        assert msg.header.frame_id == 'lf_camera_optical_frame'
        p, o = msg.pose.position, msg.pose.orientation
        np.testing.assert_allclose([p.x, p.y, p.z], tvec, atol=1e-12)
        np.testing.assert_allclose(rotation_vector_from_quaternion([o.x, o.y, o.z, o.w]),
                                   rvec, atol=1e-9)

        # the simulated camera shows the board there (the pose in the calibrated frame, a
        # half turn about the optical axis from the optics'); the capture finds all of it
        wait_for(ros_executor, lambda: sim.followed == 1, 'the board at the suggestion', 30.0)
        np.testing.assert_allclose(sim.tvecs[-1], tvec * [-1, -1, 1], atol=1e-9)
        assert sim.pose_index == len(sim.tvecs) - 1
        answer = call_service(ros_executor, capture, timeout_sec=30.0)
        assert answer.success and answer.message.startswith('pose 0: 36/36 corners'), \
            answer.message[:200]

        # the next suggestion accounts for the capture
        d2 = json.loads(call_service(ros_executor, suggest, timeout_sec=30.0).message)
        assert d2['captures'] == 1 and d2['board_pose'] != pose


@pytest.mark.parametrize('setup', ['eye-in-hand', 'eye-to-hand'])
def test_the_simulated_arm_works_inside_the_default_arm_limits(setup):
    """The node's default workspace box and tool-tilt limit hold the simulated arm's tool
    poses: at the simulated camera's default poses and at the planner's candidates."""
    from scipy.spatial.transform import Rotation

    from lf_mpc_calib.ros.suggestions import PARAMETERS
    from lf_mpc_calib.simulation.arm import default_arm
    from lf_mpc_calib.simulation.dataset import capture_poses
    from lf_mpc_calib.simulation.optics import default_board, preset
    from lf_mpc_calib.simulation.planning_scene import simulated_planner
    d = {p[0]: p[1] for p in PARAMETERS}
    box, ref = np.array(d['plan_workspace_box']), np.array(d['plan_tool_tilt_reference'])
    cam = preset('lytro', scale=0.5)
    board = default_board(cam)
    rv, tv = capture_poses(cam, board, 12, rng=np.random.default_rng(0))
    planner = simulated_planner(cam, board, noise_px=0.1, target_k_pct=0.3, target_pp_px=0.3,
                                rng=np.random.default_rng(0))
    crv, ctv, _ = planner.random_poses(200)
    w, t = default_arm(setup).robot_poses(np.vstack([rv, crv]), np.vstack([tv, ctv]))
    assert np.all((t >= box[:3]) & (t <= box[3:]))
    z = Rotation.from_rotvec(w).apply([0.0, 0.0, 1.0])
    tilt = np.degrees(np.arccos(np.clip(z @ ref / np.linalg.norm(ref), -1, 1)))
    assert tilt.max() <= d['plan_max_tool_tilt_deg']


def test_suggest_on_an_arm_refuses_a_workspace_box_the_board_cannot_be_seen_from(
        ros_context, ros_executor, ros_node, tmp_path):
    """Eye-in-hand, the mount solved: a workspace box far from where the board can be seen
    is refused with the reason (success false), and the node answers on."""
    from lf_mpc_calib.simulation.arm import default_arm
    from lf_mpc_calib.simulation.dataset import capture_poses
    from lf_mpc_calib.simulation.optics import default_board, preset
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    cam = preset('lytro', scale=0.3)
    board = default_board(cam)
    arm = default_arm('eye-in-hand')
    node = CalibrationNode(context=ros_context, parameter_overrides=SMALL_BOARD + [
        Parameter('output_dir', value=str(tmp_path)),
        Parameter('base_frame', value=arm.base_frame),
        Parameter('tool_frame', value=arm.tool_frame),
        Parameter('plan_depth_range', value=DEPTHS), Parameter('plan_seed', value=0),
        Parameter('plan_workspace_box', value=[5.0, 5.0, 5.0, 6.0, 6.0, 6.0])])
    session = node.session                      # filled before the node spins
    session.set_white(quantize(render_white(cam), 8))
    rv, tv = capture_poses(cam, board, 4, rng=np.random.default_rng(4))
    robot = arm.robot_poses(rv, tv)
    for k in range(len(rv)):
        raw = render_raw(cam, board, rv[k], tv[k], rng=np.random.default_rng(k))
        assert session.capture(quantize(raw, 8), robot_pose=(robot[0][k], robot[1][k])).accepted
    session.calibrate()
    session.solve_hand_eye()
    with spinning(ros_context, node):
        suggest = ros_node.create_client(Trigger, '/lf_calibration/suggest')
        for _ in range(2):                      # refused, and refused again: still up
            answer = call_service(ros_executor, suggest, timeout_sec=60.0)
            assert not answer.success
            assert 'no pose satisfies the constraints' in answer.message
            assert 'tool outside the workspace box' in answer.message
            assert 'workspace box [5, 5, 5, 6, 6, 6] m' in answer.message


def _focused_camera(name, tmp_path):
    """(camera, board, 8-bit white at 2 rays, nominal.yaml path) of preset ``name`` at a 0.3
    crop: its true model written as the nominal model the planner starts from."""
    from lf_mpc_calib.simulation.dataset import ground_truth_file
    from lf_mpc_calib.simulation.optics import default_board, preset
    from lf_mpc_calib.simulation.render import quantize, render_white
    cam = preset(name, scale=0.3)
    white = quantize(render_white(cam, samples=2), 8)
    nominal = tmp_path / 'nominal.yaml'
    save_calibration(nominal, ground_truth_file(cam, np.zeros((1, 3)),
                                                np.array([[0.0, 0.0, 1.0]])))
    return cam, default_board(cam), white, nominal


def test_suggest_for_a_focused_camera_keeps_out_of_the_focus_band_or_refuses(
        ros_context, ros_executor, ros_node, tmp_path):
    """Focused-Keplerian: the suggestion (reply and ~/suggested_pose) in the optical frame at
    the main lens, as ~/points: z > 0, within plan_depth_range given there, outside
    plan_focus_band around the plane conjugate to the micro-lenses (z = 1/k_3); a band
    covering the depth range is refused with both ranges (success false) and the node
    answers on."""
    from lf_mpc_calib.simulation.planning_scene import planning_constraints
    cam, board, white, nominal = _focused_camera('focused-keplerian', tmp_path)
    mpc = [float(v) for v in planning_constraints(cam)[1].depth_range_m]
    z_f = cam.main_lens.focus_distance            # 1/k_3: the conjugate plane's distance
    depths = [v + z_f for v in mpc]               # from the main lens
    band = float(np.mean(mpc))
    for width, ok in ((band, True), (10.0, False)):
        node = CalibrationNode(context=ros_context, parameter_overrides=[
            Parameter('camera_type', value='focused'),
            Parameter('board_cols', value=board.cols), Parameter('board_rows', value=board.rows),
            Parameter('square_size', value=float(board.square)),
            Parameter('output_dir', value=str(tmp_path / f'out{ok}')),
            Parameter('nominal_model_file', value=str(nominal)),
            Parameter('plan_depth_range', value=depths), Parameter('plan_seed', value=0),
            Parameter('plan_focus_band', value=width)])
        node.session.set_white(white)
        with spinning(ros_context, node):
            suggest = ros_node.create_client(Trigger, '/lf_calibration/suggest')
            for _ in range(1 if ok else 2):     # refused, and refused again: still up
                answer = call_service(ros_executor, suggest, timeout_sec=60.0)
                assert answer.success is ok, answer.message
                if not ok:
                    assert 'covers the whole depth range' in answer.message
                    continue
                d = json.loads(answer.message)
                pose = d['board_pose']
                z, _, _, _ = pose_geometry(np.array(pose['rotation_vector']),
                                           np.array(pose['translation_m']), board.points())
                assert 0 < z_f + band <= z <= depths[1], (z, band, depths)
                assert f'board at {z:.3f} m' in d['why'] and pose['translation_m'][2] > 0
                assert d['depth_range_m'] == pytest.approx(depths)
                late = MessageCollector(ros_node, PoseStamped,
                                        '/lf_calibration/suggested_pose', LATCHED_QOS)
                late.wait(ros_executor)
                p = late.last.pose.position
                np.testing.assert_allclose([p.x, p.y, p.z], pose['translation_m'], atol=1e-12)
        node.destroy_node()


def test_suggest_for_a_multi_focus_camera_counts_each_type_in_its_focus_band(
        ros_context, ros_executor, ros_node, tmp_path):
    """Focused-multifocus (lens_types 3): answered before the types are told (every
    micro-image counts, said so), then with each type in its plan_type_focus_bands band (the
    simulator's types set as a calibration would tell them); a band list for 2 types is
    refused (success false) and the node answers on."""
    from lf_mpc_calib.features.lens_type_inference import LensTypeEstimate
    from lf_mpc_calib.simulation.planning_scene import planning_constraints, type_focus_depths
    cam, board, white, nominal = _focused_camera('focused-multifocus', tmp_path)
    c = planning_constraints(cam)[1]
    z_f = cam.main_lens.focus_distance            # the MPC frame's origin from the main lens
    bands = [(lo + z_f, hi + z_f) for lo, hi in type_focus_depths(cam)]   # optical frame
    for flat, ok in (([v for b in bands for v in b], True),
                     ([v for b in bands[:2] for v in b], False)):
        node = CalibrationNode(context=ros_context, parameter_overrides=[
            Parameter('camera_type', value='focused'), Parameter('lens_types', value=3),
            Parameter('board_cols', value=board.cols), Parameter('board_rows', value=board.rows),
            Parameter('square_size', value=float(board.square)),
            Parameter('output_dir', value=str(tmp_path / f'out{ok}')),
            Parameter('nominal_model_file', value=str(nominal)),
            Parameter('plan_depth_range', value=[float(v) + z_f for v in c.depth_range_m]),
            Parameter('plan_focus_band', value=float(c.excluded_depths_m[1])),
            Parameter('plan_seed', value=0), Parameter('plan_type_focus_bands', value=flat)])
        node.session.set_white(white)
        with spinning(ros_context, node):
            suggest = ros_node.create_client(Trigger, '/lf_calibration/suggest')
            answer = call_service(ros_executor, suggest, timeout_sec=60.0)
            assert answer.success, answer.message
            assert not json.loads(answer.message)['lens_types']['told']
            types = cam.mla.lens_type(cam.micro_image_of(node.session.grid.centres())[0])
            node.session.type_estimate = LensTypeEstimate(types, np.zeros((6, 1)), 10.0, 0.0)
            answer = call_service(ros_executor, suggest, timeout_sec=60.0)
            assert answer.success is ok, answer.message
            if ok:
                part = json.loads(answer.message)['lens_types']
                assert part['told'] and np.allclose(part['focus_bands_m'], bands)
                assert part['type_terms'] == 'held fixed in the prediction'
            else:
                assert 'each of the 3 lens types' in answer.message
                assert call_service(ros_executor, suggest, timeout_sec=60.0) is not None
        node.destroy_node()
