"""
Fixtures for node tests with real rclpy over DDS.

- ``ros_context`` (module scope): a private, initialised rclpy Context on this process's unique
  ROS_DOMAIN_ID; shut down after the module.
- ``ros_executor`` (module scope): a SingleThreadedExecutor in that context. Add the nodes
  under test to it (``ros_executor.add_node(node)``) and remove / destroy them when done.
- ``ros_node`` (function scope): a plain helper node for the test's own publishers, clients
  and subscribers, already added to ``ros_executor``.

Tests in this folder are skipped when rclpy is not installed (run them through scripts/test.sh).
"""

import itertools

import pytest

rclpy = pytest.importorskip('rclpy')

from ros.rclpy_helpers import make_executor, ros_context as _ros_context  # noqa: E402

_counter = itertools.count()


@pytest.fixture(scope='module')
def ros_context():
    """Private rclpy context for one test module."""
    with _ros_context() as context:
        yield context


@pytest.fixture(scope='module')
def ros_executor(ros_context):
    """Executor in ``ros_context``; nodes still attached at the end are destroyed."""
    executor = make_executor(ros_context)
    yield executor
    for node in list(executor.get_nodes()):
        executor.remove_node(node)
        node.destroy_node()
    executor.shutdown()


@pytest.fixture
def ros_node(ros_context, ros_executor):
    """A helper node named ``test_helper_<n>``, added to ``ros_executor``."""
    node = rclpy.create_node(f'test_helper_{next(_counter)}', context=ros_context)
    ros_executor.add_node(node)
    yield node
    ros_executor.remove_node(node)
    node.destroy_node()
