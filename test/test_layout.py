"""
The package layout keeps its promises: the core never imports ROS, imports never go round in a
circle, private names stay in their module, and the public names import from the top.

Imports are read from the source (every ``import`` statement, also those inside functions), so
a lazy import counts like any other.
"""

import ast
from pathlib import Path
import subprocess
import sys

import lf_mpc_calib

PACKAGE = Path(lf_mpc_calib.__file__).resolve().parent
ROS_MODULES = ('rclpy', 'rcl_interfaces', 'cv_bridge', 'tf2_ros', 'launch', 'launch_ros',
               'message_filters', 'rosidl_runtime_py')


def _module_name(path):
    rel = path.relative_to(PACKAGE.parent).with_suffix('')
    parts = rel.parts[:-1] if rel.name == '__init__' else rel.parts
    return '.'.join(parts)


def _modules():
    """{module name: ast tree} of every module of the package."""
    return {_module_name(p): ast.parse(p.read_text(), str(p))
            for p in sorted(PACKAGE.rglob('*.py'))}


MODULES = _modules()


def _imports(tree):
    """(imported module, [names]) for every import statement in ``tree``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, [a.name for a in node.names]))
    return out


def _is_ros(module):
    top = module.split('.')[0]
    return top in ROS_MODULES or top.endswith('_msgs') or top.endswith('_srvs')


def _package_edges():
    """{module: set of package modules it imports} (``from pkg import mod`` counts as mod)."""
    edges = {}
    for name, tree in MODULES.items():
        targets = set()
        for module, names in _imports(tree):
            if not module.startswith('lf_mpc_calib'):
                continue
            for n in names:
                if f'{module}.{n}' in MODULES:
                    targets.add(f'{module}.{n}')
            if module in MODULES:
                targets.add(module)
        edges[name] = targets - {name}
    return edges


def test_layout_core_never_imports_ros():
    offenders = [(name, module) for name, tree in MODULES.items()
                 if not name.startswith('lf_mpc_calib.ros')
                 for module, _ in _imports(tree) if _is_ros(module)]
    assert not offenders, f'core modules importing ROS: {offenders}'
    in_ros = [m for name, tree in MODULES.items() if name.startswith('lf_mpc_calib.ros')
              for m, _ in _imports(tree)]
    assert any(_is_ros(m) for m in in_ros), 'the check found no ROS import at all in ros/'


def test_layout_has_no_import_cycles():
    edges = _package_edges()
    # a package's __init__ re-exporting its modules is not a cycle with them
    for name in edges:
        edges[name] = {t for t in edges[name] if not name.startswith(t + '.')}
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = 'open'
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 'open':
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 'done'

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert not cycles, 'import cycles: ' + '; '.join(' -> '.join(c) for c in cycles)
    assert sum(len(v) for v in edges.values()) > 50, 'the import graph was not read'


def test_layout_private_names_stay_in_their_module():
    offenders = [(name, module, n) for name, tree in MODULES.items()
                 for module, names in _imports(tree)
                 if module.startswith('lf_mpc_calib') and module != name
                 for n in names if n.startswith('_') and not n.startswith('__')]
    assert not offenders, f'private names imported from another module: {offenders}'


def test_layout_public_api_imports_from_the_top():
    for name in lf_mpc_calib.__all__:
        assert getattr(lf_mpc_calib, name) is not None, name
    from lf_mpc_calib.calibration import calibrate
    from lf_mpc_calib.camera.model import MPCModel
    assert lf_mpc_calib.MPCModel is MPCModel and lf_mpc_calib.calibrate is calibrate


def test_layout_importing_the_package_is_cheap():
    heavy = '("scipy", "cv2", "matplotlib", "rclpy")'
    code = ('import sys, lf_mpc_calib, lf_mpc_calib.cli; '
            f'print(sorted(m for m in {heavy} if m in sys.modules))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == '[]', f'importing lf_mpc_calib and its CLI loaded {out}'
