"""
Helpers for tests that run real rclpy in-process over DDS.

Never sleep for a fixed time: spin an executor until a condition holds or a generous timeout
(discovery alone can take 2-3 s on a loaded machine) runs out. Import from a test under
``test/ros/`` as ``from ros.rclpy_helpers import spin_until, call_service``; the fixtures in
``test/ros/conftest.py`` (``ros_context``, ``ros_executor``, ``ros_node``) wrap the same
functions.
"""

from contextlib import contextmanager
import os
import time

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

DEFAULT_TIMEOUT_SEC = 20.0

LATCHED_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                         reliability=ReliabilityPolicy.RELIABLE)
"""QoS of a subscriber to the package's latched outputs (calibration, camera_info, tf_static)."""


@contextmanager
def ros_context(domain_id=None):
    """
    Initialise a private rclpy context, shut it down on exit.

    Parameters
    ----------
    domain_id : int, optional
        Defaults to ``ROS_DOMAIN_ID`` (unique per pytest process, see ``test/conftest.py``).

    Yields
    ------
    rclpy.context.Context
        Pass it as ``context=`` to nodes and executors.

    """
    if domain_id is None:
        domain_id = int(os.environ.get('ROS_DOMAIN_ID', '0'))
    context = Context()
    rclpy.init(context=context, domain_id=domain_id)
    try:
        yield context
    finally:
        rclpy.try_shutdown(context=context)


def make_executor(context, *nodes):
    """Return a SingleThreadedExecutor in ``context`` with ``nodes`` added."""
    executor = SingleThreadedExecutor(context=context)
    for node in nodes:
        executor.add_node(node)
    return executor


def spin_until(executor, predicate, timeout_sec=DEFAULT_TIMEOUT_SEC, step_sec=0.05):
    """
    Spin ``executor`` until ``predicate()`` is true or ``timeout_sec`` passes.

    Returns
    -------
    bool
        Whether the predicate held; the predicate is checked once more at the deadline.

    """
    deadline = time.monotonic() + timeout_sec
    while True:
        if predicate():
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return bool(predicate())
        executor.spin_once(timeout_sec=min(step_sec, remaining))


def wait_for(executor, predicate, what, timeout_sec=DEFAULT_TIMEOUT_SEC):
    """Spin until ``predicate()``; fail the test with ``what`` in the message on timeout."""
    if not spin_until(executor, predicate, timeout_sec):
        raise AssertionError(f'timed out after {timeout_sec} s waiting for {what}')


def wait_for_future(executor, future, what='a future', timeout_sec=DEFAULT_TIMEOUT_SEC):
    """Spin until ``future`` is done and return its result (re-raises its exception)."""
    wait_for(executor, future.done, what, timeout_sec)
    return future.result()


def call_service(executor, client, request=None, timeout_sec=DEFAULT_TIMEOUT_SEC):
    """
    Call a service through ``client`` without blocking the executor and return the response.

    Waits for the service to appear first (spinning, so nodes on the same executor run).
    ``request`` defaults to an empty request of the client's type.
    """
    wait_for(executor, lambda: client.service_is_ready(),
             f'service {client.srv_name}', timeout_sec)
    if request is None:
        request = client.srv_type.Request()
    future = client.call_async(request)
    response = wait_for_future(executor, future, f'the answer of {client.srv_name}', timeout_sec)
    if response is None:
        raise AssertionError(f'service {client.srv_name} returned no response')
    return response


def wait_for_subscribers(executor, publisher, count=1, timeout_sec=DEFAULT_TIMEOUT_SEC):
    """Spin until ``publisher`` has at least ``count`` matched subscriptions."""
    wait_for(executor, lambda: publisher.get_subscription_count() >= count,
             f'{count} subscriber(s) on {publisher.topic_name}', timeout_sec)


def wait_for_publishers(executor, node, topic, count=1, timeout_sec=DEFAULT_TIMEOUT_SEC):
    """Spin until ``topic`` (fully qualified or relative to ``node``) has ``count`` publishers."""
    wait_for(executor, lambda: node.count_publishers(topic) >= count,
             f'{count} publisher(s) on {topic}', timeout_sec)


class MessageCollector:
    """
    Subscribe to a topic and keep every message received, in order.

    ``collector = MessageCollector(node, Image, 'image_raw', qos=10)``; then
    ``collector.wait(executor, count=1)`` returns the messages once ``count`` have arrived.
    """

    def __init__(self, node, msg_type, topic, qos=10):
        self.messages = []
        self.topic = topic
        self.subscription = node.create_subscription(msg_type, topic, self.messages.append, qos)

    def wait(self, executor, count=1, timeout_sec=DEFAULT_TIMEOUT_SEC):
        """Spin until ``count`` messages have arrived and return the list of all of them."""
        wait_for(executor, lambda: len(self.messages) >= count,
                 f'{count} message(s) on {self.topic} (got {len(self.messages)})', timeout_sec)
        return self.messages

    @property
    def last(self):
        """The newest message, or None."""
        return self.messages[-1] if self.messages else None


OUTPUT_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
"""QoS of a subscriber to the decode node's per-frame outputs (~/points, ~/stats)."""


@contextmanager
def decoder_on(context, executor, folder, parameters, helper_name):
    """
    A DecodeNode on ``folder``'s truth.yaml and white.png (and ``parameters``), spinning, with
    a helper node ``helper_name`` on ``executor``: yields (node, ~/points collector, ~/stats
    collector, image_raw publisher the node subscribes to); both nodes gone on exit.
    """
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Image, PointCloud2
    from std_msgs.msg import String

    from lf_mpc_calib.ros.decode_node import DecodeNode
    from ros.background import spinning
    helper = rclpy.create_node(helper_name, context=context)
    executor.add_node(helper)
    try:
        node = DecodeNode(context=context, parameter_overrides=list(parameters) + [
            Parameter('calibration_file', value=str(folder / 'truth.yaml')),
            Parameter('white_image_file', value=str(folder / 'white.png'))])
        points = MessageCollector(helper, PointCloud2, '/lf_decoder/points', OUTPUT_QOS)
        stats = MessageCollector(helper, String, '/lf_decoder/stats', OUTPUT_QOS)
        pub = helper.create_publisher(Image, 'image_raw', 10)
        with spinning(context, node):
            wait_for_subscribers(executor, pub)
            yield node, points, stats, pub
    finally:
        executor.remove_node(helper)
        helper.destroy_node()
