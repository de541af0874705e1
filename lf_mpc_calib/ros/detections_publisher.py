"""
``~/detections`` of the calibration node: a picture of what it sees (sensor_msgs/Image, rgb8).

A thin adapter over :mod:`lf_mpc_calib.pipeline.live_view`. While the topic has a subscriber
(``get_subscription_count``; nothing is computed or published without one) a timer at
``detections_rate`` Hz draws the newest valid frame: its central view (focused: the image
rendered from the micro-images) with the board found by the quick look, every captured pose's
outline and the capture guidance (:func:`lf_mpc_calib.report.detections_overlay.
guidance_lines` of ``~/status``). Each accepted capture draws the corners the capture itself
found (no second detection) into ``session.pictures`` (saved by ``~/save`` as
``detections_NNN.png``) and publishes it, shown for :data:`HOLD_S` s before the live picture
takes over.

It never slows a capture: no live picture is started while ``~/capture`` runs or the session
is busy (its lock is only tried), and a live picture's own CPU time is spent at most every
other period (a frame that takes longer than half the period lowers the rate).
"""

import contextlib
import functools
import threading
import time

from lf_mpc_calib.ros.guard import describe, guarded_callback

HOLD_S = 1.0
"""Seconds a capture's picture stays on ~/detections before the live picture replaces it."""


class DetectionsPublisher:
    """
    ``~/detections`` of ``node`` (the calibration node: its ``session`` and ``optical_frame``);
    lock: the lock serialising the session; latest_frame(): the newest valid frame (2-D) or
    None; lines(): the guidance lines; rate_hz: the live rate; causes: the node's CauseLog;
    suggested(): the suggested board's corners (C, 2) in the central view, or None.
    """

    def __init__(self, node, lock, latest_frame, lines, rate_hz, causes, suggested=None):
        from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
        from rclpy.qos import QoSProfile
        from sensor_msgs.msg import Image
        self.node = node
        self.lock = lock
        self.latest_frame = latest_frame
        self.lines = lines
        self.suggested = suggested
        self.causes = causes
        self.published = 0                      # pictures published (live and captures)
        self.live_cost_s = 0.0                  # CPU s (this thread) of the last live picture
        self._capturing = 0
        self._count_lock = threading.Lock()
        self._hold_until = 0.0
        self._next = 0.0
        self._last_frame = None
        self.pub = node.create_publisher(Image, '~/detections', QoSProfile(depth=1))
        tick = guarded_callback(node, 'detections', self._tick)
        node.create_timer(1.0 / rate_hz, lambda: tick(None),
                          callback_group=MutuallyExclusiveCallbackGroup())

    @property
    def subscribed(self):
        """True while ~/detections has a subscriber."""
        return self.pub.get_subscription_count() > 0

    def while_capturing(self, handler):
        """``handler(request, response)`` (the capture service) during which no live picture
        starts."""
        @functools.wraps(handler)
        def wrapped(request, response):
            with self._capture():
                return handler(request, response)
        return wrapped

    @contextlib.contextmanager
    def _capture(self):
        with self._count_lock:
            self._capturing += 1
        try:
            yield
        finally:
            with self._count_lock:
                self._capturing -= 1

    def captured(self, session, pose):
        """After an accepted capture: draw pose ``pose`` into ``session.pictures``, publish it
        when subscribed. A failure is logged, never raised: the capture is kept either way."""
        try:
            self._captured(session, pose)
        except Exception as exc:  # noqa: B902 - a picture must not fail a kept capture
            self.causes.error('detections', f'no picture of pose {pose}: {describe(exc)}')

    def _captured(self, session, pose):
        from lf_mpc_calib.pipeline.live_view import capture_picture
        with self.lock:
            if pose >= session.num_poses:       # reset meanwhile
                return
            picture = capture_picture(session, pose, self.lines())
            if picture is None:
                return
            session.pictures[pose] = picture
        if self.subscribed:
            self._hold_until = time.monotonic() + HOLD_S
            self._publish(picture)

    def _publish(self, picture):
        from lf_mpc_calib.ros.image_conversion import array_to_image
        msg = array_to_image(picture, 'rgb8')
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = self.node.optical_frame
        self.pub.publish(msg)
        self.published += 1

    def _tick(self, _=None):
        """Timer: the live picture of the newest frame, when subscribed and not capturing."""
        from lf_mpc_calib.pipeline.live_view import live_picture
        now = time.monotonic()
        if not self.subscribed or self._capturing or now < max(self._next, self._hold_until):
            return
        frame = self.latest_frame()
        if frame is None or frame is self._last_frame:
            return
        if not self.lock.acquire(blocking=False):   # a capture, calibration or reset runs
            return
        try:
            session = self.node.session
            if not session.ready:
                return
            start = time.thread_time()
            try:
                picture = live_picture(session, frame, self.lines(),
                                       self.suggested() if self.suggested else None)
            except Exception as exc:  # noqa: B902 - logged once per cause, not per frame
                self.causes.error('detections', f'no live picture: {describe(exc)}')
                return
            finally:
                self._last_frame = frame
            self.causes.clear('detections')
            self.live_cost_s = time.thread_time() - start
        finally:
            self.lock.release()
        self._next = now + 2.0 * self.live_cost_s
        self._publish(picture)
