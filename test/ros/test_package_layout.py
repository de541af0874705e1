"""
The ROS-workspace path: package.xml, setup.py and what `colcon build` installs.

CI has no ROS install, but colcon-core and colcon-ros come from PyPI, so the ament_python build
and the installed layout (what `ros2 run` and launch files rely on) are checked here.
"""

import os
from pathlib import Path
import shutil
import subprocess
import sys

import pytest

import lf_mpc_calib

ROOT = Path(__file__).resolve().parents[2]
EXECUTABLES = ('lf-mpc-calib', 'calibration_node', 'decode_node', 'sim_camera_node')
RUN_DEPENDS = ('rclpy', 'sensor_msgs', 'geometry_msgs', 'std_msgs', 'std_srvs', 'tf2_msgs',
               'python3-numpy', 'python3-scipy', 'python3-opencv', 'python3-yaml',
               'python3-matplotlib')


def test_package_xml_declares_dependencies():
    package = _package()
    assert package.name == 'lf_mpc_calib'
    assert package.package_format == 3
    assert package.version == lf_mpc_calib.__version__
    assert package.get_build_type() == 'ament_python'
    exec_depends = {d.name for d in package.exec_depends}
    missing = sorted(set(RUN_DEPENDS) - exec_depends)
    assert not missing, f'package.xml lacks exec_depend {missing}'
    assert 'python3-pytest' in {d.name for d in package.test_depends}


ROS_MODULES = {'rclpy', 'launch', 'launch_ros', 'launch_testing', 'launch_testing_ros',
               'ament_index_python', 'tf2_ros', 'tf2_py', 'rosbag2_py', 'cv_bridge',
               'message_filters', 'image_geometry', 'camera_info_manager', 'rosidl_runtime_py'}
"""Python modules that come from ROS packages (besides the *_msgs, *_srvs, *_interfaces)."""
PACKAGE_OF_MODULE = {'tf2_ros': 'tf2_ros_py', 'tf2_py': 'tf2_py'}
"""rosdep keys whose Python module has another name: ``import tf2_ros`` is tf2_ros_py (the
key tf2_ros is the C++ library and does not bring it)."""


def _ros_imports(paths):
    """{package key: first file importing it} of the ROS modules imported in ``paths``."""
    import ast
    found = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for top in {n.split('.')[0] for n in names}:
                if top in ROS_MODULES or top.endswith(('_msgs', '_srvs', '_interfaces')):
                    found.setdefault(PACKAGE_OF_MODULE.get(top, top), path.relative_to(ROOT))
    return found


def _package():
    catkin_pkg = pytest.importorskip('catkin_pkg.package')
    return catkin_pkg.parse_package(str(ROOT / 'package.xml'))


def test_package_xml_declares_every_ros_import_and_nothing_else():
    package = _package()
    runtime = _ros_imports(sorted(ROOT.glob('lf_mpc_calib/**/*.py'))
                           + sorted(ROOT.glob('launch/*.py')))
    exec_depends = {d.name for d in package.exec_depends}
    missing = {k: str(v) for k, v in runtime.items() if k not in exec_depends}
    assert not missing, f'imported but not an exec_depend of package.xml: {missing}'
    unused = sorted(d for d in exec_depends if not d.startswith('python3-') and d not in runtime)
    assert not unused, f'exec_depend of package.xml that nothing imports: {unused}'
    tests = _ros_imports(sorted(ROOT.glob('test/**/*.py')))
    test_only = {d.name for d in package.test_depends} - {'python3-pytest'}
    unused = sorted(d for d in test_only if d not in tests)
    assert not unused, f'test_depend of package.xml that no test imports: {unused}'
    missing = {k: str(v) for k, v in tests.items() if k not in exec_depends | test_only}
    assert not missing, f'imported by tests but not declared in package.xml: {missing}'


def _colcon():
    exe = Path(sys.executable).parent / 'colcon'
    if exe.exists():
        return str(exe)
    found = shutil.which('colcon')
    if not found:
        pytest.skip('colcon is not installed (scripts/setup.sh installs it)')
    return found


@pytest.fixture(scope='module')
def colcon_install(tmp_path_factory):
    base = tmp_path_factory.mktemp('colcon')
    env = dict(os.environ, COLCON_HOME=str(base / 'colcon_home'), PYTHONDONTWRITEBYTECODE='1')
    # docs/ros-session.md's recipe for the venv's colcon (colcon-core and colcon-ros, no
    # --packages-select: after --base-paths that option is ignored without a word)
    cmd = [_colcon(), '--log-base', str(base / 'log'), 'build', '--base-paths', str(ROOT),
           '--build-base', str(base / 'build'), '--install-base', str(base / 'install'),
           '--event-handlers', 'console_direct-']
    proc = subprocess.run(cmd, cwd=base, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f'colcon build failed:\n{proc.stdout}\n{proc.stderr}'
    return base / 'install' / 'lf_mpc_calib'


def test_colcon_build_installs_executables_in_lib(colcon_install):
    for name in EXECUTABLES:
        exe = colcon_install / 'lib' / 'lf_mpc_calib' / name
        assert exe.is_file() and os.access(exe, os.X_OK), f'{exe} missing or not executable'
        assert not (colcon_install / 'bin' / name).exists(), f'{name} must not be in bin/'


def test_colcon_build_installs_share_files(colcon_install):
    share = colcon_install / 'share'
    assert (share / 'ament_index' / 'resource_index' / 'packages' / 'lf_mpc_calib').is_file()
    assert (share / 'lf_mpc_calib' / 'package.xml').read_text() == \
        (ROOT / 'package.xml').read_text()
    for pattern, folder in (('launch/*.launch.py', 'launch'), ('config/*.yaml', 'config')):
        for source in ROOT.glob(pattern):
            assert (share / 'lf_mpc_calib' / folder / source.name).is_file(), \
                f'{source.name} not installed to share/lf_mpc_calib/{folder}'


def test_colcon_build_installs_python_package_without_tests(colcon_install):
    site = list(colcon_install.glob('lib/python3*/site-packages'))
    assert len(site) == 1, f'expected one site-packages, got {site}'
    assert (site[0] / 'lf_mpc_calib' / '__init__.py').is_file()
    assert (site[0] / 'lf_mpc_calib' / 'ros' / '__init__.py').is_file()
    # package data: the Fast DDS profile the nodes' main() points Fast DDS at (ros/transport.py)
    assert (site[0] / 'lf_mpc_calib' / 'ros' / 'fastdds_large_frames.xml').is_file()
    assert not (site[0] / 'test').exists()


def test_venv_console_scripts_on_path():
    bindir = Path(sys.executable).parent
    if not (bindir / 'activate').exists():
        pytest.skip('not running inside a venv')
    for name in EXECUTABLES:
        assert (bindir / name).is_file(), f'{name} is not in {bindir}'


def test_ament_index_finds_installed_launch_files_and_executables(colcon_install, monkeypatch):
    # What `ros2 launch` and launch_ros' Node(package=, executable=) do: share directory and
    # <prefix>/lib/<package>/<executable> from the ament index of the install prefix.
    packages = pytest.importorskip('ament_index_python.packages')
    monkeypatch.setenv('AMENT_PREFIX_PATH', str(colcon_install))
    share = Path(packages.get_package_share_directory('lf_mpc_calib'))
    assert share == colcon_install / 'share' / 'lf_mpc_calib'
    for source in ROOT.glob('launch/*.launch.py'):
        assert (share / 'launch' / source.name).is_file()
    prefix = Path(packages.get_package_prefix('lf_mpc_calib'))
    for name in EXECUTABLES:
        assert os.access(prefix / 'lib' / 'lf_mpc_calib' / name, os.X_OK), name
    # The installed entry script runs from the installed package alone.
    site = next(colcon_install.glob('lib/python3*/site-packages'))
    env = dict(os.environ, PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE='1')
    proc = subprocess.run([str(prefix / 'lib' / 'lf_mpc_calib' / 'lf-mpc-calib'), '--help'],
                          env=env, capture_output=True, text=True, timeout=60, cwd=site)
    assert proc.returncode == 0, proc.stderr
    assert 'calibrate-raw' in proc.stdout
