"""The calibration node's ~/verify over DDS: after a calibration the next captures are held out,
measured with it, on ~/status, and saved as verification.yaml."""

import json

import pytest
import yaml

rclpy = pytest.importorskip('rclpy')

from rclpy.parameter import Parameter  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from lf_mpc_calib.ros.calibration_node import CalibrationNode  # noqa: E402
from lf_mpc_calib.ros.sim_camera_node import SimCameraNode  # noqa: E402
from ros.background import spinning  # noqa: E402
from ros.rclpy_helpers import LATCHED_QOS, MessageCollector, call_service, \
    wait_for  # noqa: E402

CALIBRATION_POSES, HELD_OUT = 6, 3
SMALL_BOARD = [Parameter('board_cols', value=6), Parameter('board_rows', value=6),
               Parameter('square_size', value=0.005115499090161524)]
SMALL_SIM = [Parameter('scale', value=0.3),
             Parameter('num_poses', value=CALIBRATION_POSES + HELD_OUT),
             Parameter('rate', value=5.0), Parameter('seed', value=3)]


@pytest.fixture(scope='module')
def verify_run(ros_context, ros_executor, tmp_path_factory):
    """Capture and calibrate 6 poses, ~/verify, capture 3 held out, ~/verify, ~/save."""
    out = tmp_path_factory.mktemp('verify')
    helper = rclpy.create_node('verify_helper', context=ros_context)
    ros_executor.add_node(helper)
    sim = SimCameraNode(context=ros_context, parameter_overrides=SMALL_SIM)
    node = CalibrationNode(context=ros_context, parameter_overrides=SMALL_BOARD + [
        Parameter('output_dir', value=str(out))])
    with spinning(ros_context, sim, node):
        c = {s: helper.create_client(Trigger, f'/lf_calibration/{s}')
             for s in ('capture', 'calibrate', 'save', 'verify')}
        next_pose = helper.create_client(Trigger, '/lf_sim_camera/next_pose')
        status = MessageCollector(helper, String, '/lf_calibration/status', LATCHED_QOS)
        wait_for(ros_executor, lambda: node.session.ready, 'the white image', 30.0)
        early = call_service(ros_executor, c['verify'])

        def capture():
            answer = call_service(ros_executor, c['capture'], timeout_sec=30.0)
            assert call_service(ros_executor, next_pose).success
            return answer
        for _ in range(CALIBRATION_POSES):
            capture()
        calibrated = call_service(ros_executor, c['calibrate'], timeout_sec=60.0)
        hold = call_service(ros_executor, c['verify'])
        held = [capture() for _ in range(HELD_OUT)]
        verified = call_service(ros_executor, c['verify'], timeout_sec=60.0)
        wait_for(ros_executor, lambda: 'figures' in json.loads(status.last.data).get(
            'verification', {}), 'the verification on ~/status')
        saved = call_service(ros_executor, c['save'])
        yield dict(node=node, early=early, calibrated=calibrated, hold=hold, held=held,
                   verified=verified, status=json.loads(status.last.data), saved=saved,
                   out=out)
    ros_executor.remove_node(helper)
    helper.destroy_node()


def test_verify_before_calibration_is_refused(verify_run):
    early = verify_run['early']
    assert not early.success and 'not calibrated yet' in early.message


def test_verify_holds_out_the_next_captures(verify_run):
    assert verify_run['calibrated'].success, verify_run['calibrated'].message
    assert verify_run['hold'].success and 'holding out the next captures' in \
        verify_run['hold'].message
    assert all(a.success for a in verify_run['held']), [a.message for a in verify_run['held']]
    assert verify_run['held'][-1].message.startswith('held out for verification: capture 2')
    session = verify_run['node'].session
    assert session.num_poses == CALIBRATION_POSES and session.result is not None


def test_verify_measures_them_and_reports_on_status(verify_run):
    verified, status = verify_run['verified'], verify_run['status']
    assert verified.success, verified.message
    assert verified.message.startswith(f'verification passes ({HELD_OUT} held-out captures')
    assert 'RMS reprojection' in verified.message
    v = status['verification']
    assert v['passed'] and v['held_out'] == HELD_OUT and v['reused_poses'] == []
    names = [f['name'] for f in v['figures']]
    assert names[:2] == ['RMS reprojection', 'square size error (triangulated)']
    rms = v['figures'][0]
    assert rms['value'] < rms['limit'] and rms['expected'] > 0


def test_verify_saved_beside_the_calibration(verify_run):
    assert verify_run['saved'].success, verify_run['saved'].message
    folder = verify_run['out'] / 'latest'
    doc = yaml.safe_load((folder / 'verification.yaml').read_text())
    assert doc['passed'] and len(doc['poses']) == HELD_OUT
    manifest = yaml.safe_load((folder / 'manifest.yaml').read_text())
    assert len(manifest['frames']) == CALIBRATION_POSES     # held-out frames are not poses
