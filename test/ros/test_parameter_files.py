"""
Parameters files under a namespace: each node started as ``ros2 run`` would start it (its own
process, ``--ros-args -r __ns:=/cam --params-file F``) runs with the file's values, read back
through its parameter service over DDS; a parameter it does not declare is reported in the log
and on its status, not ignored.

The package's config files key each node as ``/**/<node>``: a bare ``<node>`` key matches only
the node in the root namespace, and rcl drops the file's values for ``/cam/<node>`` without a
word (the node then runs on its code defaults).
"""

import os
import signal
import subprocess
import sys

import pytest
import yaml

rclpy = pytest.importorskip('rclpy')

from rcl_interfaces.srv import GetParameters  # noqa: E402
from rclpy.parameter import Parameter, parameter_value_to_python  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from lf_mpc_calib.ros.calibration_node import CalibrationNode  # noqa: E402
from ros.background import spinning  # noqa: E402
from ros.rclpy_helpers import LATCHED_QOS, MessageCollector, call_service  # noqa: E402

NAMESPACE = '/cam_params_test'
# config file, module, node name, the parameter changed, its new value (unlike the default)
CASES = [('calibration', 'calibration_node', 'lf_calibration', 'board_cols', 7),
         ('decode', 'decode_node', 'lf_decoder', 'views', [7, 7]),
         ('sim_camera', 'sim_camera_node', 'lf_sim_camera', 'seed', 5)]


def _params_file(repo_root, tmp_path, config, node, name, value):
    """The package's config file with ``name`` changed and an undeclared parameter added."""
    doc = yaml.safe_load((repo_root / 'config' / f'{config}.yaml').read_text())
    key, = doc
    assert key == f'/**/{node}', 'the config file must apply to the node in any namespace'
    params = doc[key]['ros__parameters']
    assert params[name] != value
    params[name] = value
    params['no_such_parameter'] = 3
    if config == 'sim_camera':
        params['scale'] = 0.2           # a small sensor: the node renders at start
    path = tmp_path / f'{config}.yaml'
    path.write_text(yaml.safe_dump(doc))
    return path


def _get_parameters(executor, client, name, tries=6):
    """GetParameters of ``name``, asked again when no answer comes in 10 s: a service seen
    ready can still lose the first response while its reply path is being matched (seen once
    in a loaded CI run); the request is idempotent."""
    for attempt in range(tries):
        try:
            return call_service(executor, client, GetParameters.Request(names=[name]),
                                timeout_sec=10.0 if attempt < tries - 1 else 60.0)
        except AssertionError:
            if attempt == tries - 1:
                raise
    return None


@pytest.mark.parametrize('config, module, node, name, value', CASES,
                         ids=[c[0] for c in CASES])
def test_node_in_a_namespace_runs_with_its_parameters_file(
        ros_node, ros_executor, repo_root, tmp_path, config, module, node, name, value):
    path = _params_file(repo_root, tmp_path, config, node, name, value)
    env = dict(os.environ, PYTHONUNBUFFERED='1')
    proc = subprocess.Popen(
        [sys.executable, '-m', f'lf_mpc_calib.ros.{module}', '--ros-args',
         '-r', f'__ns:={NAMESPACE}', '--params-file', str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        client = ros_node.create_client(GetParameters, f'{NAMESPACE}/{node}/get_parameters')
        try:
            answer = _get_parameters(ros_executor, client, name)
        finally:
            ros_node.destroy_client(client)
        got = parameter_value_to_python(answer.values[0])
        assert list(got) == value if isinstance(value, list) else got == value, \
            f'{NAMESPACE}/{node} runs with {name} = {got!r}, the file says {value!r}'
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert "parameter 'no_such_parameter' was given but" in out, out[-2000:]
    assert f'{NAMESPACE}/{node} has no such parameter' in out


def test_undeclared_parameter_is_on_the_status(ros_context, ros_node, ros_executor):
    node = CalibrationNode(context=ros_context, parameter_overrides=[
        Parameter('board_colls', value=7)])
    problems = node.parameter_problems
    assert len(problems) == 1 and "'board_colls'" in problems[0]
    assert 'board_cols' in problems[0]  # the declared names, to spot the misspelling
    status = MessageCollector(ros_node, String, '/lf_calibration/status', LATCHED_QOS)
    with spinning(ros_context, node):
        status.wait(ros_executor, timeout_sec=30.0)
    assert "'board_colls'" in status.last.data and 'parameter_problems' in status.last.data


def test_a_section_that_does_not_apply_is_reported(ros_context, tmp_path):
    from lf_mpc_calib.ros.defaults import unmatched_params_file_sections
    path = tmp_path / 'old_style.yaml'
    path.write_text(yaml.safe_dump({
        'lf_calibration': {'ros__parameters': {'board_cols': 7}},        # only /lf_calibration
        '/*/lf_calibration': {'ros__parameters': {'board_rows': 5}},     # one namespace
        '/**/lf_decoder': {'ros__parameters': {'views': [7, 7]}}}))      # another node
    argv = ['calibration_node', '--ros-args', '--params-file', str(path)]
    node = CalibrationNode(context=ros_context, namespace='/cam')
    try:
        problems = unmatched_params_file_sections(node, argv)
        assert len(problems) == 1, problems
        assert "section 'lf_calibration' does not apply to /cam/lf_calibration" in problems[0]
        assert '"/**/lf_calibration"' in problems[0]
    finally:
        node.destroy_node()
    root = CalibrationNode(context=ros_context)
    try:
        assert [p for p in unmatched_params_file_sections(root, argv)
                if "'/*/lf_calibration'" in p], 'one namespace level does not match the root'
        assert not [p for p in unmatched_params_file_sections(root, argv)
                    if "section 'lf_calibration'" in p]
    finally:
        root.destroy_node()


def test_a_parameter_of_the_wrong_type_keeps_the_default_and_is_reported(ros_context):
    node = CalibrationNode(context=ros_context, parameter_overrides=[
        Parameter('board_cols', value='seven'), Parameter('square_size', value=True)])
    try:
        assert node.get_parameter('board_cols').value == 9      # the default, node up
        problems = ' '.join(node.parameter_problems)
        assert "parameter 'board_cols': expected a int like the default 9, got 'seven'" \
            in problems
        assert "parameter 'square_size'" in problems
    finally:
        node.destroy_node()
