"""
A stalled input is never silent (issue 27 #3): the input rate and the age of the last frame
are on ~/status and ~/stats, a stall is logged once (and its end once), an image topic that
never publishes is named, and frames large enough for best-effort delivery to lose them get
one line saying what to set (a warning only when they stall).
"""

import contextlib
import json

import numpy as np
import pytest

from lf_mpc_calib.ros.guard import CauseLog
from lf_mpc_calib.ros.input_monitor import FIRST_FRAME_S, LARGE_FRAME_BYTES, InputMonitor


class _Logger:
    def __init__(self):
        self.lines = []

    def error(self, text):
        self.lines.append(('error', text))

    def warning(self, text):
        self.lines.append(('warning', text))

    def info(self, text):
        self.lines.append(('info', text))


class _Node:
    """What InputMonitor asks of a node."""

    def __init__(self, publishers=1):
        self.logger, self.publishers = _Logger(), publishers

    def get_logger(self):
        return self.logger

    def count_publishers(self, topic):
        return self.publishers

    def resolve_topic_name(self, topic):
        return '/cam/' + topic


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def _monitor(reliability='best_effort', publishers=1):
    node, clock = _Node(publishers), _Clock()
    causes = CauseLog(node.logger)
    return InputMonitor(node, 'image_raw', causes, reliability, clock=clock), node, clock, causes


def test_a_stall_is_logged_once_and_its_end_once():
    monitor, node, clock, causes = _monitor()
    for _ in range(8):                      # 2 Hz
        monitor.frame(1000)
        clock.t += 0.5
    assert monitor.check() is None
    assert monitor.as_dict()['rate_hz'] == pytest.approx(2.0)
    clock.t += 2.0                          # 2.5 s without a frame: under max(3 s, 5 periods)
    assert monitor.check() is None
    clock.t += 1.0
    problem = monitor.check()
    assert 'frames on /cam/image_raw stopped' in problem and 'was 2.00 Hz' in problem
    for _ in range(20):                     # the stall goes on: still logged once
        clock.t += 1.0
        monitor.check()
    assert [kind for kind, _ in node.logger.lines] == ['error']
    assert monitor.as_dict()['last_frame_age_s'] == pytest.approx(23.5)
    assert causes.active['input'] == problem
    monitor.frame(1000)                     # frames resume
    assert 'input' not in causes.active
    assert node.logger.lines[-1][0] == 'info' and 'working again' in node.logger.lines[-1][1]


@pytest.mark.parametrize('publishers, advice', [(0, 'check the topic name'),
                                                (1, 'image_reliability to reliable')])
def test_a_topic_that_never_publishes_is_named(publishers, advice):
    monitor, node, clock, _ = _monitor(publishers=publishers)
    clock.t += FIRST_FRAME_S - 1
    assert monitor.check() is None
    clock.t += 2
    problem = monitor.check()
    assert 'no frame on /cam/image_raw' in problem and advice in problem
    assert f'{publishers} publisher(s)' in problem


@pytest.mark.parametrize('reliability, told', [('best_effort', True), ('reliable', False)])
def test_large_frames_on_best_effort_are_said_once_and_named_when_they_stall(reliability, told):
    monitor, node, clock, _ = _monitor(reliability)
    monitor.frame(LARGE_FRAME_BYTES - 1)
    assert not node.logger.lines
    for _ in range(3):
        monitor.frame(12_500_000)           # an R12 frame
        clock.t += 0.1
    lines = [t for kind, t in node.logger.lines if kind == 'info']
    assert not [kind for kind, _ in node.logger.lines if kind in ('warning', 'error')]
    assert len(lines) == int(told)          # nothing is wrong while they arrive: no warning
    if told:
        assert '12.5 MB' in lines[0] and 'image_reliability:=reliable' in lines[0]
    clock.t += 60
    problem = monitor.check()
    assert 'stopped' in problem and ('image_reliability:=reliable' in problem) == told


@contextlib.contextmanager
def _feeding(ros_context, ros_node, ros_executor, node, topic, msg_type, qos, frames):
    """Spin ``node``, publish ``frames`` small frames to it over DDS (reliable), then none
    until a message on ``topic`` says they stopped. Yields (the collector of ``topic``, a
    function publishing one more frame); the node spins until the block ends."""
    pytest.importorskip('rclpy')
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    from lf_mpc_calib.ros.image_conversion import array_to_image
    from ros.background import spinning
    from ros.rclpy_helpers import MessageCollector, wait_for, wait_for_subscribers

    collector = MessageCollector(ros_node, msg_type, topic, qos)
    pub = ros_node.create_publisher(Image, '/image_raw',
                                    QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE))
    frame = array_to_image(np.zeros((60, 80), np.uint8), 'mono8')
    with spinning(ros_context, node):
        wait_for_subscribers(ros_executor, pub)
        for k in range(frames):
            pub.publish(frame)
            wait_for(ros_executor, lambda: node.input.frames > k, f'frame {k}')
        wait_for(ros_executor, lambda: any('stopped' in m.data for m in collector.messages),
                 f'the stall on {topic}', timeout_sec=20.0)
        yield collector, lambda: pub.publish(frame)


def test_the_calibration_node_puts_a_stall_on_its_status_over_dds(
        ros_context, ros_node, ros_executor):
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from lf_mpc_calib.ros.calibration_node import CalibrationNode
    from ros.rclpy_helpers import LATCHED_QOS, wait_for

    node = CalibrationNode(context=ros_context, parameter_overrides=[
        Parameter('image_reliability', value='reliable')])
    with _feeding(ros_context, ros_node, ros_executor, node, '/lf_calibration/status',
                  String, LATCHED_QOS, frames=6) as (status, publish):
        stalled = json.loads(status.last.data)
        assert 'stopped' in stalled['problems']['input']
        assert stalled['input']['frames'] == 6 and stalled['input']['last_frame_age_s'] >= 3
        assert stalled['summary'] == 'no captures yet'
        publish()
        wait_for(ros_executor, lambda: 'input' not in node.causes.active, 'the input back')
    assert [c for c, cause in node.causes.history] == ['input', 'input']


def test_the_decode_node_puts_a_stall_on_its_stats_over_dds(
        ros_context, ros_node, ros_executor):
    import yaml
    from rclpy.parameter import Parameter
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    from lf_mpc_calib.ros.decode_node import DecodeNode

    node = DecodeNode(context=ros_context, parameter_overrides=[
        Parameter('image_reliability', value='reliable')])    # no calibration: frames wait
    reliable = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
    with _feeding(ros_context, ros_node, ros_executor, node, '/lf_decoder/stats', String,
                  reliable, frames=4) as (stats, _):
        last = yaml.safe_load(stats.last.data)
    assert 'stopped' in last['problems']['input'] and last['input']['frames'] == 4


def test_two_sessions_in_one_namespace_are_named_and_the_nodes_stay_up(
        ros_context, ros_node, ros_executor):
    """A second decode node of the same name and namespace: both name the clash once under
    problems ('namespace'), and it clears when the other one is gone."""
    pytest.importorskip('rclpy')
    from lf_mpc_calib.ros.decode_node import DecodeNode
    from ros.background import spinning
    from ros.rclpy_helpers import wait_for

    first = DecodeNode(context=ros_context, namespace='/cam')
    second = DecodeNode(context=ros_context, namespace='/cam')
    with spinning(ros_context, first):
        with spinning(ros_context, second):
            wait_for(ros_executor, lambda: 'namespace' in first.causes.active
                     and 'namespace' in second.causes.active, 'the clash named',
                     timeout_sec=20.0)
            assert '2 nodes are named /cam/lf_decoder' in first.causes.active['namespace']
        second.destroy_node()
        wait_for(ros_executor, lambda: 'namespace' not in first.causes.active,
                 'the clash cleared', timeout_sec=20.0)
    assert [c for ch, c in first.causes.history if ch == 'namespace'][-1] == ''
    assert len([c for ch, c in first.causes.history if ch == 'namespace' and c]) == 1
