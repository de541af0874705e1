"""
Shared pytest setup.

Every pytest process gets its own ROS_DOMAIN_ID (1..100, from the pid, unless
LF_TEST_ROS_DOMAIN_ID is set) and discovery limited to this host, before any test imports rclpy,
so parallel test runs and other ROS processes on the machine do not see each other.
"""

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = REPO_ROOT.parent / 'shared'


def _test_domain_id():
    forced = os.environ.get('LF_TEST_ROS_DOMAIN_ID')
    return int(forced) if forced else 1 + os.getpid() % 100


os.environ['ROS_DOMAIN_ID'] = str(_test_domain_id())
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
os.environ.pop('ROS_STATIC_PEERS', None)
os.environ.pop('ROS_LOCALHOST_ONLY', None)


@pytest.fixture(scope='session')
def repo_root():
    """The repository root (where package.xml is)."""
    return REPO_ROOT


@pytest.fixture(scope='session')
def shared_dir():
    """``../shared`` (test data, paper); tests that need it skip when it is absent."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f'{SHARED_DIR} is not there')
    return SHARED_DIR
