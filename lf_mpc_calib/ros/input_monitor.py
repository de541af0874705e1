"""
The rate and age of a node's input frames, and what to say when they stop.

A stalled camera (or a best-effort subscription that loses every large frame) must never be
silent: :class:`InputMonitor` counts the frames of one topic, says once on the log (and under
``problems``) when they stop arriving and once when they resume, and warns once when frames
are large enough that best-effort delivery between processes loses them.
"""

import threading
import time

LARGE_FRAME_BYTES = 2_000_000
"""Frames from this size on are lost by best-effort delivery between processes (Fast DDS
fragments them: 4 of 60 one-megapixel frames arrived; R12 frames of 12.5 MB: 2 in 40 s)."""

STALL_MIN_S = 3.0
"""Frames are stalled after max(STALL_MIN_S, STALL_PERIODS / rate) without one."""
STALL_PERIODS = 5.0
FIRST_FRAME_S = 10.0
"""A topic without any frame this long after the start is reported."""


_RELIABLE_ADVICE = ('set the parameter image_reliability to reliable (launch argument '
                    'image_reliability:=reliable; the camera must publish reliably)')


class InputMonitor:
    """
    Rate and age of the frames on ``topic`` of ``node``; problems go to ``causes`` (a
    :class:`lf_mpc_calib.ros.guard.CauseLog`) on channel 'input'. Call :meth:`frame` from the
    subscription callback and :meth:`check` from a timer (about 1 Hz). Thread-safe.
    """

    def __init__(self, node, topic, causes, reliability, clock=time.monotonic):
        self._node, self.topic, self._causes = node, topic, causes
        self._reliability = reliability
        self._clock = clock
        self._lock = threading.Lock()
        self._start = clock()
        self._times = []
        self.frames = 0
        self._warned_large = False

    def frame(self, nbytes):
        """A frame of ``nbytes`` arrived."""
        now = self._clock()
        with self._lock:
            self.frames += 1
            self._times = [t for t in self._times if now - t <= 10.0][-50:] + [now]
            warn_large = (not self._warned_large and nbytes >= LARGE_FRAME_BYTES
                          and self._reliability != 'reliable')
            self._warned_large = self._warned_large or warn_large
        self._causes.clear('input')
        if warn_large:      # nothing wrong yet: said once, and again if the frames stall
            self._node.get_logger().info(
                f'{self.topic}: frames of {nbytes / 1e6:.1f} MB on a best-effort subscription; '
                f'if they stall, {_RELIABLE_ADVICE}')

    def rate_hz(self):
        """Frames per second over the last 10 s (0 with fewer than 2 frames)."""
        with self._lock:
            times = list(self._times)
        return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and \
            times[-1] > times[0] else 0.0

    def age_s(self):
        """Seconds since the last frame (None before the first)."""
        with self._lock:
            return self._clock() - self._times[-1] if self._times else None

    def check(self):
        """Report a stall (logged once per stall; nothing while frames arrive) and another node
        of this node's name and namespace (:meth:`check_name`); returns a problem or None.
        The stall's text does not grow with its age: the age is in :meth:`as_dict`."""
        clash, stall = self.check_name(), self._check_stall()
        return stall or clash

    def check_name(self):
        """Another node with this node's name in its namespace (a second session in the same
        namespace: their services and topics mix): logged once on channel 'namespace' and
        returned, cleared when it is gone."""
        node = self._node
        try:
            me = (node.get_name(), node.get_namespace())
            same = sum(1 for entry in node.get_node_names_and_namespaces()
                       if tuple(entry[:2]) == me)
        except Exception:           # a context shutting down (or no graph): nothing to report
            return None
        if same <= 1:
            self._causes.clear('namespace')
            return None
        full = node.get_fully_qualified_name()
        problem = (f'{same} nodes are named {full} in this ROS domain: another session runs '
                   'in the same namespace and their services and topics mix; start one with '
                   'another namespace (launch argument namespace:=...) or ROS_DOMAIN_ID')
        self._causes.error('namespace', problem)
        return problem

    def _check_stall(self):
        now = self._clock()
        rate, age = self.rate_hz(), self.age_s()
        if age is None:
            if now - self._start < FIRST_FRAME_S:
                return None
            count = self._node.count_publishers(self.topic)
            problem = (f'no frame on {self._node.resolve_topic_name(self.topic)} in the '
                       f'{FIRST_FRAME_S:.0f} s since the start ({count} publisher(s)'
                       + ('; check the topic name and remappings' if not count else
                          '; if the frames are large, set image_reliability to reliable')
                       + ')')
        else:
            limit = max(STALL_MIN_S, STALL_PERIODS / rate) if rate > 0 else STALL_MIN_S
            if age < limit:
                return None
            problem = (f'frames on {self._node.resolve_topic_name(self.topic)} stopped: none '
                       f'for over {limit:.0f} s (was {rate:.2f} Hz)'
                       + (f'; large frames on a best-effort subscription are often lost '
                          f'between processes: {_RELIABLE_ADVICE}' if self._warned_large else ''))
        self._causes.error('input', problem)      # logged once until it changes
        return problem

    def as_dict(self):
        """{'topic', 'rate_hz', 'last_frame_age_s', 'frames'} for ~/stats and ~/status."""
        age = self.age_s()
        return {'topic': self._node.resolve_topic_name(self.topic),
                'rate_hz': round(self.rate_hz(), 3), 'frames': self.frames,
                'last_frame_age_s': None if age is None else round(age, 2)}
