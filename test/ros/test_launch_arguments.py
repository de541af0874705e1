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
from pathlib import Path

import pytest

from lf_mpc_calib.ros.defaults import RAW_INPUT_PARAMETERS
from lf_mpc_calib.ros.launch_arguments import CHOICES
from ros.launch_runner import finish, start_launch

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


@pytest.mark.parametrize('launch_file, argument', [
    ('calibrate.launch.py', 'sim'), ('calibrate.launch.py', 'image_reliability'),
    ('demo.launch.py', 'image_reliability')])
def test_a_bad_value_starts_no_node(tmp_path, launch_file, argument):
    bad = f'{argument}:={BAD_VALUES[argument]}'
    proc = start_launch(launch_file, [bad], tmp_path / 'log')
    out, left = finish(proc, timeout_s=30)     # still running at 30 s: the value was taken
    assert proc.returncode == 1, f'{launch_file} {bad} was not refused:\n{out[-2000:]}'
    assert not left, f'{launch_file} {bad}: {len(left)} processes started:\n{out[-2000:]}'
    assert f'provided value "{BAD_VALUES[argument]}" is not valid' in out, out[-2000:]
