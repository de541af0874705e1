"""
The launch files, read without the launch packages (they are not installable here).

Each launch/*.launch.py must compile, define generate_launch_description, start only nodes
whose executable is a console script of setup.py under the agreed node names, and default its
params_file arguments to config files that exist and hold parameters for that node name.
Where launch_testing is importable, test_launch_calibrate.py also runs calibrate.launch.py.
"""

import ast
from pathlib import Path
import re

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / 'launch'
NODE_NAMES = {'calibration_node': 'lf_calibration', 'decode_node': 'lf_decoder',
              'sim_camera_node': 'lf_sim_camera'}
EXPECTED = {'calibrate.launch.py': {'calibration_node', 'sim_camera_node'},
            'decode.launch.py': {'decode_node'},
            'demo.launch.py': set(NODE_NAMES)}


def _console_scripts():
    text = (ROOT / 'setup.py').read_text()
    return set(re.findall(r"'([\w-]+)\s*=\s*lf_mpc_calib[\w.]*:main'", text))


def _strings(tree):
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _keywords(call):
    return {k.arg: k.value for k in call.keywords}


def _calls(tree, name):
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            if (isinstance(f, ast.Name) and f.id == name) or \
                    (isinstance(f, ast.Attribute) and f.attr == name):
                yield n


@pytest.mark.parametrize('name', sorted(EXPECTED))
def test_launch_file_compiles_and_defines_description(name):
    source = (LAUNCH / name).read_text()
    tree = ast.parse(source, filename=name)
    compile(source, name, 'exec')
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert 'generate_launch_description' in functions, f'{name} lacks generate_launch_description'


@pytest.mark.parametrize('name', sorted(EXPECTED))
def test_launch_file_starts_existing_executables_under_agreed_names(name):
    tree = ast.parse((LAUNCH / name).read_text())
    scripts = _console_scripts()
    assert set(NODE_NAMES) <= scripts, f'setup.py console scripts {sorted(scripts)}'
    strings = _strings(tree)
    nodes = list(_calls(tree, 'Node'))
    assert nodes, f'{name} starts no Node'
    for call in nodes:
        kw = _keywords(call)
        assert isinstance(kw.get('package'), ast.Constant) and kw['package'].value == \
            'lf_mpc_calib', f'{name}: Node package must be lf_mpc_calib'
        assert 'parameters' in kw, f'{name}: a Node without parameters'
    # executables/names are literals (decode/calibrate) or a literal table (demo)
    started = {s for s in strings if s in NODE_NAMES}
    assert started == EXPECTED[name], f'{name} starts {sorted(started)}'
    for executable in started:
        assert NODE_NAMES[executable] in strings, \
            f'{name}: {executable} not named {NODE_NAMES[executable]}'


@pytest.mark.parametrize('name', sorted(EXPECTED))
def test_launch_file_params_defaults_are_existing_config_files(name):
    tree = ast.parse((LAUNCH / name).read_text())
    # demo.launch.py declares its arguments from a literal table, so look for the name
    assert list(_calls(tree, 'DeclareLaunchArgument')), f'{name} declares no argument'
    assert 'params_file' in _strings(tree), f'{name} has no params_file argument'
    configs = {s for s in _strings(tree) if s.endswith('.yaml')}
    assert configs, f'{name} names no config/*.yaml'
    node_names = set(NODE_NAMES.values())
    for config in configs:
        path = ROOT / 'config' / config
        assert path.is_file(), f'{name} refers to missing config/{config}'
        params = yaml.safe_load(path.read_text())
        assert set(params) <= {f'/**/{n}' for n in node_names}, \
            f'config/{config} has nodes {sorted(params)} (keyed /**/<node>: any namespace)'
        for node, body in params.items():
            assert isinstance(body.get('ros__parameters'), dict), \
                f'config/{config}: {node} lacks ros__parameters'


COMMON_ARGUMENTS = {'namespace', 'params_file'}
"""Launch arguments every launch file takes; the files with a camera subscription also take
image_reliability (a separate camera's large frames need reliable delivery)."""


@pytest.mark.parametrize('name', sorted(EXPECTED))
def test_launch_files_take_the_same_arguments_for_the_same_things(name):
    tree = ast.parse((LAUNCH / name).read_text())
    strings = _strings(tree)
    assert COMMON_ARGUMENTS <= strings, f'{name} lacks {COMMON_ARGUMENTS - strings}'
    if name != 'demo.launch.py':    # the demo's nodes are in one launch: reliable within it
        assert {'image_topic', 'image_reliability'} <= strings, name
