"""
The launch files, read without the launch packages (they are not installable here).

Each launch/*.launch.py must compile, define generate_launch_description, start only nodes
whose executable is a console script of setup.py under the agreed node names, default its
parameters files to config files that exist and hold parameters for that node name, and take
the same arguments as the other files for the same things (same name, description, default).
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


COMMON_ARGUMENTS = {'namespace', 'optical_frame', 'image_topic', 'white_topic',
                    'image_reliability', 'params_file'}
"""Launch arguments every launch file takes, under these names."""
NOT_PARAMETERS = {'namespace', 'image_topic', 'white_topic', 'params_file', 'sim'}
"""Arguments that set no node parameter (a namespace, remappings, files, what to start)."""
OWN_PARAMS_FILE = {'lf_calibration': 'calibration_params_file', 'lf_decoder': 'decode_params_file',
                   'lf_sim_camera': 'sim_params_file'}
DEFAULT_EXCEPTIONS = {('demo.launch.py', 'image_reliability'): 'reliable'}
"""Defaults that differ on purpose: the demo's simulated camera sends multi-megabyte frames
reliably, which best-effort subscribers in other processes mostly lose."""


def _declared(name):
    """{argument: (default, description)} of a launch file's DeclareLaunchArgument calls (a
    default os.path.join(config, 'x.yaml') read as 'x.yaml')."""
    out = {}
    for call in _calls(ast.parse((LAUNCH / name).read_text()), 'DeclareLaunchArgument'):
        assert call.args and isinstance(call.args[0], ast.Constant), \
            f'{name}: an argument without a literal name'
        kw = _keywords(call)
        default = kw.get('default_value')
        if isinstance(default, ast.Call):
            default = default.args[-1]
        out[call.args[0].value] = (default.value if isinstance(default, ast.Constant) else None,
                                   kw['description'].value)
    return out


def _config_parameters(node):
    config = {'lf_calibration': 'calibration', 'lf_decoder': 'decode',
              'lf_sim_camera': 'sim_camera'}[node]
    doc = yaml.safe_load((ROOT / 'config' / f'{config}.yaml').read_text())
    return set(doc[f'/**/{node}']['ros__parameters'])


@pytest.mark.parametrize('name', sorted(EXPECTED))
def test_launch_files_take_the_same_arguments_for_the_same_things(name):
    declared = _declared(name)
    assert COMMON_ARGUMENTS <= set(declared), f'{name} lacks {COMMON_ARGUMENTS - set(declared)}'
    nodes = {NODE_NAMES[e] for e in EXPECTED[name]}
    # each node's own parameters file under one name, in every file that starts the node
    files = {a for a in declared if a.endswith('_params_file')}
    assert files == {OWN_PARAMS_FILE[n] for n in nodes}, f'{name}: {sorted(files)}'
    # every other argument is named as the node parameter it sets
    parameters = set().union(*(_config_parameters(n) for n in nodes))
    stray = set(declared) - files - NOT_PARAMETERS - parameters
    assert not stray, f'{name}: arguments {sorted(stray)} name no parameter of {sorted(nodes)}'
    # camera_name wherever a node that has one starts
    assert ('camera_name' in declared) == ('camera_name' in parameters), name


def test_launch_arguments_read_alike_across_the_files():
    declared = {name: _declared(name) for name in EXPECTED}
    arguments = set().union(*declared.values())
    for argument in sorted(arguments):
        seen = {name: d[argument] for name, d in declared.items() if argument in d}
        descriptions = {d for _, d in seen.values()}
        assert len(descriptions) == 1, f'{argument}: described differently {seen}'
        defaults = {d for name, (d, _) in seen.items()
                    if (name, argument) not in DEFAULT_EXCEPTIONS}
        assert len(defaults) <= 1, f'{argument}: defaults differ {seen}'
    for (name, argument), default in DEFAULT_EXCEPTIONS.items():
        assert declared[name][argument][0] == default


def test_node_parameters_take_only_the_arguments_given():
    from types import SimpleNamespace
    from lf_mpc_calib.ros.launch_arguments import node_parameters
    conf = {'calibration_params_file': '/c.yaml', 'params_file': '', 'camera_name': '',
            'optical_frame': 'cam_optical', 'image_reliability': 'reliable'}
    context = SimpleNamespace(launch_configurations=conf)
    names = ('camera_name', 'optical_frame', 'image_reliability')
    # an argument left '' leaves the files' value (no override); params_file only when given
    assert node_parameters(context, 'calibration_params_file', names) == [
        '/c.yaml', {'optical_frame': 'cam_optical', 'image_reliability': 'reliable'}]
    conf.update(params_file='/mine.yaml', optical_frame='', image_reliability='')
    assert node_parameters(context, 'calibration_params_file', names) == [
        '/c.yaml', '/mine.yaml']
