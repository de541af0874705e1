"""
The smallest correct TF listener, for when ``tf2_ros`` cannot be imported (the venv).

:class:`TransformBuffer` holds the static transforms and a short history of the dynamic ones
(per child frame, its parent and (w, t, stamp)), and answers ``lookup(target, source, stamp)``
with T_target_source by composing the chain from ``source`` up to ``target``, which must be an
ancestor of ``source`` (a robot's tool under its base). It refuses, naming frames and numbers,
when a frame is unknown, ``target`` is not up the chain of ``source``, a dynamic link's nearest
transform is further than ``max_age`` from the stamp, or a dynamic link changed within
``window`` of the stamp (the arm was moving).

:class:`TfListener` feeds a buffer from /tf and /tf_static (tf2_msgs/TFMessage; /tf_static
TRANSIENT_LOCAL so latched transforms arrive). The buffer itself imports no ROS.

The calibration node uses it through :mod:`lf_mpc_calib.ros.robot_pose` where tf2_ros is
missing.
"""

from collections import deque

import numpy as np
from scipy.spatial.transform import Rotation

from lf_mpc_calib.camera import transforms
from lf_mpc_calib.errors import InvalidInputError

HISTORY = 50


class TransformBuffer:
    """Static transforms and the recent dynamic ones, by child frame (times in nanoseconds)."""

    def __init__(self, history=HISTORY):
        self._static = {}                       # child -> (parent, w, t)
        self._dynamic = {}                      # child -> (parent, deque of (stamp, w, t))
        self._history = int(history)

    def set_transform(self, parent, child, rotation_vector, translation, stamp_ns, *,
                      static=False):
        """Add T_parent_child (rotation vector (3,), translation (3,)) at ``stamp_ns``."""
        w = np.asarray(rotation_vector, float).reshape(3)
        t = np.asarray(translation, float).reshape(3)
        if not (np.all(np.isfinite(w)) and np.all(np.isfinite(t))):
            raise InvalidInputError(f'transform {parent} -> {child} is not finite')
        if static:
            self._static[child] = (parent, w, t)
            return
        old = self._dynamic.get(child)
        if old is None or old[0] != parent:
            old = (parent, deque(maxlen=self._history))
            self._dynamic[child] = old
        old[1].append((int(stamp_ns), w, t))

    def newest_stamp_ns(self):
        """The newest stamp of any dynamic transform (-1 without one)."""
        return max((h[-1][0] for _, h in self._dynamic.values() if h), default=-1)

    def frames(self):
        """Every frame named so far (sorted)."""
        names = set(self._static) | set(self._dynamic)
        names |= {v[0] for v in self._static.values()} | {v[0] for v in self._dynamic.values()}
        return sorted(names)

    def _link(self, child, stamp_ns, max_age_ns, window_ns, rot_tol, trans_tol):
        if child in self._static:
            parent, w, t = self._static[child]
            return parent, w, t
        parent, hist = self._dynamic[child]
        stamps = np.array([h[0] for h in hist])
        k = int(np.argmin(np.abs(stamps - stamp_ns)))
        age = abs(int(stamps[k]) - stamp_ns) * 1e-9
        if age * 1e9 > max_age_ns:
            raise InvalidInputError(
                f'transform {parent} -> {child}: the nearest is {age:.3f} s from the frame '
                f'(limit {max_age_ns * 1e-9:.3f} s); the robot state is missing or stale')
        near = [h for h in hist if abs(h[0] - stamp_ns) <= window_ns]
        for s, w, t in near:
            dr = np.degrees(np.linalg.norm(
                (Rotation.from_rotvec(w) * Rotation.from_rotvec(hist[k][1]).inv()).as_rotvec()))
            dt = float(np.linalg.norm(t - hist[k][2]))
            if dr > rot_tol or dt > trans_tol:
                raise InvalidInputError(
                    f'transform {parent} -> {child} changes by {1e3 * dt:.2f} mm / {dr:.3f} deg '
                    f'within {window_ns * 1e-9:.3f} s of the frame (limits {1e3 * trans_tol:g} '
                    f'mm / {rot_tol:g} deg): the arm is moving; capture at rest')
        return parent, hist[k][1], hist[k][2]

    def lookup(self, target, source, stamp_ns, *, max_age_s=0.1, window_s=0.2,
               motion_tol_deg=0.05, motion_tol_m=2e-4):
        """
        T_target_source (rotation vector (3,), translation (3,)) at ``stamp_ns``.

        ``target`` must be ``source`` or one of its ancestors. Raises InvalidInputError naming
        the frames and figures (module docstring).
        """
        known = self.frames()
        for name, what in ((target, 'target'), (source, 'source')):
            if name not in known:
                raise InvalidInputError(
                    f'{what} frame {name!r} is unknown to TF; known frames: {known}')
        chain = []
        frame = source
        seen = {source}
        while frame != target:
            if frame not in self._static and frame not in self._dynamic:
                raise InvalidInputError(
                    f'frame {source!r} is not below {target!r} in the TF tree (its chain ends '
                    f'at {frame!r}: {" <- ".join([frame] + [c for c, _ in reversed(chain)])})')
            parent, w, t = self._link(frame, int(stamp_ns), max_age_s * 1e9, window_s * 1e9,
                                      motion_tol_deg, motion_tol_m)
            chain.append((frame, (w, t)))
            if parent in seen:
                raise InvalidInputError(f'the TF tree has a loop through {parent!r}')
            seen.add(parent)
            frame = parent
        w, t = np.zeros(3), np.zeros(3)
        for _, link in chain:                   # source up to target: T = L_n ... L_1
            w, t = transforms.compose(link, (w, t))
        return w, t


class TfListener:
    """Feeds a TransformBuffer from /tf and /tf_static of ``node`` (rclpy). ``lock`` (a
    threading.Condition) is held while a message is added and notified after: hold it to read
    the buffer from another thread."""

    def __init__(self, node, buffer=None):
        import threading
        self.lock = threading.Condition()
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from tf2_msgs.msg import TFMessage
        self.buffer = TransformBuffer() if buffer is None else buffer
        static_qos = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                reliability=ReliabilityPolicy.RELIABLE)
        self._subs = [
            node.create_subscription(TFMessage, '/tf', lambda m: self._on(m, False), 100),
            node.create_subscription(TFMessage, '/tf_static', lambda m: self._on(m, True),
                                     static_qos)]

    def _on(self, msg, static):
        with self.lock:
            self._add(msg, static)
            self.lock.notify_all()

    def _add(self, msg, static):
        for ts in msg.transforms:
            q = ts.transform.rotation
            v = ts.transform.translation
            try:
                w = Rotation.from_quat([q.x, q.y, q.z, q.w]).as_rotvec()
            except ValueError:
                continue                        # a zero quaternion: not a transform
            stamp = ts.header.stamp.sec * 1_000_000_000 + ts.header.stamp.nanosec
            try:
                self.buffer.set_transform(ts.header.frame_id, ts.child_frame_id, w,
                                          [v.x, v.y, v.z], stamp, static=static)
            except InvalidInputError:
                continue
