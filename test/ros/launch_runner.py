"""
Run an installed launch file of lf_mpc_calib in its own process, as ``ros2 launch`` does.

For tests that need the launch packages (not on PyPI; a ROS 2 install, or launch and
launch_ros built from their sources) and lf_mpc_calib in the ament index (``colcon build``,
then AMENT_PREFIX_PATH): :func:`installed_share` skips the test otherwise. Every process the
launch starts carries a token in its environment, so that :func:`kill_leftovers` finds and
ends the nodes a launch left behind (parent 1) without touching anyone else's.
"""

import os
from pathlib import Path
import subprocess
import sys
import uuid

import pytest

RUN = '''
import sys
import launch
from launch.actions import IncludeLaunchDescription, SetEnvironmentVariable
from launch.launch_description_sources import AnyLaunchDescriptionSource
path, token, mode, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
service = launch.LaunchService(argv=args, noninteractive=mode == 'noninteractive')
service.include_launch_description(launch.LaunchDescription([
    SetEnvironmentVariable('LF_LAUNCH_TEST_TOKEN', token),
    IncludeLaunchDescription(AnyLaunchDescriptionSource(path),
                             launch_arguments=[tuple(a.split(':=', 1)) for a in args])]))
sys.exit(service.run())
'''
"""``python -c RUN FILE TOKEN MODE ARG:=VALUE...``: what ``ros2 launch [-n] FILE ARGS`` does
(-n, noninteractive: the default of ``ros2 launch`` when stdin is not a terminal)."""


def installed_share():
    """The installed share directory of lf_mpc_calib, or skip the test."""
    pytest.importorskip('launch', reason='launch is not installed (not on PyPI)')
    pytest.importorskip('launch_ros', reason='launch_ros is not installed (not on PyPI)')
    from ament_index_python.packages import get_package_share_directory
    try:
        return Path(get_package_share_directory('lf_mpc_calib'))
    except LookupError as exc:
        pytest.skip(f'lf_mpc_calib is not in the ament index ({exc}): colcon build it and '
                    'set AMENT_PREFIX_PATH')


def start_launch(launch_file, args, log_dir, *, noninteractive=True, new_session=False):
    """Popen of the launch of ``launch_file`` (a name under share/launch) with ``args``
    (['name:=value', ...]); ``.token`` names its processes (:func:`kill_leftovers`)."""
    token = uuid.uuid4().hex
    proc = subprocess.Popen(
        [sys.executable, '-c', RUN, str(installed_share() / 'launch' / launch_file), token,
         'noninteractive' if noninteractive else 'interactive', *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, ROS_LOG_DIR=str(log_dir), PYTHONUNBUFFERED='1'),
        start_new_session=new_session)
    proc.token = token
    return proc


def finish(proc, timeout_s):
    """The output of ``proc`` once it ended (killed after ``timeout_s``), and the pids of
    the processes it started that were still running (killed)."""
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out, kill_leftovers(proc.token)


def kill_leftovers(token):
    """Kill the processes whose environment holds this token; their pids."""
    found, marker = [], f'LF_LAUNCH_TEST_TOKEN={token}'.encode()
    for entry in Path('/proc').iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / 'environ').read_bytes().split(b'\0'):
                found.append(int(entry.name))
        except OSError:
            continue
    for pid in found:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    return found
