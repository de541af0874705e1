"""
The tf2_ros path of lf_mpc_calib.ros.robot_pose (taken in a ROS install) against a STAND-IN of
the tf2_ros API, not tf2_ros itself: tf2_ros cannot be installed in the venv. The stand-in
implements exactly the surface the robot pose source uses, with tf2's documented semantics:
``Buffer(cache_time=None, node=None)``, ``TransformListener(buffer, node)``,
``buffer.lookup_transform(target, source, time, timeout=Duration())`` returning
T_target_source as a geometry_msgs/TransformStamped (interpolated between stamps; static
transforms at any time; ``Time()`` = the latest time common to the chain) and raising
``LookupException`` (unknown frame), ``ConnectivityException`` (frames in different trees) and
``ExtrapolationException`` (a time outside a link's stamps). It is injected as
``sys.modules['tf2_ros']``; the refusals (missing, not connected, stale, moving) must map to the
source's InvalidInputErrors.
"""

import re
import sys
import types

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

pytest.importorskip('rclpy')

from lf_mpc_calib.camera import transforms  # noqa: E402
from lf_mpc_calib.errors import InvalidInputError  # noqa: E402
from lf_mpc_calib.ros.messages import transform_stamped  # noqa: E402
from lf_mpc_calib.ros.robot_pose import make_robot_pose_source  # noqa: E402

S = 1_000_000_000
FRAME = 100 * S                                   # the image's stamp


class _TransformException(Exception):
    pass


class _Buffer:
    """Stand-in of tf2_ros.Buffer: {child: (parent, static, [(stamp ns, w, t)])}."""

    def __init__(self, cache_time=None, node=None):
        self.links = {}
        self.timeouts = []

    def set_transform_static(self, msg, authority):
        self.set_transform(msg, authority, static=True)

    def set_transform(self, msg, authority, static=False):
        r, v = msg.transform.rotation, msg.transform.translation
        w = Rotation.from_quat([r.x, r.y, r.z, r.w]).as_rotvec()
        stamp = msg.header.stamp.sec * S + msg.header.stamp.nanosec
        parent, _, states = self.links.setdefault(msg.child_frame_id,
                                                  (msg.header.frame_id, static, []))
        states.append((stamp, w, np.array([v.x, v.y, v.z])))
        states.sort(key=lambda s: s[0])

    def _to_root(self, frame, argument):
        if frame not in self.links and frame not in {p for p, _, _ in self.links.values()}:
            raise _MODULE.LookupException(
                f'"{frame}" passed to lookupTransform argument {argument} does not exist.')
        chain = []
        while frame in self.links:
            chain.append(frame)
            frame = self.links[frame][0]
        return chain, frame

    def _state(self, child, stamp):
        _, static, states = self.links[child]
        if static:
            return states[-1][1:]
        stamps = np.array([s[0] for s in states])
        if stamp < stamps[0] or stamp > stamps[-1]:
            raise _MODULE.ExtrapolationException(
                'Lookup would require extrapolation into the '
                f'{"past" if stamp < stamps[0] else "future"}. Requested time '
                f'{stamp * 1e-9:.6f} but the data for {child} spans {stamps[0] * 1e-9:.6f} to '
                f'{stamps[-1] * 1e-9:.6f}')
        k = int(np.searchsorted(stamps, stamp))
        if stamps[k] == stamp or len(stamps) == 1:
            return states[k][1:]
        (s0, w0, t0), (s1, w1, t1) = states[k - 1], states[k]
        a = (stamp - s0) / (s1 - s0)
        rot = Slerp([0.0, 1.0], Rotation.from_rotvec([w0, w1]))([a])[0]
        return rot.as_rotvec(), (1 - a) * t0 + a * t1

    def lookup_transform(self, target_frame, source_frame, time, timeout=None):
        self.timeouts.append(None if timeout is None else timeout.nanoseconds * 1e-9)
        src, root_s = self._to_root(source_frame, 'source_frame')
        tgt, root_t = self._to_root(target_frame, 'target_frame')
        if root_s != root_t:
            raise _MODULE.ConnectivityException(
                f'Could not find a connection between {target_frame!r} and {source_frame!r} '
                'because they are not part of the same tree.')
        stamp = time.nanoseconds
        dynamic = [c for c in src + tgt if not self.links[c][1]]
        if stamp == 0 and dynamic:                 # Time(): the latest common time
            stamp = min(self.links[c][2][-1][0] for c in dynamic)

        def root_from(chain):
            pose = (np.zeros(3), np.zeros(3))
            for child in chain:                    # child -> parent ... -> root
                pose = transforms.compose(self._state(child, stamp), pose)
            return pose

        w, t = transforms.compose(transforms.invert(root_from(tgt)), root_from(src))
        from rclpy.time import Time
        return transform_stamped(w, t, parent=target_frame, child=source_frame,
                                 stamp=Time(nanoseconds=int(stamp)).to_msg())


class _TransformListener:
    def __init__(self, buffer, node, spin_thread=False):
        self.buffer, self.node = buffer, node


_MODULE = types.ModuleType('tf2_ros')
_MODULE.__doc__ = 'stand-in of the tf2_ros API (test/ros/test_robot_pose_tf2.py)'
_MODULE.Buffer = _Buffer
_MODULE.TransformListener = _TransformListener
_MODULE.TransformException = _TransformException
for _name in ('LookupException', 'ConnectivityException', 'ExtrapolationException'):
    setattr(_MODULE, _name, type(_name, (_TransformException,), {}))


@pytest.fixture
def source(monkeypatch):
    """A robot pose source base_link -> tool0 built on the stand-in tf2_ros."""
    monkeypatch.setitem(sys.modules, 'tf2_ros', _MODULE)
    src = make_robot_pose_source(object(), 'base_link', 'tool0', max_age_s=0.1,
                                 window_s=0.2, timeout_s=0.3)
    assert src.kind == 'tf2_ros' and isinstance(src.buffer, _Buffer)
    assert src.listener.buffer is src.buffer
    return src


def _put(src, parent, child, w, t, at_s, static=False):
    from rclpy.time import Time
    msg = transform_stamped(w, t, parent=parent, child=child,
                            stamp=Time(nanoseconds=int(FRAME + at_s * S)).to_msg())
    (src.buffer.set_transform_static if static else src.buffer.set_transform)(msg, 'test')


LINK = ([0.0, 0.0, 0.3], [0.0, 0.0, 0.5])          # base_link -> link1, static
TOOL = ([0.1, 0.2, 0.0], [0.3, 0.0, 0.1])          # link1 -> tool0 at rest


def test_tf2_path_composes_the_chain_at_the_frame(source):
    _put(source, 'base_link', 'link1', *LINK, -5.0, static=True)
    for k in range(-10, 3):                          # at rest, 10 Hz around the frame
        _put(source, 'link1', 'tool0', *TOOL, 0.1 * k)
    w, t = source.lookup(FRAME)
    ref = transforms.compose(LINK, TOOL)
    np.testing.assert_allclose(w, ref[0], atol=1e-9)
    np.testing.assert_allclose(t, ref[1], atol=1e-12)
    assert source.buffer.timeouts[0] == pytest.approx(0.3)   # waits at the frame's stamp


def test_tf2_path_refuses_missing_and_unconnected_frames(source):
    with pytest.raises(InvalidInputError, match=r'no transform base_link -> tool0 at the frame: '
                       r'"tool0" passed to lookupTransform .* does not exist.*missing or stale'):
        source.lookup(FRAME)
    _put(source, 'base_link', 'link1', *LINK, 0.0, static=True)
    _put(source, 'world', 'tool0', *TOOL, 0.0)                # tool0 in another tree
    with pytest.raises(InvalidInputError, match='not part of the same tree'):
        source.lookup(FRAME)


def test_tf2_path_refuses_a_stale_robot_state(source):
    _put(source, 'base_link', 'tool0', *TOOL, -1.0)           # the newest is 1 s old
    with pytest.raises(InvalidInputError, match=r'extrapolation into the future.*the robot '
                       r'state is missing or stale \(limit 0.1 s\)'):
        source.lookup(FRAME)


@pytest.mark.parametrize('history_s', [1.0, 0.1])
def test_tf2_path_refuses_a_moving_arm(source, history_s):
    # the tool turns by 1.15 deg between the last state before the frame and the frame's;
    # with only 0.1 s of history (less than the 0.2 s window) the check still sees it
    n = int(round(history_s / 0.05))
    for k in range(-n, 0):
        _put(source, 'base_link', 'tool0', *TOOL, 0.05 * k)
    moved = (np.add(TOOL[0], [0.0, 0.0, 0.02]), TOOL[1])
    _put(source, 'base_link', 'tool0', *moved, 0.0)
    turned = transforms.difference(moved, TOOL)[0][0]
    with pytest.raises(InvalidInputError, match=rf'0.00 mm / {turned:.3f} deg within 0.200 s '
                       r'of the frame .*the arm is moving'):
        source.lookup(FRAME)


def test_tf2_path_accepts_an_arm_at_rest_with_history_shorter_than_the_window(source):
    for k in range(-2, 1):                                    # 0.1 s of history, at rest
        _put(source, 'base_link', 'tool0', *TOOL, 0.05 * k)
    w, t = source.lookup(FRAME)
    np.testing.assert_allclose(t, TOOL[1], atol=1e-12)


@pytest.mark.parametrize('far', [1e300, 2000.0])
def test_a_transform_beyond_an_arm_s_reach_is_refused_with_its_figure(source, far):
    for k in range(-2, 1):
        _put(source, 'base_link', 'tool0', TOOL[0], [0.3, far, 0.1], 0.05 * k)
    with pytest.raises(InvalidInputError, match=re.escape(f'{far:.3g} m from the base')):
        source.lookup(FRAME)


def test_a_transform_that_is_not_finite_is_refused():
    from lf_mpc_calib.ros.robot_pose import check_plausible
    with pytest.raises(InvalidInputError, match='base -> tool is not finite'):
        check_plausible('base', 'tool', (np.zeros(3), [0.0, np.inf, 0.0]))
