"""
No output of any subcommand destroys an input, and a failed run leaves the previous result as
it was (issue 26 #1). test_cli_bad_input.py enumerates every subcommand x output x input
pointed at the same file; here: the files of a data set and those written beside an output,
output locations that cannot be written (refused before the work), and an error injected
midway (the old file stays, no temporary is left).
"""

import contextlib
import errno
import io

import numpy as np
import pytest

from lf_mpc_calib.cli import main
from lf_mpc_calib.io import atomic
from lf_mpc_calib.io.atomic import write_atomically
from lf_mpc_calib.io.observation_table import write_observations
from lf_mpc_calib.simulation.observations import paper_scene


def _run(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as exc:
            rc = exc.code
    return rc, err.getvalue()


def _dataset(tmp_path):
    ds = tmp_path / 'ds'
    ds.mkdir()
    for name in ('manifest.yaml', 'white.png', 'frame_000.png'):
        (ds / name).write_bytes(b'data set file ' + name.encode())
    return ds


@pytest.mark.parametrize('target', ['manifest.yaml', 'frame_000.png', 'white.png'])
def test_calibrate_raw_never_writes_over_a_file_of_its_data_set(tmp_path, target):
    ds = _dataset(tmp_path)
    rc, err = _run(['calibrate-raw', ds, '-o', ds / target])
    assert rc == 2 and f'{ds / target}' in err and 'would overwrite the input' in err
    assert (ds / target).read_bytes() == b'data set file ' + target.encode()


def test_calibrate_raw_observation_table_beside_the_output_is_checked(tmp_path):
    ds = _dataset(tmp_path)
    (ds / 'cal_observations.csv').write_text('precious')
    rc, err = _run(['calibrate-raw', ds, '-o', ds / 'cal.yaml'])
    assert rc == 2 and 'observation table beside -o' in err, err
    assert (ds / 'cal_observations.csv').read_text() == 'precious'


def _table(tmp_path):
    _, _, _, obs = paper_scene(n_poses=3, n_views=3, noise_px=0.1,
                               rng=np.random.default_rng(3))
    path = tmp_path / 'obs.csv'
    write_observations(path, obs)
    return path


@pytest.mark.parametrize('report', ['a_file', 'a_file/sub'])
def test_an_unusable_report_folder_is_refused_before_the_calibration_is_written(
        tmp_path, report):
    csv = _table(tmp_path)
    (tmp_path / 'a_file').write_text('not a folder')
    old = tmp_path / 'cal.yaml'
    old.write_text('the previous calibration')
    rc, err = _run(['calibrate', csv, '-o', old, '--report', tmp_path / report])
    assert rc == 2, err
    assert 'a_file' in err and old.read_text() == 'the previous calibration'


def test_outputs_of_the_wrong_kind_or_shared_are_refused(tmp_path):
    csv = _table(tmp_path)
    (tmp_path / 'folder').mkdir()
    rc, err = _run(['calibrate', csv, '-o', tmp_path / 'folder'])
    assert rc == 2 and 'is an existing folder; expected a regular file or a new name' in err
    rc, err = _run(['calibrate', csv, '-o', tmp_path / 'c.yaml',
                    '--save-observations', tmp_path / 'c.yaml'])
    assert rc == 2 and 'the same file' in err


def _no_temporaries(folder):
    return not [p for p in folder.rglob('*') if '.partial' in p.name]


def test_a_write_error_midway_leaves_the_previous_file(tmp_path, monkeypatch):
    csv = _table(tmp_path)
    out = tmp_path / 'cal.yaml'
    assert _run(['calibrate', csv, '-o', out, '--quiet'])[0] == 0
    before = out.read_bytes()

    def disk_full(src, dst):
        raise OSError(errno.ENOSPC, 'No space left on device', str(dst))
    monkeypatch.setattr(atomic.os, 'replace', disk_full)
    rc, err = _run(['calibrate', csv, '-o', out, '--quiet', '--no-distortion'])
    assert rc == 1 and 'No space left on device' in err, err
    assert out.read_bytes() == before
    assert _no_temporaries(tmp_path)


def test_a_writer_failing_midway_leaves_the_previous_file_and_no_temporary(tmp_path):
    path = tmp_path / 'depth.npy'
    path.write_bytes(b'previous')

    def half_then_fail(tmp):
        tmp.write_bytes(b'half of the new')
        raise OSError(errno.EIO, 'I/O error', str(tmp))
    with pytest.raises(OSError):
        write_atomically(path, half_then_fail)
    assert path.read_bytes() == b'previous' and _no_temporaries(tmp_path)
    write_atomically(path, lambda tmp: tmp.write_bytes(b'new'))
    assert path.read_bytes() == b'new' and _no_temporaries(tmp_path)


# simulate and plan never replace a data set silently (issue 39 #5)
SIMULATE = ['simulate', '--preset', 'lytro', '--scale', '0.06', '--samples', '1', '--quiet']


def _contents(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize('argv', [
    SIMULATE + ['--poses', '1'],
    ['plan', '--preset', 'lytro', '--scale', '0.25', '--samples', '1', '--no-verify',
     '--target-k-sigma', '2', '--target-pp-sigma', '2']], ids=['simulate', 'plan'])
def test_a_data_set_folder_that_is_not_empty_is_refused_without_overwrite(tmp_path, argv):
    ds = _dataset(tmp_path)
    before = _contents(ds)
    rc, err = _run(argv + ['-o', ds])
    assert rc == 2, err
    assert f'-o {ds} is not empty' in err and 'it holds a data set' in err, err
    assert 'manifest.yaml' in err and '1 frame (frame_000.png)' in err, err
    assert 'pass --overwrite' in err, err
    assert _contents(ds) == before                  # refused before any rendering
    # a folder of other files is refused too (even with --overwrite: it replaces only a
    # data set's own files)
    (ds / 'notes.txt').write_text('mine')
    rc, err = _run(argv + ['-o', ds, '--overwrite'])
    assert rc == 2 and 'notes.txt' in err and 'not part of a data set' in err, err
    assert (ds / 'notes.txt').read_text() == 'mine' and (ds / 'frame_000.png').exists()


def test_simulate_overwrite_leaves_no_frame_of_the_earlier_data_set(tmp_path):
    ds = tmp_path / 'ds'
    assert _run(SIMULATE + ['--poses', '3', '-o', ds])[0] == 0
    assert _run(SIMULATE + ['--scene', 'planes', '--poses', '2', '-o', ds])[0] == 2
    (ds / 'depth_001.npy').write_bytes(b'stale truth')      # as a planes set leaves
    (ds / '.frame_004.1234.partial.png').write_bytes(b'a killed run')
    rc, err = _run(SIMULATE + ['--poses', '1', '--seed', '3', '-o', ds, '--overwrite'])
    assert rc == 0, err
    assert sorted(p.name for p in ds.iterdir()) == [
        'dark.png', 'frame_000.png', 'ground_truth.yaml', 'manifest.yaml', 'white.png']
    from lf_mpc_calib.simulation.dataset import read_dataset
    new = read_dataset(ds)
    assert len(new.frames) == len(new.ground_truth.translations) == 1
    assert new.manifest['seed'] == 3


def test_a_data_set_write_failing_midway_leaves_the_earlier_one(tmp_path):
    from lf_mpc_calib.cli.paths import dataset_output
    ds = _dataset(tmp_path)
    before = _contents(ds)
    with pytest.raises(OSError):
        with dataset_output(ds, overwrite=True) as folder:
            (folder / 'white.png').write_bytes(b'new white')
            raise OSError(errno.ENOSPC, 'No space left on device')
    assert _contents(ds) == before                  # and no hidden folder left in it
    fresh = tmp_path / 'new'
    with pytest.raises(OSError):
        with dataset_output(fresh, overwrite=False) as folder:
            raise OSError(errno.ENOSPC, 'No space left on device')
    assert not fresh.exists()


def test_plan_overwrite_leaves_no_frame_of_the_earlier_data_set(tmp_path):
    ds = _dataset(tmp_path)
    stale = [f'frame_{k:03d}.png' for k in range(1, 40)] + ['depth_000.npy', 'ground_truth.yaml']
    for name in stale:
        (ds / name).write_bytes(b'stale')
    rc, err = _run(['plan', '--preset', 'lytro', '--scale', '0.25', '--samples', '1',
                    '--no-verify', '--target-k-sigma', '2', '--target-pp-sigma', '2',
                    '--overwrite', '-o', ds])
    assert rc == 0, err
    from lf_mpc_calib.simulation.dataset import read_dataset
    n = len(read_dataset(ds).frames)
    assert sorted(p.name for p in ds.iterdir()) == sorted(
        [f'frame_{k:03d}.png' for k in range(n)] + ['dark.png', 'ground_truth.yaml',
                                                    'manifest.yaml', 'white.png'])
    assert b'stale' not in (ds / 'ground_truth.yaml').read_bytes()   # dark.png: the sensor's
