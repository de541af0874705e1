"""Hostile YAML and lenslet grids: refused where they enter, with short messages
(issue 13 #5.4-5.5)."""

import numpy as np
import pytest

from lf_mpc_calib.errors import CalibrationFileError, InvalidInputError
from lf_mpc_calib.io.calibration_file import load_calibration, loads
from lf_mpc_calib.io.yaml_file import load_yaml, read_yaml
from lf_mpc_calib.lenslet.grid import LensletGrid


def _alias_bomb(levels=9):
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for prev, name in zip('abcdefghij', 'bcdefghijk'[:levels - 1]):
        text += f'{name}: &{name} [' + ','.join([f'*{prev}'] * 9) + ']\n'
    return text


def test_alias_bomb_is_refused_without_echoing_it():
    with pytest.raises(InvalidInputError, match='alias bomb') as info:
        load_yaml(_alias_bomb(), 'grid file g.yaml')
    assert len(str(info.value)) < 300
    with pytest.raises(CalibrationFileError, match='alias bomb'):
        loads('format_version: 1\n' + _alias_bomb())
    # aliases a small document really uses are fine
    assert load_yaml('a: &x [1, 2]\nb: *x\n') == {'a': [1, 2], 'b': [1, 2]}


def test_huge_values_are_shortened_in_messages(tmp_path):
    path = tmp_path / 'cal.yaml'
    path.write_text('camera_type: ' + 'x' * 10_000_000 + '\n')
    with pytest.raises(CalibrationFileError) as info:
        load_calibration(path)
    assert len(str(info.value)) < 1000 and str(path) in str(info.value)


def test_unreadable_yaml_files_name_the_file(tmp_path):
    binary = tmp_path / 'binary.yaml'
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(InvalidInputError, match=f'cannot read manifest {binary}: not UTF-8'):
        read_yaml(binary, 'manifest')
    with pytest.raises(CalibrationFileError, match=f'calibration file {binary}: not UTF-8'):
        load_calibration(binary)               # the decode node's bare UnicodeDecodeError
    with pytest.raises(InvalidInputError, match='it is a folder'):
        read_yaml(tmp_path, 'manifest')
    truncated = tmp_path / 'truncated.yaml'
    truncated.write_text('frames: [frame_000.png,\n  board: {cols: 6')
    with pytest.raises(InvalidInputError, match=f'manifest {truncated}: not valid YAML'):
        read_yaml(truncated, 'manifest')


GRID = dict(lattice='hex', pitch=14.0, row_spacing=12.1, rotation=0.0, origin=[7.0, 7.0],
            shape=[117, 135], image_size=[1640, 1640])


@pytest.mark.parametrize('changes, match', [
    ({'shape': [-117, 135]}, r'shape must be two integers in \[1, 65536\], got \[-117, 135\]'),
    ({'shape': [100000, 100000]}, 'shape must be two integers'),
    ({'shape': [5000, 5000]}, r'cannot fit a 1640x1640 px image .*at most 167x193'),
    ({'shape': [117.5, 135]}, 'shape must be two integers'),
    ({'shape': 'big'}, 'shape must be two integers'),
    ({'image_size': [0, 1640]}, 'image_size must be two integers'),
    ({'image_size': [10 ** 9, 1640]}, 'image_size must be two integers'),
])
def test_lenslet_grid_refuses_absurd_shapes(changes, match):
    """Fuzz issue 13 #5.5: a 100000x100000 grid meant a 149 GiB allocation per frame."""
    assert LensletGrid.from_dict(GRID).shape == (117, 135)
    with pytest.raises(InvalidInputError, match=match):
        LensletGrid.from_dict({**GRID, **changes})


def test_lenslet_grid_accepts_a_sensor_filling_lattice():
    grid = LensletGrid.from_dict({**GRID, 'rotation': np.radians(30.0), 'shape': [160, 180]})
    assert grid.shape == (160, 180)
