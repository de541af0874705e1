"""
The robot's pose (base -> tool) at a frame's stamp, from TF.

:func:`make_robot_pose_source` gives a source with ``lookup(stamp_ns)`` -> (rotation vector
(3,), translation (3,)) T_base_tool that raises InvalidInputError naming the frames and figures
when the transform is missing, its nearest state is more than ``max_age_s`` from the frame, or
it changes within ``window_s`` of the frame (the arm is moving). Through ``tf2_ros`` (Buffer +
TransformListener) when it imports, else through :mod:`lf_mpc_calib.ros.tf_listener` (the venv).
Both wait up to ``timeout_s`` for the transform at the frame's stamp to arrive (TF and images
travel on different topics).
"""

import numpy as np

from lf_mpc_calib.errors import InvalidInputError


class _VenvSource:
    """Through :class:`lf_mpc_calib.ros.tf_listener.TfListener`."""

    def __init__(self, node, base, tool, *, max_age_s, window_s, timeout_s):
        from lf_mpc_calib.ros.tf_listener import TfListener
        self.base, self.tool = base, tool
        self.max_age_s, self.window_s, self.timeout_s = max_age_s, window_s, timeout_s
        self.listener = TfListener(node)

    def lookup(self, stamp_ns):
        """T_base_tool (w, t) at ``stamp_ns`` (module docstring)."""
        buffer, lock = self.listener.buffer, self.listener.lock
        with lock:
            lock.wait_for(lambda: buffer.newest_stamp_ns() >= stamp_ns, self.timeout_s)
            pose = buffer.lookup(self.base, self.tool, stamp_ns, max_age_s=self.max_age_s,
                                 window_s=self.window_s)
        return check_plausible(self.base, self.tool, pose)


#: fractions of the motion window at which the tf2 path looks for the state before the frame
_WINDOW_PROBES = (1.0, 0.75, 0.5, 0.25, 0.125)


class _Tf2Source:
    """Through tf2_ros (a ROS install); the motion check compares the earliest state within
    ``window_s`` before the frame (of those at _WINDOW_PROBES) with the state at the frame
    (test/ros/test_robot_pose_tf2.py checks it against a stand-in of the tf2_ros API)."""

    def __init__(self, node, base, tool, *, max_age_s, window_s, timeout_s):
        import tf2_ros
        self.base, self.tool = base, tool
        self.max_age_s, self.window_s, self.timeout_s = max_age_s, window_s, timeout_s
        self.buffer = tf2_ros.Buffer()
        self.listener = tf2_ros.TransformListener(self.buffer, node)
        self._errors = (tf2_ros.LookupException, tf2_ros.ConnectivityException,
                        tf2_ros.ExtrapolationException)

    def _at(self, stamp_ns, timeout_s):
        from rclpy.duration import Duration
        from rclpy.time import Time
        from lf_mpc_calib.ros.messages import rotation_vector_from_quaternion
        ts = self.buffer.lookup_transform(self.base, self.tool, Time(nanoseconds=int(stamp_ns)),
                                          timeout=Duration(seconds=timeout_s))
        q, v = ts.transform.rotation, ts.transform.translation
        return (rotation_vector_from_quaternion([q.x, q.y, q.z, q.w]),
                np.array([v.x, v.y, v.z]))

    def lookup(self, stamp_ns):
        """T_base_tool (w, t) at ``stamp_ns`` (module docstring)."""
        from rclpy.time import Time
        try:
            pose = self._at(stamp_ns, self.timeout_s)
        except self._errors as exc:
            raise InvalidInputError(
                f'no transform {self.base} -> {self.tool} at the frame: {exc}; the robot state '
                f'is missing or stale (limit {self.max_age_s:g} s)') from None
        check_plausible(self.base, self.tool, pose)
        newest = self.buffer.lookup_transform(self.base, self.tool, Time())
        gap = abs(Time.from_msg(newest.header.stamp).nanoseconds - stamp_ns) * 1e-9
        if gap > self.max_age_s and Time.from_msg(newest.header.stamp).nanoseconds < stamp_ns:
            raise InvalidInputError(
                f'transform {self.base} -> {self.tool}: the newest is {gap:.3f} s older than '
                f'the frame (limit {self.max_age_s:g} s); the robot state is stale')
        # the earliest state within the window: tf2 cannot extrapolate, so with less history
        # than the window the state window_s before the frame does not exist (skipping the
        # check then let a moving arm through)
        for fraction in _WINDOW_PROBES:
            try:
                before = self._at(stamp_ns - fraction * self.window_s * 1e9, 0.0)
            except self._errors:
                continue
            check_at_rest(self.base, self.tool, before, pose, self.window_s)
            break
        return pose


def check_plausible(base, tool, pose):
    """``pose`` (w (3,), t (3,)) T_base_tool, or InvalidInputError when it is not finite or
    reaches beyond an arm's (MAX_REACH_M, the limit robot pose files have: metres, not mm)."""
    from lf_mpc_calib.io.robot_poses import MAX_REACH_M
    w, t = (np.asarray(p, dtype=float) for p in pose)
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(t))):
        raise InvalidInputError(f'transform {base} -> {tool} is not finite ({w}, {t})')
    reach = float(np.abs(t).max())
    if reach > MAX_REACH_M:
        raise InvalidInputError(
            f'transform {base} -> {tool} puts the tool {reach:.3g} m from the base; expected '
            f'within {MAX_REACH_M:g} m (metres, not millimetres): a wrong frame or unit')
    return w, t


def check_at_rest(base, tool, before, now, window_s, *, rot_tol_deg=0.05, trans_tol_m=2e-4):
    """InvalidInputError when T_base_tool moved between ``before`` and ``now`` (w, t)."""
    from scipy.spatial.transform import Rotation
    dr = np.degrees(np.linalg.norm((Rotation.from_rotvec(now[0])
                                    * Rotation.from_rotvec(before[0]).inv()).as_rotvec()))
    dt = float(np.linalg.norm(np.asarray(now[1]) - np.asarray(before[1])))
    if dr > rot_tol_deg or dt > trans_tol_m:
        raise InvalidInputError(
            f'transform {base} -> {tool} changes by {1e3 * dt:.2f} mm / {dr:.3f} deg within '
            f'{window_s:.3f} s of the frame (limits {1e3 * trans_tol_m:g} mm / {rot_tol_deg:g} '
            'deg): the arm is moving; capture at rest')


def make_robot_pose_source(node, base, tool, *, max_age_s=0.1, window_s=0.2, timeout_s=0.5,
                           prefer_tf2=True):
    """A robot pose source of ``node`` (module docstring); ``.kind`` says which."""
    if prefer_tf2:
        try:
            source = _Tf2Source(node, base, tool, max_age_s=max_age_s, window_s=window_s,
                                timeout_s=timeout_s)
            source.kind = 'tf2_ros'
            return source
        except ImportError:
            pass
    source = _VenvSource(node, base, tool, max_age_s=max_age_s, window_s=window_s,
                         timeout_s=timeout_s)
    source.kind = 'lf_mpc_calib.ros.tf_listener'
    return source
