"""
Launch arguments with a fixed set of values (``ros/launch_arguments.py``'s CHOICES) are
declared with ``choices=``, so that launch refuses another value before any node starts.

``sim:=yes`` used to fail only at the simulated camera's IfCondition, after the calibration
node had started, which was left running with parent 1. Read without the launch packages (the
table and the declarations); where launch and launch_ros are importable and lf_mpc_calib is in
the ament index (colcon build, then AMENT_PREFIX_PATH), the launch files are also run with a
bad value and no process of theirs may exist.
"""

import ast
import os
from pathlib import Path
import subprocess
import sys
import uuid

import pytest

from lf_mpc_calib.ros.defaults import RAW_INPUT_PARAMETERS
from lf_mpc_calib.ros.launch_arguments import CHOICES

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FILES = sorted((ROOT / 'launch').glob('*.launch.py'))
BAD_VALUES = {'sim': 'yes', 'image_reliability': 'reliabel'}


def _calls(tree, name):
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and getattr(n.func, 'id', getattr(n.func, 'attr', None)) == name]


def _declarations(path):
    """{argument: {keyword: ast node}} of the file's DeclareLaunchArgument calls."""
    return {c.args[0].value: {k.arg: k.value for k in c.keywords}
            for c in _calls(ast.parse(path.read_text()), 'DeclareLaunchArgument')}


def _conditioned(path):
    """Names of the launch arguments an IfCondition / UnlessCondition reads."""
    tree = ast.parse(path.read_text())
    return {a.args[0].value
            for c in _calls(tree, 'IfCondition') + _calls(tree, 'UnlessCondition')
            for a in c.args if isinstance(a, ast.Call) and a.args
            and getattr(a.func, 'id', None) == 'LaunchConfiguration'}


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=[p.name for p in LAUNCH_FILES])
def test_arguments_with_fixed_values_are_declared_with_their_choices(path):
    declared = _declarations(path)
    for name in sorted(set(CHOICES) & set(declared)):
        choices = declared[name].get('choices')
        assert choices is not None and ast.unparse(choices) == f'choices_of({name!r})', \
            f'{path.name}: argument {name!r} expected choices=choices_of({name!r}), got ' \
            f'{None if choices is None else ast.unparse(choices)}'
        default = ast.literal_eval(declared[name]['default_value'])
        assert default in CHOICES[name], f'{path.name}: {name} default {default!r}'
    unlisted = sorted(_conditioned(path) - set(CHOICES))
    assert not unlisted, f'{path.name}: conditions on {unlisted}, which have no choices'


def test_the_choices_are_the_values_the_nodes_take():
    check = next(c for n, _, _, c in RAW_INPUT_PARAMETERS if n == 'image_reliability')
    takes = [v for v in CHOICES['image_reliability'] if v]     # '': the parameters files'
    assert takes and all(check(v) is None for v in takes)
    assert check('reliabel') is not None
    assert CHOICES['sim'] == ('true', 'false')                  # what IfCondition reads


def _share():
    """The installed share directory of lf_mpc_calib, or skip."""
    pytest.importorskip('launch', reason='launch is not installed (not on PyPI)')
    pytest.importorskip('launch_ros', reason='launch_ros is not installed (not on PyPI)')
    from ament_index_python.packages import get_package_share_directory
    try:
        return Path(get_package_share_directory('lf_mpc_calib'))
    except LookupError as exc:
        pytest.skip(f'lf_mpc_calib is not in the ament index ({exc})')


RUN = '''
import sys
import launch
from launch.actions import IncludeLaunchDescription, SetEnvironmentVariable
from launch.launch_description_sources import AnyLaunchDescriptionSource
path, token, args = sys.argv[1], sys.argv[2], sys.argv[3:]
service = launch.LaunchService(argv=args)
service.include_launch_description(launch.LaunchDescription([
    SetEnvironmentVariable('LF_LAUNCH_TEST_TOKEN', token),
    IncludeLaunchDescription(AnyLaunchDescriptionSource(path),
                             launch_arguments=[tuple(a.split(':=', 1)) for a in args])]))
sys.exit(service.run())
'''


def _processes_with(token):
    """Pids of the processes whose environment holds LF_LAUNCH_TEST_TOKEN=token."""
    found, marker = [], f'LF_LAUNCH_TEST_TOKEN={token}'.encode()
    for entry in Path('/proc').iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / 'environ').read_bytes().split(b'\0'):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize('launch_file, argument', [
    ('calibrate.launch.py', 'sim'), ('calibrate.launch.py', 'image_reliability'),
    ('demo.launch.py', 'image_reliability')])
def test_a_bad_value_starts_no_node(tmp_path, launch_file, argument):
    share = _share()
    token = uuid.uuid4().hex
    script = tmp_path / 'run_launch.py'
    script.write_text(RUN)
    bad = f'{argument}:={BAD_VALUES[argument]}'
    proc = subprocess.Popen([sys.executable, str(script), str(share / 'launch' / launch_file),
                             token, bad], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=dict(os.environ, ROS_LOG_DIR=str(tmp_path / 'log')))
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:   # the nodes run: the value was taken
        proc.kill()
        out, _ = proc.communicate()
    finally:
        left = _processes_with(token)
        for pid in left:                # nodes started before the refusal, or running
            os.kill(pid, 9)
    assert proc.returncode == 1, f'{launch_file} {bad} was not refused:\n{out[-2000:]}'
    assert not left, f'{launch_file} {bad}: {len(left)} processes started:\n{out[-2000:]}'
    assert f'provided value "{BAD_VALUES[argument]}" is not valid' in out, out[-2000:]
