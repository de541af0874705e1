"""
Run nodes under a MultiThreadedExecutor on a background thread (as ``main()`` does).

Nodes whose service callbacks wait for other callbacks (the calibration node's ``~/capture``
waits for the next frame) need more than the tests' single-threaded executor.
"""

import contextlib
import threading

from rclpy.executors import MultiThreadedExecutor


@contextlib.contextmanager
def spinning(context, *nodes, num_threads=4):
    """Spin ``nodes`` in ``context`` on a background thread; destroys them on exit."""
    executor = MultiThreadedExecutor(num_threads=num_threads, context=context)
    for node in nodes:
        executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield executor
    finally:
        executor.shutdown(timeout_sec=5.0)
        thread.join(timeout=5.0)
        for node in nodes:
            node.destroy_node()
