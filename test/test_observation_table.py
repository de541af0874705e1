"""Tests of the observation-table CSV reader: fast path, errors naming row and column."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.observation_table import read_observations, write_observations
from lf_mpc_calib.simulation.observations import paper_scene

HEADER = 'pose,point,X,Y,Z,i,j,u,v'
ROW = '0,1,0.1,0.2,0,-1,2,3.5,4.5'


def _write(tmp_path, text, name='t.csv'):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_round_trip_is_exact(tmp_path):
    _, _, _, obs = paper_scene(n_poses=2, n_views=3, noise_px=0.3,
                               rng=np.random.default_rng(3))
    write_observations(tmp_path / 'o.csv', obs)
    back = read_observations(tmp_path / 'o.csv')
    np.testing.assert_array_equal(back.ijuv, obs.ijuv)
    np.testing.assert_array_equal(back.board, obs.board)
    np.testing.assert_array_equal(back.pose, obs.pose)
    assert back.lens_type is None


def test_lens_type_blank_lines_and_extra_columns(tmp_path):
    path = _write(tmp_path, f'{HEADER},lens_type,note\n{ROW},2,a\n\n  \n'
                            '1,1,0.1,0.2,0,-1,2,3.5,4.5,0,b\n')
    obs = read_observations(path)
    assert len(obs) == 2
    np.testing.assert_array_equal(obs.lens_type, [2, 0])
    np.testing.assert_array_equal(obs.ijuv[1], [-1, 2, 3.5, 4.5])


@pytest.mark.parametrize('body, match', [
    (f'{ROW}\n1,1,0.1,0.2,0,-1,2,abc,4.5\n', r't.csv:3: column u: expected a number, got .abc'),
    (f'{ROW}\n1,1,0.1,0.2\n', r't.csv:3: expected 9 columns .*got 4'),
    (f'{ROW}\n{ROW}\n', r'1 row\(s\) repeat a ray .*pose 0 point 1 \(i, j\) = \(-1, 2\)'),
])
def test_bad_cells_are_named_by_row_and_column(tmp_path, body, match):
    with pytest.raises(InvalidInputError, match=match):
        read_observations(_write(tmp_path, f'{HEADER}\n{body}'))


def test_unreadable_files_are_refused_with_the_reason(tmp_path):
    with pytest.raises(InvalidInputError, match='no such file'):
        read_observations(tmp_path / 'missing.csv')
    with pytest.raises(InvalidInputError, match='is a folder'):
        read_observations(tmp_path)
    utf16 = tmp_path / 'u16.csv'
    utf16.write_text(f'{HEADER}\n{ROW}\n', encoding='utf-16')
    with pytest.raises(InvalidInputError, match='not UTF-8 text'):
        read_observations(utf16)
    binary = tmp_path / 'b.csv'
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(InvalidInputError, match='not UTF-8 text'):
        read_observations(binary)
    with pytest.raises(InvalidInputError, match='empty file'):
        read_observations(_write(tmp_path, ''))
    with pytest.raises(InvalidInputError, match='no rows after the header'):
        read_observations(_write(tmp_path, HEADER + '\n\n'))
    with pytest.raises(InvalidInputError, match='header must start with'):
        read_observations(_write(tmp_path, 'a,b\n' + 'x' * 10_000 + '\n'))


def test_parser_imports_no_heavy_module():
    """Building the parser (``lf-mpc-calib --help``) loads no subcommand's heavy modules."""
    code = ('import sys; from lf_mpc_calib.cli import build_parser; build_parser(); '
            'print(" ".join(m for m in sys.modules if m.split(".")[0] in '
            '("scipy", "cv2", "matplotlib", "yaml", "imageio") or m.startswith('
            '("lf_mpc_calib.lenslet", "lf_mpc_calib.calibration", "lf_mpc_calib.simulation.'
            'optics", "lf_mpc_calib.features"))))')
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         cwd=root, env={'PYTHONPATH': str(root)}, check=True)
    assert out.stdout.split() == []
