"""
The failures of the fourth hostile round (issue 41), each at its root: an input option the
output check did not know (``--dark``), a folder output holding an input, an output whose
format follows a suffix its writer does not know, a legal name whose temporary name is not, and
a cut-off PNG answered with libpng's own line on stderr.
"""

import argparse
import re

import numpy as np
import pytest

from lf_mpc_calib.cli import build_parser, main
from lf_mpc_calib.cli.paths import INPUT_DESTS, OUTPUT_DESTS
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.atomic import write_text_atomically
from lf_mpc_calib.io.file_checks import MAX_NAME_BYTES
from lf_mpc_calib.io.images import read_image, write_image

NOT_PATHS = {'image_size'}
"""Options whose help mentions a file without naming one."""


def _run(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    return rc, capsys.readouterr().err


def _frame(path, value=100):
    img = np.full((40, 50), value, np.uint8)
    img[::7, ::5] = 200
    write_image(path, img)
    return path


def test_every_option_naming_a_file_is_an_input_or_an_output():
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    loose = []
    for name, sub in action.choices.items():
        for a in sub._actions:
            if a.dest in INPUT_DESTS + OUTPUT_DESTS or a.dest in NOT_PATHS or a.choices or \
                    a.nargs == 0:
                continue
            text = f'{a.metavar} {a.help}'
            if re.search(r'\bFILE\b|\.(xml|yaml|csv|png|npy|json)\b|\bfile\b|folder', text,
                         re.I):
                loose.append(f'{name} {a.dest}')
    assert not loose, f'options that name a file but are not protected as inputs: {loose}'


@pytest.mark.parametrize('argv', [
    ['grid', '{d}/white.png', '--dark', '{d}/dark.png', '-o', '{d}/dark.png'],
    ['grid', '{d}/white.png', '--dark', '{d}/dark.png', '-o', '{d}/g.yaml',
     '--centres', '{d}/dark.png'],
    ['refocus', '{d}/f.png', '--white', '{d}/white.png', '--dark', '{d}/dark.png',
     '--calibration', '{d}/c.yaml', '--distance', '0.4', '-o', '{d}/dark.png'],
    ['depth', '{d}/f.png', '--white', '{d}/white.png', '--dark', '{d}/dark.png',
     '--calibration', '{d}/c.yaml', '-o', '{d}/d.npy', '--png', '{d}/dark.png'],
], ids=['grid-o', 'grid-centres', 'refocus-o', 'depth-png'])
def test_an_explicit_dark_frame_is_protected_like_every_input(tmp_path, capsys, argv):
    for name in ('white.png', 'dark.png', 'f.png'):
        _frame(tmp_path / name)
    (tmp_path / 'c.yaml').write_text('calibration\n')
    before = (tmp_path / 'dark.png').read_bytes()
    rc, err = _run([a.replace('{d}', str(tmp_path)) for a in argv], capsys)
    assert rc == 2 and 'would overwrite the input dark' in err, err
    assert (tmp_path / 'dark.png').read_bytes() == before


@pytest.mark.parametrize('raw_name', ['mosaic.png', 'view_j+0_i+0.png', 'frame.png'])
def test_a_folder_output_holding_an_input_is_refused_before_any_work(
        tmp_path, capsys, raw_name):
    (tmp_path / 'w').mkdir()
    raw, white = _frame(tmp_path / raw_name, 90), _frame(tmp_path / 'w' / 'white.png')
    before = raw.read_bytes()
    rc, err = _run(['decode', str(raw), '--white', str(white), '-o', str(tmp_path)], capsys)
    assert rc == 2, err
    assert f'holds the input raw {raw}' in err and 'another folder' in err, err
    assert raw.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([raw_name, 'w'])


def test_a_report_folder_holding_the_observation_table_is_refused(tmp_path, capsys):
    (tmp_path / 'r').mkdir()
    table = tmp_path / 'r' / 'obs.csv'
    table.write_text('pose,point,X,Y,Z,i,j,u,v\n')
    rc, err = _run(['calibrate', str(table), '-o', str(tmp_path / 'c.yaml'), '--report',
                    str(tmp_path / 'r')], capsys)
    assert rc == 2 and 'holds the input observations' in err, err


@pytest.mark.parametrize('argv, expected', [
    (['grid', '{d}/white.png', '-o', '{d}/g.yaml', '--plot', '{d}/p.out'], '.png, .pdf'),
    (['depth', '{d}/white.png', '--calibration', '{d}/c.yaml', '-o', '{d}/d.npy', '--png',
      '{d}/d.jpg'], '.png, .tif, .tiff'),
    (['refocus', '{d}/white.png', '--calibration', '{d}/c.yaml', '--distance', '0.4', '-o',
      '{d}/r'], '.png, .tif, .tiff'),
    (['depth', '{d}/white.png', '--calibration', '{d}/c.yaml', '-o', '{d}/d.yaml'], '.npy'),
], ids=['grid-plot', 'depth-png', 'refocus-o', 'depth-o'])
def test_an_output_suffix_its_writer_cannot_write_is_refused_before_any_work(
        tmp_path, capsys, argv, expected):
    _frame(tmp_path / 'white.png')
    (tmp_path / 'c.yaml').write_text('calibration\n')
    rc, err = _run([a.replace('{d}', str(tmp_path)) for a in argv], capsys)
    assert rc == 2, err
    assert f'expected a name ending in {expected}' in err and 'internal error' not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ['c.yaml', 'white.png']


def test_a_name_too_long_for_its_temporary_is_refused_before_any_work(tmp_path, capsys):
    long = tmp_path / ('x' * (MAX_NAME_BYTES + 10) + '.yaml')
    rc, err = _run(['calibrate', str(tmp_path / 'missing.csv'), '-o', str(long)], capsys)
    assert rc == 2, err
    assert f'a name of {MAX_NAME_BYTES + 15} bytes, expected at most {MAX_NAME_BYTES}' in err


def test_the_longest_accepted_name_can_be_written(tmp_path):
    path = tmp_path / ('y' * (MAX_NAME_BYTES - 5) + '.yaml')
    write_text_atomically(path, 'written\n')
    assert path.read_text() == 'written\n'
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_cut_off_png_is_refused_without_libpng_noise(tmp_path, capfd):
    whole = _frame(tmp_path / 'whole.png').read_bytes()
    cut = tmp_path / 'cut.png'
    cut.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(InvalidInputError, match=r'expected a complete PNG .*IEND.*cut off'):
        read_image(cut)
    assert 'libpng' not in capfd.readouterr().err


def test_a_key_given_twice_in_a_yaml_file_is_refused_naming_it(tmp_path):
    from lf_mpc_calib.io.yaml_file import load_yaml, read_yaml
    path = tmp_path / 'cal.yaml'
    path.write_text('format_version: 1\nintrinsics: {k_i: 5.0, k_j: 1}\nintrinsics: {k_i: 1}\n')
    with pytest.raises(InvalidInputError, match=r"cal.yaml: the key 'intrinsics' appears twice "
                                                r'\(lines 2 and 3\); expected each key once'):
        read_yaml(path, 'calibration file')
    with pytest.raises(InvalidInputError, match="the key 'k_i' appears twice"):
        load_yaml('a: {k_i: 1, k_i: 2}\n')
    merged = load_yaml('base: &b {x: 1, y: 2}\nover: {<<: *b, y: 3}\n')
    assert merged['over'] == {'x': 1, 'y': 3}, 'a merge key may still be overridden'


HEADER = 'pose,point,X,Y,Z,i,j,u,v\n'


def _table(path):
    rows = [f'{p},{k},{0.01 * (k % 2)},{0.01 * (k // 2)},0,{i},0,{10 + 3 * k + p + i},'
            f'{20 + 5 * k - p}\n' for p in range(3) for k in range(4) for i in (-1, 1)]
    path.write_text(HEADER + ''.join(rows))
    return path


@pytest.mark.parametrize('flags, named', [
    (['--setup', 'eye-to-hand'], '--setup'),
    (['--base-frame', 'world', '--tool-frame', 'flange'], '--base-frame, --tool-frame'),
])
def test_hand_eye_options_without_robot_poses_are_refused(tmp_path, capsys, flags, named):
    rc, err = _run(['calibrate', str(_table(tmp_path / 'o.csv')), '-o', str(tmp_path / 'c.yaml'),
                    *flags], capsys)
    assert rc == 2 and f'{named} set' in err and 'expected robot poses' in err, err
    assert not (tmp_path / 'c.yaml').exists()


def test_an_image_size_the_rays_lie_outside_is_refused(tmp_path, capsys):
    rc, err = _run(['calibrate', str(_table(tmp_path / 'o.csv')), '-o', str(tmp_path / 'c.yaml'),
                    '--image-size', '10', '10'], capsys)
    assert rc == 1, err
    assert '--image-size 10 10: 24 of 24 rays lie outside it (u 9.0 to 22.0, v 18.0 to 35.0' \
        in err, err
    assert not (tmp_path / 'c.yaml').exists()


def test_calibrate_raw_refuses_setup_without_robot_poses(tmp_path, capsys):
    (tmp_path / 'ds').mkdir()
    _frame(tmp_path / 'ds' / 'frame_000.png')
    _frame(tmp_path / 'ds' / 'white.png')
    rc, err = _run(['calibrate-raw', str(tmp_path / 'ds'), '--board', '6x5', '--square', '0.01',
                    '-o', str(tmp_path / 'c.yaml'), '--setup', 'eye-to-hand'], capsys)
    assert rc == 2 and '--setup sets up the hand-eye solve' in err, err
    assert not (tmp_path / 'c.yaml').exists()


def test_ctrl_c_while_the_subcommands_load_ends_with_130_and_no_traceback(monkeypatch, capsys):
    import lf_mpc_calib.cli as cli

    def loading(*_):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, 'build_parser', loading)
    assert cli.main(['calibrate', 'x.csv']) == 130
    assert 'Traceback' not in capsys.readouterr().err


def test_sigterm_mid_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    import os
    import signal
    import lf_mpc_calib.cli.export_calibration as export
    from lf_mpc_calib.io.atomic import open_atomically
    out = tmp_path / 'o.json'
    out.write_text('OLD\n')

    def run(args):
        with open_atomically(args.output) as f:
            f.write('half of it')
            os.kill(os.getpid(), signal.SIGTERM)
            f.write(' and the rest')
        return 0
    monkeypatch.setattr(export, 'run', run)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        main(['export-calibration', str(tmp_path / 'cal.yaml'), '-o', str(out)])
    assert stopped.value.code == 128 + signal.SIGTERM
    assert out.read_text() == 'OLD\n'
    assert [p.name for p in tmp_path.iterdir()] == ['o.json'], 'no temporary left'
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize('second', ['frame_000.png', './frame_000.png', 'link.png'])
def test_a_manifest_listing_a_frame_twice_is_refused(tmp_path, second):
    from lf_mpc_calib.io.raw_dataset import load_raw_folder
    _frame(tmp_path / 'frame_000.png')
    _frame(tmp_path / 'frame_001.png')
    _frame(tmp_path / 'white.png')
    (tmp_path / 'link.png').symlink_to(tmp_path / 'frame_000.png')
    (tmp_path / 'manifest.yaml').write_text(
        'format: lf_mpc_calib-raw-dataset\nformat_version: 1\n'
        'board: {cols: 6, rows: 5, square_m: 0.01}\nwhite: white.png\n'
        f'frames: [frame_000.png, frame_001.png, {second}]\n')
    with pytest.raises(InvalidInputError, match=rf'frames lists {second.split("/")[-1]} twice '
                                                r'\(entries 1 and 3\); expected each frame once'):
        load_raw_folder(tmp_path)


@pytest.mark.parametrize('argv, message', [
    (['demo', '--plan'], 'demo: error: --plan needs --ros'),
    (['bench', 'paper', '--variants', 'x;y', '-o', '{d}/b'],
     "bench: error: --variants got ['x;y']"),
])
def test_a_refusal_says_error_and_leaves_no_output_folder(tmp_path, capsys, argv, message):
    rc, err = _run([a.replace('{d}', str(tmp_path)) for a in argv], capsys)
    assert rc in (1, 2) and message in err, err
    assert list(tmp_path.iterdir()) == []


def test_random_poses_with_a_poses_file_is_refused(tmp_path, capsys):
    poses = tmp_path / 'p.yaml'
    poses.write_text('- {rotation_vector: [0, 0, 0], translation_m: [0, 0, 0.4]}\n')
    rc, err = _run(['simulate', '-o', str(tmp_path / 's'), '--scale', '0.12', '--random-poses',
                    '--poses-file', str(poses)], capsys)
    assert rc == 1 and '--random-poses and --poses-file both choose the poses' in err, err
    assert not (tmp_path / 's').exists()


@pytest.mark.parametrize('existing', [False, True])
def test_a_folder_of_files_is_written_whole_or_not_at_all(tmp_path, existing):
    from lf_mpc_calib.cli.paths import files_output
    out = tmp_path / 'views'
    if existing:
        out.mkdir()
        (out / 'notes.txt').write_text('the user\'s\n')
        (out / 'view_0.png').write_text('old view\n')
    before = sorted(p.name for p in tmp_path.rglob('*'))
    with pytest.raises(OSError, match='No space left'):
        with files_output(out) as tmp:
            (tmp / 'view_0.png').write_text('new view\n')
            (tmp / 'view_1.png').write_text('new view\n')
            raise OSError(28, 'No space left on device', str(tmp / 'view_2.png'))
    assert sorted(p.name for p in tmp_path.rglob('*')) == before
    if existing:
        assert (out / 'view_0.png').read_text() == 'old view\n'
    with files_output(out) as tmp:
        (tmp / 'view_0.png').write_text('new view\n')
    assert (out / 'view_0.png').read_text() == 'new view\n'
    assert sorted(p.name for p in out.iterdir()) == ['notes.txt'] * existing + ['view_0.png']


def test_a_full_disk_while_an_image_is_written_names_the_file_and_the_reason(
        tmp_path, monkeypatch, capfd):
    import errno
    import lf_mpc_calib.io.images as images
    old = tmp_path / 'v.png'
    old.write_bytes(b'the previous image')

    def full(*_, **__):
        raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(images, 'open', full, raising=False)
    with pytest.raises(OSError) as exc:
        images.write_image(old, np.zeros((8, 8), np.uint8))
    assert exc.value.filename == str(old) and exc.value.strerror == 'No space left on device'
    assert old.read_bytes() == b'the previous image'
    assert [p.name for p in tmp_path.iterdir()] == ['v.png']
    assert 'libpng' not in capfd.readouterr().err


@pytest.mark.parametrize('writer', ['write_atomically', 'open_atomically'])
def test_a_full_disk_is_named_with_the_output_even_when_the_writer_gives_no_reason(
        tmp_path, monkeypatch, writer):
    import os
    import types
    import lf_mpc_calib.io.atomic as atomic
    out = tmp_path / 'd.npy'
    out.write_text('OLD\n')
    monkeypatch.setattr(atomic.os, 'statvfs', lambda _: types.SimpleNamespace(f_bavail=0))

    def numpy_like(*_):
        raise OSError('11400 requested and 11232 written')   # np.save on a full disk
    with pytest.raises(OSError) as exc:
        if writer == 'write_atomically':
            atomic.write_atomically(out, numpy_like)
        else:
            with atomic.open_atomically(out, 'wb') as f:
                f.write(b'part')
                numpy_like()
    assert (exc.value.filename, exc.value.strerror) == (str(out), os.strerror(28))
    assert out.read_text() == 'OLD\n' and [p.name for p in tmp_path.iterdir()] == ['d.npy']


@pytest.mark.parametrize('values, got', [
    (np.inf, '1200 infinite and 0 zero or negative'),
    (-0.4, '0 infinite and 1200 zero or negative'),
    (np.nan, 'no value but NaN'),
])
def test_a_depth_truth_without_depths_is_refused_before_any_work(tmp_path, values, got):
    from lf_mpc_calib.cli.depth import load_truth
    np.save(tmp_path / 't.npy', np.full((30, 40), values))
    with pytest.raises(InvalidInputError, match=rf'expected depths in metres above 0 .*got {got}'):
        load_truth(tmp_path / 't.npy')


@pytest.mark.parametrize('text, message', [
    ('[' * 100000 + ']' * 100000, 'nested too deeply to be read as JSON'),
])
def test_a_calinfo_nested_too_deeply_is_refused(tmp_path, text, message):
    from lf_mpc_calib.io.lftoolbox import read_calinfo
    (tmp_path / 'c.json').write_text(text)
    with pytest.raises(InvalidInputError, match=message):
        read_calinfo(tmp_path / 'c.json')


def test_a_calinfo_lfsize_of_too_many_views_is_refused(tmp_path):
    import json
    from lf_mpc_calib.io.lftoolbox import MAX_VIEWS_PER_SIDE, parse_calinfo
    h = [[3.4e-4, 0, 0, 0, -1.4e-3], [0, 3.4e-4, 0, 0, -1.3e-3],
         [-8.5e-4, 0, 2.1e-3, 0, -0.105], [0, -8.4e-4, 0, 1.8e-3, -0.106], [0, 0, 0, 0, 1]]
    doc = {'GeneratedByInfo': {'VersionStr': 'v0.5.3'},
           'EstCamIntrinsicsH': h, 'EstCamDistortionV': [0, 0, 0, 0, 0],
           'CalOptions': {'LFSize': [100000, 100000, 100000, 100000, 3]}}
    with pytest.raises(InvalidInputError, match=rf'views Nj, Ni at most {MAX_VIEWS_PER_SIDE}'):
        parse_calinfo(json.loads(json.dumps(doc)))
