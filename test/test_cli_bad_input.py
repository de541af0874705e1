"""
Every ``lf-mpc-calib`` subcommand on hostile input: exit code 1 or 2 with a message, never a
traceback (issue 13 #5.4). The subcommands come from the parser itself, so a new one is covered
by the generic cases (alone, an unknown option, non-numbers for numbers, and every bad file in
every input slot) as soon as it is registered.
"""

import argparse
import contextlib
import io
import warnings

import numpy as np
import pytest

from lf_mpc_calib.cli import build_parser, main

HEADER = 'pose,point,X,Y,Z,i,j,u,v\n'
OUTPUT_DESTS = {'output', 'report', 'plot', 'centres', 'png', 'ply', 'save_observations'}


def _table(rows):
    return HEADER + ''.join(','.join(str(x) for x in r) + '\n' for r in rows)


def _valid_rows():
    rows = []
    for pose in range(3):
        for point, (x, y) in enumerate([(0, 0), (0.01, 0), (0, 0.01), (0.01, 0.01)]):
            for i in (-1, 1):
                rows.append([pose, point, x, y, 0, i, 0, 10.0 + 3 * x + pose + i,
                             20.0 + 5 * y - pose])
    return rows


def bad_inputs(root):
    """{name: path} of files and folders no subcommand may turn into a traceback."""
    root.mkdir(exist_ok=True)
    files = {'missing': root / 'missing.csv', 'folder': root / 'folder'}
    files['folder'].mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    binary = rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    for name, suffix in (('binary', '.png'), ('binary_csv', '.csv'), ('binary_yaml', '.yaml')):
        files[name] = root / f'{name}{suffix}'
        files[name].write_bytes(binary)
    files['utf16'] = root / 'utf16.csv'
    files['utf16'].write_text(_table(_valid_rows()), encoding='utf-16')
    files['empty'] = root / 'empty.yaml'
    files['empty'].write_text('')
    files['header_only'] = root / 'header_only.csv'
    files['header_only'].write_text(HEADER)
    files['truncated_png'] = root / 'truncated.png'
    files['truncated_png'].write_bytes(b'\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0')
    rows = _valid_rows()
    rows[5][7] = 1e300
    files['huge_u'] = root / 'huge_u.csv'
    files['huge_u'].write_text(_table(rows))
    for name, column, value in (('pose_id_2_63', 0, 2 ** 63), ('point_id_negative', 1, -1),
                                ('pose_id_fraction', 0, 0.5)):
        rows = _valid_rows()
        rows[3][column] = value
        files[name] = root / f'{name}.csv'
        files[name].write_text(_table(rows))
    files['lens_type_1e18'] = root / 'lens_type_1e18.csv'
    typed = [r + [1e18 if k == 2 else 0] for k, r in enumerate(_valid_rows())]
    files['lens_type_1e18'].write_text(
        HEADER.strip() + ',lens_type\n' + ''.join(','.join(map(str, r)) + '\n' for r in typed))
    files['object_npy'] = root / 'object.npy'
    np.save(files['object_npy'], np.array([{'a': 1}], dtype=object), allow_pickle=True)
    files['duplicated'] = root / 'duplicated.csv'
    files['duplicated'].write_text(_table(_valid_rows() + _valid_rows()[:2]))
    bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for prev, name in zip('abcdefgh', 'bcdefghi'):
        bomb += f'{name}: &{name} [' + ','.join([f'*{prev}'] * 9) + ']\n'
    files['alias_bomb'] = root / 'bomb.yaml'
    files['alias_bomb'].write_text(bomb)
    for name, manifest in (('manifest_binary', binary),
                           ('manifest_truncated', b'format: lf_mpc_calib-raw-dataset\nboard: '
                                                  b'{cols: 6, rows: 5, square: 0.0\nframes: [')):
        folder = root / name
        folder.mkdir(exist_ok=True)
        (folder / 'manifest.yaml').write_bytes(manifest)
        (folder / 'frame_000.png').write_bytes(binary)
        files[name] = folder
    return files


def subcommands():
    """{name: subparser} of every registered subcommand."""
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _slots(sub):
    """(input slots, output slots, required choice arguments) of a subparser."""
    inputs, outputs, choices = [], [], []
    for a in sub._actions:
        if a.dest == 'help' or not (a.required or not a.option_strings):
            continue
        if a.choices:
            choices.append(a)
        elif a.dest in OUTPUT_DESTS:
            outputs.append(a)
        else:
            inputs.append(a)
    return inputs, outputs, choices


def _argv(name, sub, value, out):
    """argv with every input slot holding ``value`` and every output slot ``out``."""
    inputs, outputs, choices = _slots(sub)
    positional, options = [], []
    for a in sub._actions:
        if a in choices:
            arg = [sorted(a.choices)[0]]
        elif a in inputs:
            arg = [str(value)]
        elif a in outputs:
            arg = [str(out)]
        else:
            continue
        if a.option_strings:
            options += [a.option_strings[0], *arg]
        else:
            positional += arg
    return [name, *positional, *options]


def cases(root):
    """(id, argv) of the hostile calls, for every subcommand."""
    files = bad_inputs(root)
    out = root / 'out' / 'result.yaml'
    found = []
    for name, sub in subcommands().items():
        inputs, outputs, choices = _slots(sub)
        if inputs or outputs or choices:
            found.append((f'{name}-alone', [name]))
        found.append((f'{name}-unknown-option', [name, '--no-such-option']))
        base = _argv(name, sub, files['missing'], out) if inputs else None
        for a in sub._actions:
            if a.type in (int, float) and a.option_strings and base is not None:
                found.append((f'{name}-{a.dest}-not-a-number',
                              base + [a.option_strings[0], 'many']))
        if inputs:
            for bad, path in files.items():
                found.append((f'{name}-{bad}', _argv(name, sub, path, out)))
    # subcommands without an input file: their own files and numbers
    found += [
        ('simulate-poses-file-binary', ['simulate', '-o', str(out.parent / 's'),
                                        '--poses-file', str(files['binary_yaml'])]),
        ('simulate-poses-file-bomb', ['simulate', '-o', str(out.parent / 's'),
                                      '--poses-file', str(files['alias_bomb'])]),
        ('simulate-scale-nan', ['simulate', '-o', str(out.parent / 's'), '--scale', 'nan']),
        ('simulate-poses-negative', ['simulate', '-o', str(out.parent / 's'), '--poses', '-3']),
        ('simulate-max-tilt-nan', ['simulate', '-o', str(out.parent / 's'), '--random-poses',
                                   '--max-tilt', 'nan']),
        ('simulate-seed-negative', ['simulate', '-o', str(out.parent / 's'), '--seed', '-1']),
        ('depth-truth-csv', ['depth', str(files['missing']), '--calibration',
                             str(files['missing']), '-o', str(out.parent / 'd.npy'),
                             '--truth', str(files['huge_u'])]),
        ('depth-truth-object-npy', ['depth', str(files['missing']), '--calibration',
                                    str(files['missing']), '-o', str(out.parent / 'd.npy'),
                                    '--truth', str(files['object_npy'])]),
        ('calibrate-image-size-zero', ['calibrate', str(files['duplicated']), '--image-size',
                                       '0', '0']),
        ('demo-scale-nan', ['demo', '--scale', 'nan']),
        ('demo-poses-zero', ['demo', '--poses', '0']),
        ('calibrate-robot-poses-binary', ['calibrate', str(files['duplicated']),
                                          '--robot-poses', str(files['binary_yaml'])]),
        ('decode-grid-bomb', ['decode', str(files['binary']), '--white',
                              str(files['binary']), '--grid', str(files['alias_bomb']),
                              '-o', str(out.parent / 'd')]),
    ]
    return found


CASES = cases(__import__('pathlib').Path(__import__('tempfile').mkdtemp(prefix='cli_bad_')))


def test_every_subcommand_is_covered():
    covered = {argv[0] for _, argv in CASES}
    assert covered == set(subcommands())


@pytest.mark.parametrize('argv', [argv for _, argv in CASES], ids=[i for i, _ in CASES])
def test_bad_input_gives_a_message_not_a_traceback(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter('error')         # a warning is noise before the message
        try:
            rc = main(argv)
        except SystemExit as exc:              # argparse: usage errors
            rc = exc.code
    text = err.getvalue()
    assert rc in (1, 2), (rc, text)
    assert 'Traceback' not in text and 'internal error' not in text, text
    assert 'error' in text, text
    assert len(text) < 5000, f'{len(text)} characters of error output'


# --- issue 26: no output may destroy an input; a failed run changes nothing ---------------

def _run(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    return rc, err.getvalue()


def _input_files(root):
    """{dest: path} of an existing file (a data-set folder for ``dataset``) for every input."""
    from lf_mpc_calib.cli.paths import INPUT_DESTS
    root.mkdir(parents=True, exist_ok=True)
    made = {}
    for dest in INPUT_DESTS:
        if dest == 'dataset':
            folder = root / 'ds'
            folder.mkdir(exist_ok=True)
            (folder / 'manifest.yaml').write_text('format: lf_mpc_calib-raw-dataset\n')
            (folder / 'frame_000.png').write_bytes(b'frame')
            made[dest] = folder
        else:
            made[dest] = root / f'{dest}.dat'
            made[dest].write_text(f'the user\'s {dest}\n')
    return made


def _snapshot(root):
    return {p: p.read_bytes() for p in sorted(root.rglob('*')) if p.is_file()}


def collision_cases():
    """(id, subcommand, output dest, input dest) for every subcommand x output x input."""
    from lf_mpc_calib.cli.paths import INPUT_DESTS, OUTPUT_DESTS
    found = []
    for name, sub in subcommands().items():
        dests = {a.dest for a in sub._actions}
        for out in (d for d in OUTPUT_DESTS if d in dests):
            for inp in (d for d in INPUT_DESTS if d in dests):
                found.append((f'{name}-{out}-onto-{inp}', name, out, inp))
    return found


def _collision_argv(sub_name, out_dest, in_dest, files, root, target):
    """argv of ``sub_name`` with every input given and ``out_dest`` set to ``target``."""
    sub = subcommands()[sub_name]
    positional, options = [], []
    for a in sub._actions:
        if a.dest == 'help':
            continue
        if a.dest == out_dest:
            value = [str(target)]
        elif a.dest in files:
            value = [str(files[a.dest])]
        elif a.dest in OUTPUT_DESTS and (a.required or not a.option_strings):
            value = [str(root / 'elsewhere' / 'x.npy')]
        elif a.required or not a.option_strings:
            value = [sorted(a.choices)[0]] if a.choices else ['1']
        else:
            continue
        if a.option_strings:
            options += [a.option_strings[0], *value]
        else:
            positional += value
    return [sub_name, *positional, *options]


COLLISIONS = collision_cases()


@pytest.mark.parametrize('sub_name,out_dest,in_dest', [c[1:] for c in COLLISIONS],
                         ids=[c[0] for c in COLLISIONS])
@pytest.mark.parametrize('spelling', ['same', 'dotdot', 'symlink'])
def test_an_output_onto_an_input_is_refused_before_any_work(
        tmp_path, sub_name, out_dest, in_dest, spelling):
    files = _input_files(tmp_path / 'in')
    target = files[in_dest]
    if in_dest == 'dataset' and out_dest not in ('report',) and not (
            out_dest == 'output' and sub_name in ('decode', 'simulate', 'demo')):
        target = target / 'manifest.yaml'       # a file of the data set
    if spelling == 'dotdot':
        target = target.parent / '..' / target.parent.name / target.name
    elif spelling == 'symlink':
        link = tmp_path / 'link'
        link.symlink_to(target)
        target = link
    before = _snapshot(tmp_path / 'in')
    rc, err = _run(_collision_argv(sub_name, out_dest, in_dest, files, tmp_path, target))
    assert rc == 2, err
    assert 'would overwrite the input' in err and str(target) in err, err
    assert _snapshot(tmp_path / 'in') == before


def test_the_issue_cases_are_refused_naming_both_paths(tmp_path):
    files = _input_files(tmp_path)
    obs, white, ds = files['observations'], files['white'], files['dataset']
    cal, raw = files['calibration'], files['raw']
    before = _snapshot(tmp_path)
    for argv, named in (
            (['calibrate', str(obs), '-o', str(obs)], obs),
            (['grid', str(white), '-o', str(white)], white),
            (['depth', str(raw), '--calibration', str(cal), '--white', str(white),
              '-o', str(tmp_path / 'd.npy'), '--png', str(white)], white),
            (['calibrate-raw', str(ds), '-o', str(ds / 'manifest.yaml')], ds),
            (['calibrate-raw', str(ds), '-o', str(ds / 'frame_000.png')], ds),
            (['refocus', str(raw), '--calibration', str(cal), '--distance', '1',
              '-o', str(raw)], raw),
            (['depth', str(raw), '--calibration', str(cal), '-o', str(tmp_path / 'd.npy'),
              '--ply', str(cal)], cal)):
        rc, err = _run(argv)
        assert rc == 2 and str(named) in err, (argv, err)
    assert _snapshot(tmp_path) == before


def test_two_outputs_on_one_file_are_refused(tmp_path):
    files = _input_files(tmp_path)
    rc, err = _run(['calibrate', str(files['observations']), '-o', str(tmp_path / 'c.yaml'),
                    '--save-observations', str(tmp_path / 'c.yaml')])
    assert rc == 2 and 'same file' in err, err


@pytest.mark.parametrize('report', ['existing_file', 'under_a_file'])
def test_an_unusable_report_folder_leaves_the_calibration_untouched(tmp_path, report):
    files = _input_files(tmp_path)
    old = tmp_path / 'calibration.yaml'
    old.write_text('the previous calibration\n')
    blocker = tmp_path / 'blocker'
    blocker.write_text('a file')
    folder = blocker if report == 'existing_file' else blocker / 'report'
    rc, err = _run(['calibrate', str(files['observations']), '-o', str(old),
                    '--report', str(folder)])
    assert rc == 2 and str(blocker) in err, err
    assert old.read_text() == 'the previous calibration\n'


@pytest.mark.parametrize('dest,kind', [('output', 'a folder'), ('plot', 'a folder')])
def test_a_folder_where_a_file_is_expected_is_refused(tmp_path, dest, kind):
    files = _input_files(tmp_path)
    (tmp_path / 'dir').mkdir()
    argv = ['grid', str(files['white']), '-o', str(tmp_path / 'g.yaml')]
    argv += ['-o' if dest == 'output' else '--plot', str(tmp_path / 'dir')]
    rc, err = _run(argv)
    assert rc == 2 and 'existing folder' in err, err


def test_an_unwritable_output_folder_is_refused(tmp_path):
    import os
    files = _input_files(tmp_path)
    locked = tmp_path / 'locked'
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip('running as a user who may write anywhere')
        rc, err = _run(['grid', str(files['white']), '-o', str(locked / 'g.yaml')])
        assert rc == 2 and 'not writable' in err, err
    finally:
        locked.chmod(0o700)


def test_image_size_out_of_range_is_refused(tmp_path):
    files = _input_files(tmp_path)
    for size in (['0', '0'], ['-5', '-5'], ['1000000000000', '1']):
        rc, err = _run(['calibrate', str(files['observations']), '-o',
                        str(tmp_path / 'c.yaml'), '--image-size', *size])
        assert rc in (1, 2) and '--image-size' in err, (size, err)
        assert not (tmp_path / 'c.yaml').exists()


class _DiskFull:
    """A file object that writes half of what it is given, then fails as a full disk would."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        self.f.write(data[:len(data) // 2])
        self.f.flush()
        raise OSError(28, 'No space left on device')

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def _fill_disk_midway(monkeypatch):
    import builtins
    from lf_mpc_calib.io import atomic
    real_open = builtins.open
    monkeypatch.setattr(atomic, 'open', lambda *a, **k: _DiskFull(real_open(*a, **k)),
                        raising=False)


def test_a_write_error_midway_leaves_the_previous_file_and_no_temporary(tmp_path, monkeypatch):
    from lf_mpc_calib.io.depth_files import write_ply
    from lf_mpc_calib.io.atomic import write_text_atomically as write_text
    old = tmp_path / 'result.yaml'
    old.write_text('the previous result\n')
    ply = tmp_path / 'cloud.ply'
    ply.write_bytes(b'the previous cloud')
    _fill_disk_midway(monkeypatch)
    with pytest.raises(OSError, match='No space'):
        write_text(old, 'x' * 10000)
    with pytest.raises(OSError, match='No space'):
        write_ply(ply, np.zeros((100, 3)))
    assert old.read_text() == 'the previous result\n'
    assert ply.read_bytes() == b'the previous cloud'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['cloud.ply', 'result.yaml']


def test_calibrate_with_a_full_disk_keeps_the_old_calibration(tmp_path, monkeypatch):
    """End to end: the calibration is computed, its write fails midway, exit 1, old file kept."""
    from lf_mpc_calib.io.observation_table import write_observations
    from lf_mpc_calib.simulation.observations import paper_scene
    table = tmp_path / 'obs.csv'
    write_observations(table, paper_scene(n_poses=3, n_views=3, noise_px=0.0,
                                          rng=np.random.default_rng(1))[3])
    old = tmp_path / 'calibration.yaml'
    old.write_text('the previous calibration\n')
    _fill_disk_midway(monkeypatch)
    rc, err = _run(['calibrate', str(table), '-o', str(old), '--quiet', '--no-distortion'])
    assert rc == 1 and 'No space left' in err, err
    assert old.read_text() == 'the previous calibration\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['calibration.yaml', 'obs.csv']


def test_image_write_failure_keeps_the_previous_image(tmp_path, monkeypatch):
    from lf_mpc_calib.io import images
    png = tmp_path / 'view.png'
    png.write_bytes(b'the previous image')

    def half_then_fail(path, mode):         # the encoded bytes' write stops midway
        with open(path, mode) as f:
            f.write(b'\x89PNG half')
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(images, 'open', half_then_fail, raising=False)
    with pytest.raises(OSError, match='No space left on device'):
        images.write_image(png, np.zeros((4, 4), np.uint8))
    monkeypatch.undo()
    assert png.read_bytes() == b'the previous image'
    assert [p.name for p in tmp_path.iterdir()] == ['view.png']


# --- issue 26 part 2: bounded work -----------------------------------------------------------

@pytest.fixture(scope='module')
def small_camera():
    from lf_mpc_calib.lenslet.decode import Decoder
    from lf_mpc_calib.simulation.optics import preset
    camera = preset('lytro', scale=0.3)
    grid = camera.lenslet_grid()
    return dict(grid=grid, model=camera.ground_truth_model(grid), decoder=Decoder(grid))


@pytest.mark.parametrize('views', [(99, 99), (9999, 9999), (99, 1)])
def test_views_past_the_micro_image_are_refused_with_the_bound(small_camera, views):
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.lenslet.decode import Decoder, max_views
    grid = small_camera['grid']
    most = max_views(grid)
    assert most <= grid.pitch + 2
    with pytest.raises(InvalidInputError, match=f'at most {most} a side'):
        Decoder(grid, views=views)


def test_depth_planes_past_the_cap_are_refused_with_the_bound(small_camera):
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.measurement.depth import DepthEstimator, MAX_DEPTH_PLANES
    with pytest.raises(InvalidInputError, match=f'{MAX_DEPTH_PLANES} allowed'):
        DepthEstimator.for_decoder(small_camera['model'], small_camera['decoder'],
                                   hypotheses=MAX_DEPTH_PLANES + 1)


@pytest.mark.parametrize('depth_range', [(1e-9, 1e9), (1e-6, 1.0)])
def test_depths_past_the_views_overlap_are_refused_with_the_camera_bound(small_camera,
                                                                         depth_range):
    """The nearest depth is where the outermost view moves by its whole width (from k_i, k_u,
    k_3 and the view size): the message gives it, and it is where the shift is that width."""
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.measurement.depth import (DepthEstimator, inverse_depth_limits,
                                                view_shifts)
    model, decoder = small_camera['model'], small_camera['decoder']
    jj, ii = np.nonzero(decoder.valid)                  # the views the sweep uses
    ij = np.column_stack([np.asarray(decoder.i_values)[ii], np.asarray(decoder.j_values)[jj]])
    rows, cols = decoder.view_shape
    lo, hi = inverse_depth_limits(model, ij, decoder.view_shape)
    edge = np.abs(view_shifts(model, ij, [hi])[0])
    assert max(edge[:, 0].max() / cols, edge[:, 1].max() / rows) == pytest.approx(1.0)
    with pytest.raises(InvalidInputError, match=f'overlap only from {1 / hi:.3g} m'):
        DepthEstimator.for_decoder(model, decoder, depth_range=depth_range)


def test_memory_past_half_the_machine_is_refused_with_the_figure():
    import os
    from lf_mpc_calib.errors import InvalidInputError, check_memory
    total = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
    check_memory(total / 4, 'a quarter')
    with pytest.raises(InvalidInputError, match='more than half'):
        check_memory(total, 'the whole machine')


@pytest.mark.parametrize('bad,column', [('pose_id_2_63', 'pose'), ('point_id_negative', 'point'),
                                        ('pose_id_fraction', 'pose'),
                                        ('lens_type_1e18', 'lens_type')])
def test_ids_out_of_range_are_refused_naming_the_column(tmp_path, bad, column):
    files = bad_inputs(tmp_path / 'files')
    rc, err = _run(['calibrate', str(files[bad]), '-o', str(tmp_path / 'c.yaml'), '--quiet'])
    assert rc == 1 and f'column {column}: expected a whole number' in err, err
    assert not (tmp_path / 'c.yaml').exists()


# --- issue 26 parts 3 and 4: every loader checks types and ranges; no silent nonsense ---------
# Each case: (id, argv with {names} of the files below, what the one-line message must name).
# The files are a tiny simulated camera (frame, white image, grid, calibration) with one key
# of one file set to a hostile value; every other input is valid, so the refusal is the
# value's own and not a missing file's.

INF, NAN = float('inf'), float('nan')
DECODE = ['decode', '{frame}', '--white', '{white}', '-o', '{out}/views', '--grid']
DEPTH = ['depth', '{frame}', '--white', '{white}', '-o', '{out}/d.npy', '--calibration']
PLAN = ['plan', '-o', '{out}/p', '--preset', 'lytro', '--target-k-sigma', '1',
        '--target-pp-sigma', '2']
RAW = ['calibrate-raw', '{raw_folder}', '-o', '{out}/c.yaml', '--quiet']
REFOCUS = ['refocus', '{frame}', '--white', '{white}', '-o', '{out}/r.png', '--distance', '0.3',
           '--calibration']

GRID_VALUES = {           # lenslet_grid key: hostile values ('deformation.KEY': of a deformation)
    'pitch': [5e-324, -3.0, 1e308, 'abc', None], 'row_spacing': [5e-324, INF],
    'hex_parity': [INF, NAN, 'one', 2], 'image_size': [INF, [INF, 5], 'big', [0, 0]],
    'rotation': [NAN, 1e300], 'origin': ['x', [1e300, 0.0]], 'shape': [[NAN, 1]],
    'lattice': [5], 'deformation.degree': [INF, NAN, 'two', 1e9],
    'deformation.scale': [[INF, 1.0]], 'deformation.centre': [[NAN, 1.0]],
    'deformation.coef': [[[1e300, 0.0], [0.0, 0.0], [0.0, 0.0]]]}
CALIBRATION_VALUES = {    # section.key of the calibration file: hostile values
    'intrinsics.k_i': [1e-300, True, 5.0], 'intrinsics.k_j': [5.0],
    'intrinsics.k_u': [-1e300, 1e-300], 'intrinsics.k_v': [INF], 'intrinsics.u_0': [1e6],
    'intrinsics.v_0': ['0.3'], 'distortion.k_1': [1e300], 'distortion.k_2': [NAN],
    'distortion.k_3': [-1e10], 'image_size': [[0, 0], [-5, -5], [10 ** 12, 1], 'x'],
    'poses': [[{'rotation_vector': [NAN, 0, 0], 'translation_m': [0, 0, 1]}]],
    'intrinsics': [[1, 2]]}
LYTRO_VALUES = {          # metadata path of a Lytro white image's sidecar: hostile values
    'image': [[1, 2], 'big'], 'image.mosaic.tile': [',:,', [1]], 'image.width': [NAN, 1e300, 'x'],
    'camera': [[1]], 'devices': ['s'], 'devices.lens.zoomStep': [INF],
    'image.pixelFormat.black.gr': ['x'], 'image.pixelFormat': [[1]],
    'image.pixelPacking': ['p'], 'devices.shutter.frameExposureDuration': [NAN]}
MESSAGE_NAMES = {'deformation.coef': 'deformation moves', 'intrinsics.k_i': 'k_i',
                 'intrinsics.k_u': 'k_u', 'distortion.k_3': 'k_3 = -1e+10',
                 'distortion.k_1': 'k_1 = 1e+300', 'intrinsics.u_0': 'u_0 = 1e+06',
                 'poses': 'poses', 'image.width': 'image', 'image': 'metadata image',
                 'image.mosaic.tile': 'tile', 'image.pixelFormat.black.gr': 'black.gr',
                 'devices.shutter.frameExposureDuration': 'exposure'}


def _name(key, value):
    import re
    return re.sub(r'[^\w.=+,\[\]-]', '', f'{key}={value!r}')[:40]


def _fill(arg, files):
    """``arg`` with a leading ``{name}`` replaced by the path of ``files[name]``."""
    if not arg.startswith('{'):
        return arg
    key, rest = arg[1:].split('}', 1)
    return str(files[key]) + rest


def value_cases():
    """(id, argv template, the text the message must hold) of every hostile value."""
    found = []
    for key, values in GRID_VALUES.items():
        for v in values:
            name = _name(key, v)
            found.append((f'decode-grid-{name}', DECODE + [f'{{grid {name}}}'],
                          MESSAGE_NAMES.get(key, key.split('.')[-1])))
    for key, values in CALIBRATION_VALUES.items():
        for v in values:
            name = _name(key, v)
            for cmd in (DEPTH, REFOCUS):
                found.append((f'{cmd[0]}-calibration-{name}', cmd + [f'{{cal {name}}}'],
                              MESSAGE_NAMES.get(key, key.split('.')[-1])))
    for key, values in LYTRO_VALUES.items():
        for v in values:
            name = _name(key, v)
            found.append((f'grid-lytro-{name}', ['grid', f'{{lytro {name}}}', '-o',
                                                 '{out}/g.yaml'],
                          MESSAGE_NAMES.get(key, key.split('.')[-1])))
    cal = '{cal}'
    found += [
        ('refocus-distance-1e-9', REFOCUS[:-3] + ['--distance', '1e-9', '--calibration', cal],
         'overlap only from'),
        ('depth-near-1e-6', DEPTH + [cal, '--near', '1e-6', '--far', '1'], 'overlap only from'),
        ('depth-near-nan', DEPTH + [cal, '--near', 'nan', '--far', '1'], '--near'),
        ('refocus-distance-nan', REFOCUS[:-3] + ['--distance', 'nan', '--calibration', cal],
         '--distance'),
        ('depth-truth-csv', DEPTH + [cal, '--truth', '{table}'], '--truth'),
        ('depth-truth-object-npy', DEPTH + [cal, '--truth', '{object_npy}'], '--truth'),
        ('depth-truth-int-3d-npy', DEPTH + [cal, '--truth', '{int_npy}'], '--truth'),
        ('simulate-max-tilt-nan', ['simulate', '-o', '{out}/s', '--random-poses',
                                   '--max-tilt', 'nan'], '--max-tilt'),
        ('simulate-seed-negative', ['simulate', '-o', '{out}/s', '--seed', '-1'], '--seed'),
        ('calibrate-every-u-v-equal', ['calibrate', '{flat_uv}', '-o', '{out}/c.yaml'],
         'every ray has u'),
        ('calibrate-every-v-equal', ['calibrate', '{flat_v}', '-o', '{out}/c.yaml'],
         'every ray has v'),
        ('calibrate-lens-type-1e18', ['calibrate', '{lens_type_1e18}', '-o', '{out}/c.yaml'],
         'column lens_type'),
        ('calibrate-point-id-2-63', ['calibrate', '{point_id_2_63}', '-o', '{out}/c.yaml'],
         'column point'),
        ('calibrate-pose-id-1e300', ['calibrate', '{pose_id_1e300}', '-o', '{out}/c.yaml'],
         'column pose'),
        ('calibrate-image-size-negative', ['calibrate', '{table}', '-o', '{out}/c.yaml',
                                           '--image-size', '-5', '-5'], '--image-size'),
        ('calibrate-image-size-1e12', ['calibrate', '{table}', '-o', '{out}/c.yaml',
                                       '--image-size', '1000000000000', '1'], '--image-size'),
        ('decode-grid-empty', DECODE + ['{empty}'], 'grid file'),
        ('decode-grid-list', DECODE + ['{grid_list}'], 'lenslet_grid must be a mapping'),
        # beyond the issue's list: images, options and the other loaders
        ('grid-png-claiming-60000x60000', ['grid', '{png_bomb}', '-o', '{out}/g.yaml'],
         'header claims 60000 x 60000 pixels'),
        ('depth-white-png-claiming-60000x60000', ['depth', '{frame}', '--white', '{png_bomb}',
                                                  '-o', '{out}/d.npy', '--calibration', cal],
         'header claims 60000 x 60000 pixels'),
        ('depth-window-1e9', DEPTH + [cal, '--window', '1000000001'], '--window'),
        ('depth-view-step-1e20', DEPTH + [cal, '--view-step', '1' + '0' * 20], '--view-step'),
        ('depth-min-confidence-nan', DEPTH + [cal, '--min-confidence', 'nan'], '--min-confidence'),
        ('refocus-views-1e20', REFOCUS + [cal, '--views', '1' + '0' * 20 + 'x3'], 'view count'),
        ('simulate-poses-1e9', ['simulate', '-o', '{out}/s', '--poses', '1000000000'],
         '--poses'),
        ('simulate-samples-0', ['simulate', '-o', '{out}/s', '--samples', '0'], '--samples'),
        ('bench-trials-negative', ['bench', 'paper', '-o', '{out}/b', '--trials', '-5'],
         '--trials'),
        ('bench-poses-falling', ['bench', 'paper', '-o', '{out}/b', '--poses', '8-2'],
         'rising range'),
        ('bench-views-1e30', ['bench', 'paper', '-o', '{out}/b', '--views', '1' + '0' * 30],
         '--views'),
        ('bench-noise-distances-two', ['bench', 'paper', '-o', '{out}/b',
                                       '--noise-distances', '1,2'], '3 numbers'),
        ('plan-seed-negative', ['plan', '-o', '{out}/p', '--target-k-sigma', '1',
                                '--target-pp-sigma', '1', '--seed', '-1'], '--seed'),
        ('calibrate-max-iterations-0', ['calibrate', '{table}', '-o', '{out}/c.yaml',
                                        '--max-iterations', '0'], '--max-iterations'),
        ('demo-live-inf', ['demo', '--live', 'inf'], '--live'),
        ('simulate-samples-1e9', ['simulate', '-o', '{out}/s', '--samples', '1000000000'],
         '--samples'),
        ('simulate-noise-nan', ['simulate', '-o', '{out}/s', '--noise', 'nan'], '--noise'),
        ('simulate-noise-1e300', ['simulate', '-o', '{out}/s', '--noise', '1e300'], '--noise'),
        ('simulate-square-nan', ['simulate', '-o', '{out}/s', '--square', 'nan'], '--square'),
        ('simulate-square-negative', ['simulate', '-o', '{out}/s', '--square', '-0.01'],
         '--square'),
        ('simulate-board-100000x100000', ['simulate', '-o', '{out}/s', '--board',
                                          '100000x100000'], 'inner corners from 2 to'),
        ('simulate-seed-2-64', ['simulate', '-o', '{out}/s', '--seed', str(2 ** 64)], '--seed'),
        ('simulate-poses-file-nan', ['simulate', '-o', '{out}/s', '--poses-file',
                                     '{poses_nan}'], 'must be finite'),
        ('simulate-poses-file-board-behind', ['simulate', '-o', '{out}/s', '--poses-file',
                                              '{poses_behind}'], 'in front of the camera'),
        ('demo-poses-1e9', ['demo', '--poses', '1000000000'], '--poses'),
        ('plan-max-captures-1e12', PLAN + ['--max-captures', '1000000000000'],
         '--max-captures'),
        ('plan-seed-negative', PLAN + ['--seed', '-1'], '--seed'),
        ('plan-target-pp-sigma-inf', PLAN + ['--target-pp-sigma', 'inf'], '--target-pp-sigma'),
        ('plan-corner-noise-nan', PLAN + ['--corner-noise', 'nan'], '--corner-noise'),
        ('calibrate-raw-square-1e300', RAW + ['--board', '6x5', '--square', '1e300'], 'square'),
        ('calibrate-raw-board-100000x100000', RAW + ['--board', '100000x100000', '--square',
                                                     '0.01'], 'inner corners from 2 to'),
        ('calibrate-raw-lens-types-1e9', RAW + ['--board', '6x5', '--square', '0.01',
                                                '--lens-types', '1000000000'], '--lens-types'),
        ('calibrate-robot-poses-1e300-m', ['calibrate', '{paper_table}', '--robot-poses',
                                           '{robot_huge}', '-o', '{out}/c.yaml'],
         'robot poses reach 1e+300 m'),
        ('calibrate-robot-poses-string', ['calibrate', '{paper_table}', '--robot-poses',
                                          '{robot_string}', '-o', '{out}/c.yaml'],
         'must hold numbers'),
        ('calibrate-u-spans-1e-12-px', ['calibrate', '{near_flat_u}', '-o', '{out}/c.yaml'],
         'every ray has u'),
        ('calibrate-views-on-one-line', ['calibrate', '{table}', '-o', '{out}/c.yaml'],
         'closed form'),
    ]
    for key, value in (('cols', NAN), ('rows', 1e300), ('square_m', INF), ('square_m', 'x'),
                       ('square_m', 1e300)):
        found.append((f'calibrate-raw-manifest-board-{_name(key, value)}',
                      RAW[:1] + [f'{{manifest board {_name(key, value)}}}'] + RAW[2:],
                      'square' if key == 'square_m' else key))
    found += [('calibrate-raw-manifest-frames-5', RAW[:1] + ['{manifest frames 5}'] + RAW[2:],
               'frames must be a list'),
              ('calibrate-raw-manifest-board-5', RAW[:1] + ['{manifest board 5}'] + RAW[2:],
               'board must be a mapping'),
              ('calibrate-raw-manifest-version-99',
               RAW[:1] + ['{manifest format_version 99}'] + RAW[2:], 'format_version 99'),
              ('calibrate-raw-manifest-other-format',
               RAW[:1] + ['{manifest format other}'] + RAW[2:], "got 'someone-else'")]
    return found


VALUE_CASES = value_cases()


def _set(doc, dotted, value):
    *path, last = dotted.split('.')
    for key in path:
        doc = doc.setdefault(key, {})
    doc[last] = value


@pytest.fixture(scope='module')
def hostile_files(tmp_path_factory):
    """{name: path} of the tiny camera's files and of each hostile variant (VALUE_CASES)."""
    import copy
    import yaml
    from lytro_files import illum_metadata, private, write_raw
    root = tmp_path_factory.mktemp('hostile')
    cam = root / 'camera'
    assert main(['simulate', '--scene', 'planes', '--scale', '0.12', '--poses', '1', '--quiet',
                 '-o', str(cam)]) == 0
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(['grid', str(cam / 'white.png'), '-o', str(cam / 'grid.yaml')]) == 0
    files = {'frame': cam / 'frame_000.png', 'white': cam / 'white.png',
             'cal': cam / 'ground_truth.yaml', 'out': root / 'out'}
    files.update(bad_inputs(root / 'tables'))
    grid_doc = yaml.safe_load((cam / 'grid.yaml').read_text())
    for key, values in GRID_VALUES.items():
        for v in values:
            doc = copy.deepcopy(grid_doc)
            if key.startswith('deformation.'):
                doc['lenslet_grid']['deformation'] = {
                    'degree': 1, 'centre': [1.0, 1.0], 'scale': [100.0, 100.0],
                    'coef': [[0.0, 0.0]] * 3}
            _set(doc['lenslet_grid'], key, v)
            files[f'grid {_name(key, v)}'] = path = root / f'grid_{len(files)}.yaml'
            path.write_text(yaml.safe_dump(doc))
    cal_doc = yaml.safe_load(files['cal'].read_text())
    for key, values in CALIBRATION_VALUES.items():
        for v in values:
            doc = copy.deepcopy(cal_doc)
            _set(doc, key, v)
            files[f'cal {_name(key, v)}'] = path = root / f'cal_{len(files)}.yaml'
            path.write_text(yaml.safe_dump(doc))
    codes = np.full((20, 40), 500, np.uint16)
    for key, values in LYTRO_VALUES.items():
        for v in values:
            meta = illum_metadata(40, 20)
            _set(meta, key, v)
            folder = root / f'lytro_{len(files)}'
            folder.mkdir()
            files[f'lytro {_name(key, v)}'] = write_raw(folder / 'white.raw', codes, 10, meta,
                                                        private('SN1'))
    rows = _valid_rows()
    files['table'] = root / 'table.csv'
    files['table'].write_text(_table(rows))
    for name, columns in (('flat_uv', (7, 8)), ('flat_v', (8,))):
        flat = [list(r) for r in rows]
        for r in flat:
            for c in columns:
                r[c] = 12.5
        files[name] = root / f'{name}.csv'
        files[name].write_text(_table(flat))
    for name, column, value in (('point_id_2_63', 1, 2 ** 63), ('pose_id_1e300', 0, 1e300)):
        bad = [list(r) for r in rows]
        bad[4][column] = value
        files[name] = root / f'{name}.csv'
        files[name].write_text(_table(bad))
    files['int_npy'] = root / 'int.npy'
    np.save(files['int_npy'], np.zeros((2, 3, 4), np.int32))
    files['empty'] = root / 'empty.yaml'
    files['empty'].write_text('')
    files['grid_list'] = root / 'grid_list.yaml'
    files['grid_list'].write_text('lenslet_grid: [1, 2]\n')
    _more_hostile_files(root, files)
    return files


def _png_claiming(path, width, height):
    """A valid 8-bit grey PNG of two rows whose header claims width x height pixels."""
    import struct
    import zlib

    def chunk(kind, data):
        return (struct.pack('>I', len(data)) + kind + data
                + struct.pack('>I', zlib.crc32(kind + data)))
    rows = zlib.compress(b'\0' * (2 * (width + 1)))
    header = struct.pack('>IIBBBBB', width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', header) + chunk(b'IDAT', rows)
                     + chunk(b'IEND', b''))
    return path


def _more_hostile_files(root, files):
    """Files of the cases beyond the issue's list (see value_cases)."""
    import shutil
    import yaml
    from lf_mpc_calib.io.observation_table import write_observations
    from lf_mpc_calib.simulation.observations import paper_scene
    files['png_bomb'] = _png_claiming(root / 'bomb.png', 60000, 60000)
    for name, pose in (('poses_nan', '[.nan, 0, 0], translation_m: [0, 0, 0.5]'),
                       ('poses_behind', '[0, 0, 0], translation_m: [0, 0, -0.5]')):
        files[name] = root / f'{name}.yaml'
        files[name].write_text(f'poses: [{{rotation_vector: {pose}}}]\n')
    files['paper_table'] = root / 'paper.csv'
    write_observations(files['paper_table'], paper_scene(
        n_poses=4, n_views=3, noise_px=0.0, rng=np.random.default_rng(1))[3])
    for name, rv, t in (('robot_huge', '[0, 0, 0]', '[0, 0, 1e300]'),
                        ('robot_string', '[a, 0, 0]', '[0, 0, 1]')):
        files[name] = root / f'{name}.yaml'
        files[name].write_text(''.join(f'- {{frame: {k}, rotation_vector: {rv}, '
                                       f'translation_m: {t}}}\n' for k in range(4)))
    rows = _valid_rows()
    for k, r in enumerate(rows):
        r[7] = 10.0 + 1e-13 * k
    files['near_flat_u'] = root / 'near_flat_u.csv'
    files['near_flat_u'].write_text(_table(rows))
    files['raw_folder'] = folder = root / 'raw_folder'
    folder.mkdir()
    shutil.copy(files['white'], folder / 'white.png')
    shutil.copy(files['frame'], folder / 'frame_000.png')
    manifest = {'format': 'lf_mpc_calib-raw-dataset', 'white': 'white.png',
                'frames': ['frame_000.png'],
                'board': {'cols': 3, 'rows': 3, 'square_m': 0.003, 'first_square': 'black'}}
    variants = [(f'manifest board {_name(k, v)}', ('board', k), v)
                for k, v in (('cols', NAN), ('rows', 1e300), ('square_m', INF),
                             ('square_m', 'x'), ('square_m', 1e300))]
    variants += [('manifest frames 5', ('frames',), 5), ('manifest board 5', ('board',), 5),
                 ('manifest format_version 99', ('format_version',), 99),
                 ('manifest format other', ('format',), 'someone-else')]
    for name, path, value in variants:
        doc = yaml.safe_load(yaml.safe_dump(manifest))
        _set(doc, '.'.join(path), value)
        files[name] = target = root / f'manifest_{len(files)}'
        shutil.copytree(folder, target)
        (target / 'manifest.yaml').write_text(yaml.safe_dump(doc))


@pytest.mark.parametrize('template,names', [c[1:] for c in VALUE_CASES],
                         ids=[c[0] for c in VALUE_CASES])
def test_a_hostile_value_is_refused_in_one_line_naming_it(hostile_files, template, names):
    argv = [_fill(a, hostile_files) for a in template]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter('error')
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    text = err.getvalue()
    assert rc in (1, 2), (rc, text)
    assert 'internal error' not in text and 'Traceback' not in text, text
    lines = [t for t in text.splitlines() if 'error' in t]
    assert len(lines) == 1 and names in lines[0], text


WARNED = [   # (id, argv template, evidence the warning names): the run goes on (exit 0)
    (f'{cmd[0]}-{frame}', [cmd[0], f'{{{frame}}}', *cmd[2:]], evidence)
    for cmd in (DEPTH + ['{cal}'], REFOCUS + ['{cal}'], DECODE + ['{grid}'])
    for frame, evidence in (('white', 'nearly) the white image: it correlates 1.000'),
                            ('frame_transposed', 'with the white image transposed'),
                            ('frame_turned', 'with the white image turned by 90 degrees'))]


@pytest.fixture(scope='module')
def warned_files(hostile_files):
    import cv2
    files = dict(hostile_files)
    frame = cv2.imread(str(files['frame']), cv2.IMREAD_UNCHANGED)
    for name, turned in (('frame_transposed', frame.T), ('frame_turned', np.rot90(frame))):
        files[name] = files['frame'].parent / f'{name}.png'
        cv2.imwrite(str(files[name]), np.ascontiguousarray(turned))
    files['grid'] = files['frame'].parent / 'grid.yaml'
    return files


@pytest.mark.parametrize('template,evidence', [c[1:] for c in WARNED],
                         ids=[c[0] for c in WARNED])
def test_a_frame_that_is_the_white_or_turned_gets_a_warning_naming_the_evidence(
        warned_files, template, evidence):
    rc, err = _run([_fill(a, warned_files) for a in template])
    assert rc == 0, err
    assert f'warning: {warned_files[template[1][1:-1]]}: ' in err and evidence in err, err


def test_a_real_frame_gets_no_warning(warned_files):
    from lf_mpc_calib.io.images import read_image
    from lf_mpc_calib.lenslet.frame_check import frame_warnings
    frame, white = read_image(warned_files['frame']), read_image(warned_files['white'])
    assert frame_warnings(frame, white) == []
    assert 'width and height swapped' in frame_warnings(frame[:, :-9].T, white[:, :-9])[0]


def test_calibrate_raw_names_a_white_given_as_frame_in_its_refusal(warned_files, tmp_path):
    import shutil
    folder = tmp_path / 'ds'
    folder.mkdir()
    shutil.copy(warned_files['white'], folder / 'white.png')
    shutil.copy(warned_files['white'], folder / 'frame_000.png')
    rc, err = _run(['calibrate-raw', str(folder), '--board', '6x5', '--square', '0.01',
                    '-o', str(tmp_path / 'c.yaml'), '--quiet'])
    assert rc == 1 and 'frame_000.png' in err and 'the white image: it correlates' in err, err


@pytest.mark.parametrize('name', ['lytro', 'illum', 'focused-keplerian', 'focused-galilean',
                                  'focused-multifocus'])
@pytest.mark.parametrize('scale', [1.0, 0.12])
def test_every_preset_s_true_calibration_loads(name, scale):
    """The load-time plausibility check passes the simulator's true cameras (file round trip)."""
    from lf_mpc_calib.io.calibration_file import CalibrationFile, dumps, loads
    from lf_mpc_calib.simulation.optics import preset
    camera = preset(name, scale=scale)
    grid = camera.lenslet_grid()
    focused = name.startswith('focused')
    size = tuple(grid.image_size) if focused else tuple(grid.shape)
    cal = CalibrationFile(
        camera_type='focused' if focused else 'conventional',
        model=camera.ground_truth_model(grid), stddev={},
        errors={'rms_reprojection_px': 0.1, 'rms_ray_reprojection_mm': 0.1},
        rotation_vectors=np.zeros((1, 3)), translations=[[0, 0, 0.5]], image_size=size,
        lenslet_grid=grid)
    back = loads(dumps(cal))
    assert back.model.to_vector() == pytest.approx(cal.model.to_vector())


@pytest.mark.parametrize('change,bound', [({'k_i': 1e-300}, 'baseline from 1e-06'),
                                          ({'k_u': -1e300}, 'under 170 degrees'),
                                          ({'k_u': 1e-300}, 'at least 0.01 degrees')])
def test_an_absurd_calibration_is_refused_naming_the_value_and_the_bound(change, bound):
    import re
    from lf_mpc_calib.errors import CalibrationFileError
    from lf_mpc_calib.io.calibration_file import CalibrationFile, dumps, loads
    from lf_mpc_calib.simulation.optics import preset
    camera = preset('lytro', scale=0.12)
    grid = camera.lenslet_grid()
    cal = CalibrationFile(
        camera_type='conventional', model=camera.ground_truth_model(grid).replace(**change),
        stddev={}, errors={'rms_reprojection_px': 0.1, 'rms_ray_reprojection_mm': 0.1},
        rotation_vectors=np.zeros((0, 3)), translations=np.zeros((0, 3)),
        image_size=tuple(grid.shape), lenslet_grid=grid)
    (key, value), = change.items()
    with pytest.raises(CalibrationFileError, match=re.escape(f'{key} = {value:g}')) as info:
        loads(dumps(cal))
    assert bound in str(info.value)


def _bare_file(name, change):
    """A preset's true calibration with ``change`` to its model and neither image_size, views
    nor a lenslet grid: only the intrinsics to judge."""
    from lf_mpc_calib.io.calibration_file import CalibrationFile
    from lf_mpc_calib.simulation.optics import preset
    camera = preset(name, scale=0.12)
    return CalibrationFile(
        camera_type='focused' if name.startswith('focused') else 'conventional',
        model=camera.ground_truth_model(camera.lenslet_grid()).replace(**change), stddev={},
        errors={'rms_reprojection_px': 0.1, 'rms_ray_reprojection_mm': 0.1},
        rotation_vectors=np.zeros((0, 3)), translations=np.zeros((0, 3)))


@pytest.mark.parametrize('name', ['lytro', 'focused-keplerian', 'focused-multifocus'])
def test_a_true_calibration_without_size_or_grid_loads(name):
    from lf_mpc_calib.io.calibration_file import dumps, loads
    cal = _bare_file(name, {})
    assert cal.image_size is None and cal.lenslet_grid is None and cal.views is None
    assert loads(dumps(cal)).model.to_vector() == pytest.approx(cal.model.to_vector())


@pytest.mark.parametrize('name', ['lytro', 'focused-keplerian'])
@pytest.mark.parametrize('change,bound', [({'k_i': 1e-300}, 'expected 1e-11 to 10 m per step'),
                                          ({'k_j': 1e300}, 'expected 1e-11 to 10 m per step'),
                                          ({'k_u': -1e300}, 'under 170 degrees'),
                                          ({'k_v': 1e-300}, 'expected at least'),
                                          ({'u_0': 1e6}, 'under 170 degrees'),
                                          ({'k_i': 3e-9}, 'differ'),
                                          ({'k_u': 2e-6}, 'differ')])
def test_an_absurd_calibration_without_size_or_grid_is_refused(name, change, bound):
    """No image_size, views or lattice: the intrinsics alone still refuse the absurd, naming
    the value and the bound (issue 26 part 4)."""
    import re
    from lf_mpc_calib.errors import CalibrationFileError
    from lf_mpc_calib.io.calibration_file import dumps, loads
    (key, value), = change.items()
    with pytest.raises(CalibrationFileError, match=re.escape(f'{key} = {value:g}')) as info:
        loads(dumps(_bare_file(name, change)))
    assert bound in str(info.value) and 'implausible calibration' in str(info.value)
