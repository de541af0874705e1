"""The rclpy test helpers: a real publish/subscribe and service round trip over DDS."""

import subprocess
import sys

import pytest

pytest.importorskip('rclpy')
std_msgs = pytest.importorskip('std_msgs.msg')
std_srvs = pytest.importorskip('std_srvs.srv')

from ros.rclpy_helpers import (  # noqa: E402
    call_service, LATCHED_QOS, MessageCollector, spin_until, wait_for_subscribers)


def test_helpers_pubsub_roundtrip(ros_node, ros_executor):
    pub = ros_node.create_publisher(std_msgs.String, 'helpers_chatter', 10)
    collector = MessageCollector(ros_node, std_msgs.String, 'helpers_chatter')
    wait_for_subscribers(ros_executor, pub)
    pub.publish(std_msgs.String(data='hello'))
    assert [m.data for m in collector.wait(ros_executor, count=1)] == ['hello']


def test_helpers_latched_reaches_late_subscriber(ros_node, ros_executor):
    pub = ros_node.create_publisher(std_msgs.String, 'helpers_latched', LATCHED_QOS)
    pub.publish(std_msgs.String(data='state'))
    collector = MessageCollector(ros_node, std_msgs.String, 'helpers_latched', LATCHED_QOS)
    assert collector.wait(ros_executor, count=1)[0].data == 'state'


def test_helpers_call_service(ros_node, ros_executor):
    def answer(request, response):
        response.success = True
        response.message = 'pong'
        return response

    ros_node.create_service(std_srvs.Trigger, 'helpers_ping', answer)
    client = ros_node.create_client(std_srvs.Trigger, 'helpers_ping')
    response = call_service(ros_executor, client)
    assert response.success and response.message == 'pong'


def test_helpers_spin_until_times_out(ros_executor):
    assert spin_until(ros_executor, lambda: False, timeout_sec=0.2) is False


PUBLISHER_SCRIPT = '''
import rclpy
from std_msgs.msg import String
rclpy.init()
node = rclpy.create_node('helpers_other_process')
pub = node.create_publisher(String, 'helpers_cross_process', 10)
node.create_timer(0.05, lambda: pub.publish(String(data='from another process')))
try:
    rclpy.spin(node)
except BaseException:
    pass
'''


def test_helpers_cross_process_pubsub(ros_node, ros_executor):
    """Another process on this ROS_DOMAIN_ID reaches us over DDS with LOCALHOST discovery."""
    collector = MessageCollector(ros_node, std_msgs.String, 'helpers_cross_process')
    proc = subprocess.Popen([sys.executable, '-c', PUBLISHER_SCRIPT])
    try:
        assert collector.wait(ros_executor, count=1)[0].data == 'from another process'
    finally:
        proc.terminate()
        proc.wait(timeout=20)
