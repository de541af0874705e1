"""The Fast DDS profile for camera-size frames (lf_mpc_calib.ros.transport) and who gets it."""

import os
import xml.etree.ElementTree as ET

import pytest

from lf_mpc_calib.ros import defaults as D
from lf_mpc_calib.ros.transport import PROFILE, use_large_frame_transport, USER_SETTINGS

NS = {'dds': 'http://www.eprosima.com'}
R12_MONO16_BYTES = 4080 * 3068 * 2


def test_large_frame_transport_is_set_where_nothing_was_chosen():
    env = {}
    assert use_large_frame_transport(env) == PROFILE
    assert env == {'FASTDDS_DEFAULT_PROFILES_FILE': PROFILE}
    env = {'RMW_IMPLEMENTATION': 'rmw_fastrtps_cpp'}
    assert use_large_frame_transport(env) == PROFILE


@pytest.mark.parametrize('name', USER_SETTINGS)
def test_large_frame_transport_leaves_the_users_choice(name):
    env = {name: 'UDPv4' if name.endswith('TRANSPORTS') else '/etc/mine.xml'}
    before = dict(env)
    assert use_large_frame_transport(env) is None
    assert env == before


def test_large_frame_transport_leaves_another_rmw_alone():
    env = {'RMW_IMPLEMENTATION': 'rmw_cyclonedds_cpp'}
    assert use_large_frame_transport(env) is None
    assert 'FASTDDS_DEFAULT_PROFILES_FILE' not in env


def test_the_profile_sends_an_r12_frame_as_one_shared_memory_sample():
    root = ET.parse(PROFILE).getroot()
    shm = root.find('.//dds:transport_descriptor', NS)
    assert shm.find('dds:type', NS).text == 'SHM'
    # a mono16 R12 frame (25 MB) in one message, two of them in the segment
    assert int(shm.find('dds:maxMessageSize', NS).text) >= R12_MONO16_BYTES
    assert int(shm.find('dds:segment_size', NS).text) >= 2 * R12_MONO16_BYTES
    participant = root.find('.//dds:participant', NS)
    assert participant.get('is_default_profile') == 'true'
    rtps = participant.find('dds:rtps', NS)
    assert rtps.find('dds:userTransports/dds:transport_id', NS).text == \
        shm.find('dds:transport_id', NS).text
    assert rtps.find('dds:useBuiltinTransports', NS).text == 'true'   # UDP to other hosts


def test_run_node_sets_the_profile_before_rclpy_init(monkeypatch):
    import rclpy
    for name in USER_SETTINGS + ('RMW_IMPLEMENTATION',):
        monkeypatch.setenv(name, '')    # empty: not chosen; undone (removed) after the test
    seen = []

    def init(**kwargs):
        seen.append(os.environ.get('FASTDDS_DEFAULT_PROFILES_FILE'))
        raise KeyboardInterrupt     # ends run_node as ctrl-c does, before any node

    monkeypatch.setattr(rclpy, 'init', init)
    monkeypatch.setattr(D, '_stop_node', lambda node, executor, code: code)  # no context
    assert D.run_node(lambda: None) == 0
    assert seen == [PROFILE]
