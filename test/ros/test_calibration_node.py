"""The calibration node over DDS: services in every order, malformed images, latched outputs,
/tf_static, a bad parameter, and a session against the simulated camera vs ground truth."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from lf_mpc_calib.io.calibration_file import loads  # noqa: E402
from lf_mpc_calib.calibration.closed_form import aligned_truth  # noqa: E402
from lf_mpc_calib.camera.rotations import rotation_matrix  # noqa: E402
from lf_mpc_calib.errors import InvalidInputError  # noqa: E402
from lf_mpc_calib.ros.calibration_node import CalibrationNode  # noqa: E402
from lf_mpc_calib.ros.decode_node import DecodeNode  # noqa: E402
from lf_mpc_calib.ros.image_conversion import array_to_image  # noqa: E402
from lf_mpc_calib.ros.sim_camera_node import SimCameraNode  # noqa: E402
from ros.background import spinning  # noqa: E402
from ros.rclpy_helpers import LATCHED_QOS, MessageCollector, call_service, wait_for, \
    wait_for_subscribers  # noqa: E402

POSES = 6
# default_board(preset('lytro', scale=0.3)): the small preset keeps the test fast
SMALL_BOARD = [Parameter('board_cols', value=6), Parameter('board_rows', value=6),
               Parameter('square_size', value=0.005115499090161524)]
SMALL_SIM = [Parameter('scale', value=0.3), Parameter('num_poses', value=POSES),
             Parameter('rate', value=5.0), Parameter('seed', value=3)]


def _clients(node, name='/lf_calibration'):
    return {s: node.create_client(Trigger, f'{name}/{s}')
            for s in ('capture', 'calibrate', 'save', 'reset')}


def test_calibration_node_rejects_bad_parameters(ros_context):
    for name, value in (('square_size', -0.01), ('min_poses', 1), ('views', [8, 9]),
                        ('camera_type', 'plenoptic3'), ('board_cols', 1), ('lens_types', 0)):
        with pytest.raises(InvalidInputError, match=f"parameter '{name}'"):
            CalibrationNode(context=ros_context,
                            parameter_overrides=[Parameter(name, value=value)])


def test_calibration_node_refuses_a_checkerboard_opencv_cannot_find(ros_context):
    # 2 x 6 passes each parameter's own range; no detector finds it, so no capture ever could
    with pytest.raises(InvalidInputError, match=r"'board_cols' x 'board_rows' 2x6: .*at least 3"):
        CalibrationNode(context=ros_context, parameter_overrides=[
            Parameter('board_cols', value=2), Parameter('board_rows', value=6)])


@pytest.mark.parametrize('value', ['square_size:=-1.0', 'capture_timeout:=1e308'])
def test_calibration_node_main_exits_nonzero_on_bad_parameter_naming_the_node(value):
    # FATAL under the node's name in its namespace, as any other line of the node
    proc = subprocess.run(
        [sys.executable, '-m', 'lf_mpc_calib.ros.calibration_node', '--ros-args', '-r',
         '__ns:=/cam1', '-p', value], capture_output=True, text=True, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    name = value.split(':=')[0]
    fatal = [line for line in out.splitlines() if '[FATAL]' in line]
    assert len(fatal) == 1 and '[cam1.lf_calibration]' in fatal[0], out
    assert f"parameter '{name}'" in fatal[0], out


def test_two_calibration_nodes_in_two_namespaces_keep_their_frames_apart(ros_context, tmp_path):
    # /tf_static is global: at the default camera_name the frames come from the namespace
    from lf_mpc_calib.ros.defaults import board_frame
    out = [Parameter('output_dir', value=str(tmp_path))]
    nodes = [CalibrationNode(context=ros_context, namespace=ns, parameter_overrides=out)
             for ns in ('/cam1', '/robot/cam2', '/')]
    try:
        names = [n.camera_name for n in nodes]
        assert names == ['cam1', 'robot_cam2', 'lf_camera'], names
        frames = [{n.optical_frame, board_frame(n.camera_name, 0)} for n in nodes]
        assert frames[0] == {'cam1_optical_frame', 'cam1_board_0'}, frames
        assert not frames[0] & frames[1] and not frames[1] & frames[2], frames
        folders = {n.recorder.store.folder for n in nodes}   # nor share a session folder
        assert len(folders) == 3, folders
    finally:
        for node in nodes:
            node.destroy_node()
    named = CalibrationNode(context=ros_context, namespace='/cam1', parameter_overrides=out + [
        Parameter('camera_name', value='left')])
    assert (named.camera_name, named.optical_frame) == ('left', 'left_optical_frame')
    named.destroy_node()


def test_calibration_node_services_in_any_order_and_bad_images(ros_context, ros_executor,
                                                               ros_node, tmp_path):
    node = CalibrationNode(context=ros_context, parameter_overrides=SMALL_BOARD + [
        Parameter('capture_timeout', value=1.0),
        Parameter('output_dir', value=str(tmp_path))])
    with spinning(ros_context, node):
        c = _clients(ros_node)
        answer = call_service(ros_executor, c['calibrate'])
        assert not answer.success and 'at least 3 captured poses' in answer.message
        answer = call_service(ros_executor, c['save'])
        assert not answer.success and 'nothing to save' in answer.message
        answer = call_service(ros_executor, c['capture'])
        assert not answer.success and 'no white image yet' in answer.message
        assert call_service(ros_executor, c['reset']).success

        # malformed images on image_raw: each logged and ignored
        pub = ros_node.create_publisher(Image, 'image_raw', 10)
        wait_for_subscribers(ros_executor, pub)
        good = array_to_image(np.zeros((4, 6), np.uint8), 'mono8')
        bad = [Image(height=4, width=6, encoding='yuv422', step=12, data=bytes(48)),
               Image(height=4, width=6, encoding='mono8', step=5, data=bytes(20)),
               Image(height=4, width=6, encoding='mono8', step=6, data=bytes(23)),
               Image(height=0, width=0, encoding='mono8', step=0, data=b''),
               Image(height=200_000, width=200_000, encoding='mono8', step=200_000,
                     data=bytes(16))]
        for k, msg in enumerate(bad):  # one at a time: the subscription keeps only the newest
            pub.publish(msg)
            wait_for(ros_executor, lambda: node.bad_images == k + 1, f'rejected image {k}')
        pub.publish(good)
        wait_for(ros_executor, lambda: node.frames_received >= 1, 'the valid image')
        assert node.bad_images == len(bad)
        # the node keeps serving
        answer = call_service(ros_executor, c['calibrate'])
        assert not answer.success and 'at least 3' in answer.message

        # a white image but no frame after the capture call: a clear timeout answer
        from lf_mpc_calib.simulation.optics import preset
        from lf_mpc_calib.simulation.render import quantize, render_white
        white_pub = ros_node.create_publisher(Image, 'white_image', LATCHED_QOS)
        white_pub.publish(array_to_image(
            quantize(render_white(preset('lytro', scale=0.3)), 8), 'mono8'))
        wait_for(ros_executor, lambda: node.session.ready, 'the grid from the white image')
        answer = call_service(ros_executor, c['capture'])
        assert not answer.success and 'no valid image on image_raw within 1 s' in \
            answer.message
        answer = call_service(ros_executor, c['save'])  # nothing captured yet
        assert not answer.success and 'nothing to save' in answer.message


@pytest.fixture(scope='module')
def session_run(ros_context, ros_executor, tmp_path_factory):
    """Capture POSES poses from the simulated camera through the services and calibrate."""
    out = tmp_path_factory.mktemp('calib')
    helper = rclpy.create_node('session_helper', context=ros_context)
    ros_executor.add_node(helper)
    sim = SimCameraNode(context=ros_context, parameter_overrides=SMALL_SIM)
    node = CalibrationNode(context=ros_context, parameter_overrides=SMALL_BOARD + [
        Parameter('output_dir', value=str(out))])
    with spinning(ros_context, sim, node):
        c = _clients(helper)
        next_pose = helper.create_client(Trigger, '/lf_sim_camera/next_pose')
        wait_for(ros_executor, lambda: node.session.ready, 'the white image', 30.0)
        status = MessageCollector(helper, String, '/lf_calibration/status', LATCHED_QOS)
        answers = []
        for k in range(POSES):
            if k:
                assert call_service(ros_executor, next_pose).success
            answers.append(call_service(ros_executor, c['capture'], timeout_sec=30.0))
        calibrated = call_service(ros_executor, c['calibrate'], timeout_sec=60.0)
        saved = call_service(ros_executor, c['save'])
        # a subscriber joining after the calibration still gets the latched outputs
        info = MessageCollector(helper, CameraInfo, '/lf_calibration/camera_info', LATCHED_QOS)
        cal = MessageCollector(helper, String, '/lf_calibration/calibration', LATCHED_QOS)
        tf = MessageCollector(helper, TFMessage, '/tf_static', LATCHED_QOS)
        info.wait(ros_executor)
        cal.wait(ros_executor)
        wait_for(ros_executor, lambda: any(
            t.child_frame_id == 'lf_camera_board_0' for m in tf.messages
            for t in m.transforms), 'the board frames on /tf_static')
        result = node.session.result
        status.wait(ros_executor)
        wait_for(ros_executor, lambda: 'flags' in json.loads(status.last.data),
                 'the status after the calibration')
        statuses = [json.loads(m.data) for m in status.messages]
        reset = call_service(ros_executor, c['reset'])
        wait_for(ros_executor, lambda: json.loads(status.last.data)['summary'].startswith(
            'reset'), 'the status after the reset')
        recalibrate = call_service(ros_executor, c['calibrate'])
        yield dict(sim=sim, node=node, answers=answers, calibrated=calibrated, saved=saved,
                   info=info.last, cal=loads(cal.last.data), tf=tf.messages, result=result,
                   reset=reset, recalibrate=recalibrate, out=out, status=statuses,
                   status_after_reset=json.loads(status.last.data))
    ros_executor.remove_node(helper)
    helper.destroy_node()


def test_calibration_node_captures_every_pose(session_run):
    answers = session_run['answers']
    assert all(a.success for a in answers), [a.message[:200] for a in answers if not a.success]
    assert answers[-1].message.startswith(f'pose {POSES - 1}: 36/36 corners')
    assert 'corners per view' in answers[0].message


def test_calibration_node_guides_each_capture(session_run):
    # capture guidance in every reply and, latched, on ~/status: first the poses still
    # needed, then what the poses determine and what to add
    answers = session_run['answers']
    assert 'pose set: 1 poses; next: capture 2 more poses' in answers[0].message
    assert all('pose set: ' in a.message for a in answers)
    assert re.search(r'pose set: 3 poses; sigma k_i [0-9.]+ %, k_j [0-9.]+ %', answers[2].message)
    last = session_run['status'][-1]
    assert last['poses'] == POSES and last['summary'].startswith(f'{POSES} poses; sigma k_i')
    assert isinstance(last['flags'], list) and isinstance(last['advice'], list)
    assert len(last['depth_m']) == POSES and 'k_i' in last['sigma_pct']
    assert 'pose set: ' in session_run['calibrated'].message


def test_calibration_node_matches_ground_truth(session_run):
    sim, result = session_run['sim'], session_run['result']
    assert session_run['calibrated'].success and 'RMS reprojection' in \
        session_run['calibrated'].message
    truth, _, _ = aligned_truth(sim.camera.ground_truth_model(session_run['node'].session.grid),
                                result.model, rotation_matrix(sim.rvecs), sim.tvecs)
    assert result.rms_reprojection_px < 0.5  # rendered 8-bit frames: corners to ~0.05 px
    # 6 poses on the 0.3 crop constrain the focal terms to a few % (test_session measures
    # 0.1-5 %); 10 % tolerance
    for name in ('k_i', 'k_j', 'k_u', 'k_v'):
        est, true = getattr(result.model, name), getattr(truth, name)
        assert abs(est - true) < 0.10 * abs(true), name
    # board distances follow the focal terms, which this crop determines to a few %: within
    # 3 sigma of k_u, k_v (measured 6.7 % off with sigma 4-5 % at 0.6-1.5 x focus)
    scale_sigma = max(result.stddev[n] / abs(getattr(result.model, n)) for n in ('k_u', 'k_v'))
    dist = np.linalg.norm(result.translations, axis=1)
    np.testing.assert_allclose(dist, np.linalg.norm(sim.tvecs, axis=1),
                               rtol=max(0.05, 3 * scale_sigma))


def test_calibration_node_latched_outputs(session_run):
    info, cal, result = session_run['info'], session_run['cal'], session_run['result']
    model = result.model
    assert info.header.frame_id == 'lf_camera_optical_frame'
    assert (info.width, info.height) == session_run['node'].session.view_size
    assert info.k[0] == pytest.approx(1.0 / model.k_u, rel=1e-12)
    assert info.k[2] == pytest.approx(-model.u_0 / model.k_u, rel=1e-12)
    np.testing.assert_allclose(cal.model.to_vector(), model.to_vector(), rtol=1e-9)
    assert cal.num_poses == POSES


def test_calibration_node_tf_static_holds_every_pose(session_run):
    from lf_mpc_calib.ros.messages import rotation_vector_from_quaternion
    result = session_run['result']
    # the simulated camera publishes its own true board pose on /tf_static too
    full = [m for m in session_run['tf'] if m.transforms and
            m.transforms[0].child_frame_id.startswith('lf_camera_board_')][-1]
    names = [t.child_frame_id for t in full.transforms]
    assert names == [f'lf_camera_board_{n}' for n in range(POSES)]  # full state per message
    for n, t in enumerate(full.transforms):
        assert t.header.frame_id == 'lf_camera_optical_frame'
        tr = t.transform.translation
        np.testing.assert_allclose([tr.x, tr.y, tr.z], result.translations[n], atol=1e-12)
        q = t.transform.rotation
        np.testing.assert_allclose(rotation_vector_from_quaternion([q.x, q.y, q.z, q.w]),
                                   result.rotation_vectors[n], atol=1e-9)


def test_calibration_node_save_and_reset(session_run):
    out = session_run['out']
    assert session_run['saved'].success and f'{POSES} captured frames' in \
        session_run['saved'].message
    out = out / 'latest'                        # each save in its own folder
    assert (out / 'lf_camera.yaml').is_file() and (out / 'manifest.yaml').is_file()
    assert (out / 'lf_camera_observations.csv').is_file()
    assert len(list(out.glob('frame_*.png'))) == POSES
    assert session_run['reset'].success and f'{POSES} captured poses' in \
        session_run['reset'].message
    # the stored captures are moved aside, never deleted
    backup, = session_run['out'].glob('lf_camera_session_before_reset_*')
    assert f'stored captures moved to {backup}' in session_run['reset'].message
    assert len(list(backup.glob('capture_*/frame.png'))) == POSES
    assert not (session_run['out'] / 'lf_camera_session').exists()
    assert session_run['status_after_reset']['session']['moved_aside'] == str(backup)
    assert not session_run['recalibrate'].success  # nothing left after the reset


@pytest.mark.parametrize('name, node_cls', [('calibration', CalibrationNode),
                                            ('sim_camera', SimCameraNode),
                                            ('decode', DecodeNode)])
def test_config_files_name_every_parameter(ros_context, repo_root, name, node_cls):
    import yaml
    doc = yaml.safe_load((repo_root / 'config' / f'{name}.yaml').read_text())
    (key, section), = doc.items()
    assert key.startswith('/**/')  # the node in any namespace (test_parameter_files)
    node_name = key[len('/**/'):]
    values = section['ros__parameters']
    node = node_cls(context=ros_context, parameter_overrides=[
        Parameter(k, value=v) for k, v in values.items() if k != 'scale' or v != 0.5] + (
        [Parameter('scale', value=0.3)] if name == 'sim_camera' else []))
    try:
        assert node.get_name() == node_name
        declared = set(node._parameters) - {'use_sim_time', 'start_type_description_service'}
        assert declared == set(values)  # the config file lists every parameter, no others
    finally:
        node.destroy_node()


# the module's session node keeps running: the tests below talk to a node of their own
ISOLATED_NAME, ISOLATED_IMAGES = '/lf_calibration_isolated', 'isolated_image_raw'
ISOLATED = ['--ros-args', '-r', f'__node:={ISOLATED_NAME[1:]}', '-r',
            f'image_raw:={ISOLATED_IMAGES}', '-r', 'white_image:=isolated_white_image']


def test_calibration_node_survives_unexpected_exceptions(
        ros_context, ros_executor, ros_node, tmp_path):
    """Fuzz issue 13 #5.3: an exception other than the package's own (a LinAlgError from the
    eigen-solve) escaped ~/calibrate and ended the node with every captured pose."""
    node = CalibrationNode(context=ros_context, cli_args=ISOLATED, parameter_overrides=[
        *SMALL_BOARD, Parameter('output_dir', value=str(tmp_path))])
    kept = [np.zeros((2, 2), np.uint8) for _ in range(4)]
    node.session.frames = list(kept)            # stand-ins for four captured poses
    calls = []

    def eigen_failure():
        calls.append('calibrate')
        raise np.linalg.LinAlgError('Eigenvalues did not converge')

    def conversion_failure(msg, what):
        calls.append(what)
        raise RuntimeError('unexpected in a callback')

    node.session.calibrate = eigen_failure
    node._to_mono = conversion_failure
    with spinning(ros_context, node):
        c = _clients(ros_node, ISOLATED_NAME)
        for _ in range(2):                      # answered, and the node keeps serving
            answer = call_service(ros_executor, c['calibrate'])
            assert not answer.success
            assert 'LinAlgError: Eigenvalues did not converge' in answer.message
        pub = ros_node.create_publisher(Image, ISOLATED_IMAGES, 10)
        wait_for_subscribers(ros_executor, pub)
        pub.publish(array_to_image(np.zeros((4, 6), np.uint8), 'mono8'))
        wait_for(ros_executor, lambda: 'image_raw' in calls, 'the failing image callback')
        answer = call_service(ros_executor, c['calibrate'])
        assert not answer.success and 'Eigenvalues' in answer.message
    assert calls.count('calibrate') == 3
    assert node.session.num_poses == 4
    assert all(a is b for a, b in zip(node.session.frames, kept))


def test_calibration_node_capture_gives_the_last_rejection(
        ros_context, ros_executor, ros_node, tmp_path):
    """Fuzz issue 13 #5.5: after malformed frames ~/capture said only 'no valid image within
    4 s (7 malformed images ignored)', a running total without a reason."""
    node = CalibrationNode(context=ros_context, cli_args=ISOLATED, parameter_overrides=[
        *SMALL_BOARD, Parameter('capture_timeout', value=1.0),
        Parameter('output_dir', value=str(tmp_path))])
    node.session.decoder = object()             # 'ready': the capture waits for a frame
    pub = ros_node.create_publisher(Image, ISOLATED_IMAGES, 10)
    bad = Image(height=4, width=6, encoding='yuv422', step=12, data=bytes(48))
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        pub.publish(bad)                        # before the call: counted in the total only
        wait_for(ros_executor, lambda: node.bad_images == 1, 'the first malformed image')
        timer = ros_node.create_timer(0.2, lambda: pub.publish(bad))
        answer = call_service(ros_executor, _clients(ros_node, ISOLATED_NAME)['capture'])
        ros_node.destroy_timer(timer)
    assert not answer.success
    during = int(answer.message.split('(')[1].split(' malformed images ignored during')[0])
    assert during >= 1 and node.bad_images >= during + 1
    assert "the last: unsupported image encoding 'yuv422'" in answer.message, answer.message
    # (the running total as it was when the reply was written: frames may still arrive after)
    total = int(answer.message.split('; ')[-1].split(' malformed images since the start')[0])
    assert during + 1 <= total <= node.bad_images, answer.message


def test_calibration_node_says_when_the_acceptance_rule_refuses(session_run, tmp_path,
                                                                capsys):
    # 6 poses of the 0.3 crop leave k_u, k_v a few % uncertain: the node keeps and publishes
    # the calibration, but its reply, ~/status and the saved folder say that the one rule
    # (calibration.acceptance) refuses it, and calibrate-raw on that folder refuses it by
    # the same reasons. Before, the reply only listed the sigmas among the flags and the
    # folder said nothing; demo --ros then called such a session "a calibration to trust"
    import yaml
    from lf_mpc_calib.cli import main
    from lf_mpc_calib.calibration.acceptance import acceptance
    reply = session_run['calibrated']
    assert reply.success
    # the node's verdict is the rule's on the result it published (the session was reset
    # since: the corner noise is not known here, only the fit check needs it)
    refusals = list(acceptance(session_run['result']).refusals)
    assert refusals and all(r.startswith('sigma of ') for r in refusals), refusals
    assert 'NOT accepted (lf_mpc_calib.calibration.acceptance): ' + \
        '; '.join(refusals) in reply.message
    assert 'calibrate-raw refuses it by the same rule' in reply.message
    status = session_run['status'][-1]
    assert status['accepted'] is False
    assert status['acceptance']['refusals'] == refusals
    saved = session_run['out'] / 'latest'
    manifest = yaml.safe_load((saved / 'manifest.yaml').read_text())
    assert manifest['acceptance']['accepted'] is False
    assert manifest['acceptance']['refusals'] == refusals
    assert 'NOT accepted' in session_run['saved'].message
    # calibrate-raw on the saved session: refused, naming the figures the node named
    assert main(['calibrate-raw', str(saved), '-o', str(tmp_path / 'cal.yaml')]) != 0
    err = capsys.readouterr().err
    assert 'the poses do not determine the camera' in err
    named = {re.match(r'sigma of (.+) [0-9.]+ (?:%|px) \(limit', r).group(1) for r in refusals}
    assert all(f'sigma of {n}' in err for n in named), (named, err)
    assert not (tmp_path / 'cal.yaml').exists()


def test_a_thousand_capture_calls_at_once_are_all_answered(ros_context, ros_executor, ros_node,
                                                           tmp_path):
    # the service keeps D.SERVICE_QUEUE requests (ROS's default 10 answered 10 of 1000); the
    # caller's client needs as deep a queue for the answers (with 10 it lost 2 of 1000)
    # In a namespace of its own: session_run's simulated camera and calibration node (module
    # scope) may still be up, and in the root namespace this node took their latched white and
    # their frames (and the client reached both ~/capture services), so the 1000 captures
    # were real ones once the white's grid came at once (kept from session_run's fit)
    from lf_mpc_calib.ros.defaults import SERVICE_QUEUE, service_qos
    node = CalibrationNode(context=ros_context, namespace='/thousand', parameter_overrides=(
        SMALL_BOARD + [Parameter('output_dir', value=str(tmp_path))]))
    with spinning(ros_context, node):
        client = ros_node.create_client(Trigger, '/thousand/lf_calibration/capture',
                                        qos_profile=service_qos())
        assert client.wait_for_service(timeout_sec=10)
        futures = [client.call_async(Trigger.Request()) for _ in range(SERVICE_QUEUE)]
        wait_for(ros_executor, lambda: all(f.done() for f in futures), 'every answer', 60)
        assert all('no white image yet' in f.result().message for f in futures)


def test_a_capture_takes_no_frame_that_arrived_before_it_was_asked_for(ros_context, tmp_path):
    # a frame taken from image_raw before ~/capture came (its conversion still running when
    # the capture began waiting) is the old pose's: the demo's capture after ~/next_pose got
    # it ('the board has not moved since pose 3') when the machine was busy
    import threading
    import time
    node = CalibrationNode(context=ros_context, parameter_overrides=SMALL_BOARD + [
        Parameter('output_dir', value=str(tmp_path))])
    try:
        converting, release = threading.Event(), threading.Event()
        convert = node._to_mono

        def slow_to_mono(msg, what):
            converting.set()
            release.wait(10)
            return convert(msg, what)
        node._to_mono = slow_to_mono
        old = array_to_image(np.full((4, 6), 7, np.uint8), 'mono8')
        arriving = threading.Thread(target=node._on_image, args=(old,))
        arriving.start()
        assert converting.wait(10)
        got = []
        asking = threading.Thread(target=lambda: got.append(node.next_frame(2.0)))
        asking.start()
        deadline = time.monotonic() + 10
        while not node._waiters and time.monotonic() < deadline:
            threading.Event().wait(0.001)          # the capture is waiting for a frame
        release.set()
        arriving.join(10)
        node._to_mono = convert
        new = array_to_image(np.full((4, 6), 9, np.uint8), 'mono8')
        node._on_image(new)                        # the first frame after the request
        asking.join(10)
        assert got and got[0] is not None and int(got[0][0][0, 0]) == 9, got
    finally:
        node.destroy_node()
