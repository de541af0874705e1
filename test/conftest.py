"""
Shared pytest setup.

Every pytest process gets its own ROS_DOMAIN_ID (1..100, unless LF_TEST_ROS_DOMAIN_ID is set)
and discovery limited to this host, before any test imports rclpy, so parallel test runs and
other ROS processes on the machine do not see each other. The pytest-xdist workers of one run
(scripts/test.sh runs 2) take consecutive ids from their controller's pid, so they never share
one; a process on its own takes one from its pid; an id another pytest process on the host
holds (a lock file) is passed over for the next free one.
"""

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = REPO_ROOT.parent / 'shared'


def _test_domain_id():
    forced = os.environ.get('LF_TEST_ROS_DOMAIN_ID')
    if forced:
        return int(forced)
    worker = os.environ.get('PYTEST_XDIST_WORKER', '')  # 'gw0', 'gw1', ...
    if worker.startswith('gw') and worker[2:].isdigit():
        count = max(1, int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1')))
        slots = max(1, 100 // count)
        return 1 + (os.getppid() % slots) * count + int(worker[2:]) % count
    return 1 + os.getpid() % 100


_HELD_LOCKS = []


def _claim_domain_id(preferred):
    """``preferred`` (1..100) or the next id no other pytest process on this host holds: an
    exclusive flock on a per-id file in the temp folder, held until this process exits. Two
    test runs at once (two checkouts, a developer beside CI) drew the same id from their pids
    and their nodes answered each other's services."""
    import fcntl
    import tempfile
    for k in range(100):
        domain = 1 + (preferred - 1 + k) % 100
        lock = open(os.path.join(tempfile.gettempdir(),
                                 f'lf_mpc_calib-test-ros-domain-{domain}.lock'), 'w')
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        _HELD_LOCKS.append(lock)
        return domain
    return preferred


os.environ['ROS_DOMAIN_ID'] = str(
    _test_domain_id() if os.environ.get('LF_TEST_ROS_DOMAIN_ID')
    else _claim_domain_id(_test_domain_id()))
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
os.environ.pop('ROS_STATIC_PEERS', None)
os.environ.pop('ROS_LOCALHOST_ONLY', None)


def pytest_configure(config):
    config.addinivalue_line(
        'markers', 'cost(seconds): about how long the whole test file takes on the CI machine; '
        'costly files run first')


def pytest_collection_modifyitems(config, items):
    """Run the costly test files first, the costliest first (a file's ``pytestmark =
    pytest.mark.cost(seconds)``; unmarked files keep their order after them). The xdist
    workers take whole files (``--dist loadfile``), so a long file started last would leave
    one worker running alone at the end: longest-first keeps both busy to the end."""
    def cost(item):
        module = item.getparent(pytest.Module)
        mark = module.get_closest_marker('cost') if module is not None else None
        return -float(mark.args[0]) if mark else 0.0
    items.sort(key=cost)   # stable: the files stay whole and in their order otherwise


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
