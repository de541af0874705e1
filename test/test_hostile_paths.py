"""
Special files and implied inputs (issue 41): an output onto a device, FIFO or folder, an empty
output name, an output over a file a command reads without naming it (white.png beside the
frame, a frame a manifest names outside its folder), and an input that is a device or FIFO are
each refused before any work, naming what was expected and what came; nothing is changed.
"""

import os
import stat

import pytest

from lf_mpc_calib.cli import main
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.atomic import write_text_atomically


def _run(argv, capsys):
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


def _char_device(path):
    """A character device node like /dev/null (1, 3) at ``path``, or skip where not allowed."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError) as exc:
        pytest.skip(f'cannot make a device node here: {exc}')
    return path


def _table(tmp_path):
    path = tmp_path / 't.csv'
    path.write_text('pose,point,X,Y,Z,i,j,u,v\n')
    return path


def _is_device(path):
    return stat.S_ISCHR(os.stat(path).st_mode)


@pytest.mark.parametrize('argv', [
    ['calibrate', '{table}', '-o', '{special}'],
    ['calibrate', '{table}', '-o', '{ok}/c.yaml', '--save-observations', '{special}'],
    ['grid', '{image}', '-o', '{special}'],
    ['depth', '{image}', '--calibration', '{table}', '-o', '{ok}/d.npy', '--ply', '{special}'],
    ['refocus', '{image}', '--calibration', '{table}', '--distance', '1', '-o', '{special}'],
], ids=['calibrate-o', 'calibrate-save-observations', 'grid-o', 'depth-ply', 'refocus-o'])
@pytest.mark.parametrize('kind', ['device', 'fifo'])
def test_output_onto_a_device_or_fifo_is_refused_and_left_as_it_is(
        tmp_path, capsys, argv, kind):
    special = tmp_path / 'special'
    if kind == 'device':
        _char_device(special)
    else:
        os.mkfifo(special)
    image = tmp_path / 'frame.png'
    image.write_bytes(b'not read')
    values = {'table': _table(tmp_path), 'special': special, 'ok': tmp_path, 'image': image}
    rc, err = _run([a.format(**values) for a in argv], capsys)
    what = 'a character device' if kind == 'device' else 'a FIFO'
    assert rc == 2 and f'is {what}' in err and 'expected a regular file or a new name' in err, err
    mode = os.stat(special).st_mode
    assert (stat.S_ISCHR(mode) if kind == 'device' else stat.S_ISFIFO(mode)), 'replaced'


def test_folder_output_that_is_a_device_or_a_file_is_refused(tmp_path, capsys):
    dev = _char_device(tmp_path / 'dev')
    (tmp_path / 'w.png').write_bytes(b'')
    (tmp_path / 'notes.txt').write_text('mine')
    for target, what in ((dev, 'a character device'), (tmp_path / 'notes.txt', 'a regular file')):
        rc, err = _run(['decode', tmp_path / 'w.png', '--white', tmp_path / 'w.png',
                        '-o', target], capsys)
        assert rc == 2 and f'is {what}; expected a folder or a new name' in err, err
    assert _is_device(dev) and (tmp_path / 'notes.txt').read_text() == 'mine'


@pytest.mark.parametrize('argv, label', [
    (['calibrate', '{table}', '-o', ''], '--output'),
    (['decode', '{table}', '--white', '{table}', '-o', ''], '--output'),
    (['calibrate', '{table}', '-o', '{tmp}/c.yaml', '--report', ''], '--report'),
])
def test_empty_output_name_is_refused(tmp_path, capsys, argv, label):
    before = sorted(os.listdir(tmp_path))
    values = {'table': _table(tmp_path), 'tmp': tmp_path}
    cwd = os.getcwd()
    os.chdir(tmp_path)                  # decode -o '' wrote into the current folder
    try:
        rc, err = _run([a.format(**values) for a in argv], capsys)
    finally:
        os.chdir(cwd)
    assert rc == 2 and f'{label}: an empty name' in err, err
    assert sorted(os.listdir(tmp_path)) == sorted(before + ['t.csv'])


def test_atomic_writer_refuses_a_device_itself(tmp_path):
    """The library's own writer (nodes, scripts): the rule holds without the CLI's check."""
    dev = _char_device(tmp_path / 'null')
    with pytest.raises(InvalidInputError, match='is a character device; expected a regular'):
        write_text_atomically(dev, 'x')
    assert _is_device(dev) and os.listdir(tmp_path) == ['null']


def _frame_white_dark(tmp_path):
    folder = tmp_path / 'w'
    folder.mkdir()
    for name in ('frame_000.png', 'white.png', 'dark.png'):
        (folder / name).write_bytes(name.encode())
    (tmp_path / 'cal.yaml').write_text('x: 1\n')
    return folder


@pytest.mark.parametrize('command, flag, name', [
    ('depth', '--png', 'white.png'), ('depth', '-o', 'white.png'),
    ('depth', '--ply', 'dark.png'), ('refocus', '-o', 'white.png'),
    ('refocus', '-o', 'dark.png')])
def test_implied_white_and_dark_beside_the_frame_are_protected(tmp_path, capsys, command, flag,
                                                               name):
    folder = _frame_white_dark(tmp_path)
    argv = [command, folder / 'frame_000.png', '--calibration', tmp_path / 'cal.yaml']
    argv += ['--distance', '1'] if command == 'refocus' else []
    outs = {'-o': tmp_path / ('o.npy' if command == 'depth' else 'o.png')}
    outs[flag] = folder / name
    for f, p in outs.items():
        argv += [f, p]
    rc, err = _run(argv, capsys)
    assert rc == 2 and 'would overwrite the input' in err and 'beside RAW' in err, err
    assert (folder / name).read_bytes() == name.encode()


def test_files_a_manifest_names_outside_its_folder_are_protected(tmp_path, capsys):
    outside = tmp_path / 'elsewhere'
    outside.mkdir()
    (outside / 'white.png').write_bytes(b'white')
    (outside / 'f.png').write_bytes(b'frame')
    data = tmp_path / 'data'
    data.mkdir()
    (data / 'manifest.yaml').write_text(
        f'white: ../elsewhere/white.png\nframes: [{outside / "f.png"}]\n')
    for target in (outside / 'white.png', outside / 'f.png'):
        rc, err = _run(['calibrate-raw', data, '-o', target], capsys)
        assert rc == 2 and 'named by the manifest' in err, err
    assert (outside / 'white.png').read_bytes() == b'white'
    assert (outside / 'f.png').read_bytes() == b'frame'


def test_inputs_that_are_devices_or_fifos_are_refused_before_reading(tmp_path, capsys):
    dev = _char_device(tmp_path / 'zero')           # (1, 3) reads as empty, /dev/zero never ends
    fifo = tmp_path / 'fifo'
    os.mkfifo(fifo)
    for src in (dev, fifo, '/dev/zero'):
        rc, err = _run(['calibrate', src, '-o', tmp_path / 'c.yaml'], capsys)
        assert rc == 2 and 'expected a regular file' in err, err
    assert not (tmp_path / 'c.yaml').exists()
