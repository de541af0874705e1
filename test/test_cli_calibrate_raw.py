"""Tests of ``lf-mpc-calib calibrate-raw`` (the command-line front of lf_mpc_calib.pipeline)."""

import numpy as np
import pytest

from lf_mpc_calib.calibration_file import load_calibration
from lf_mpc_calib.cli import main
from lf_mpc_calib.cli.calibrate_raw import parse_fix, parse_views
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.observations import read_observations
from lf_mpc_calib.simulation.dataset import random_poses, write_dataset
from lf_mpc_calib.simulation.optics import Checkerboard, preset


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
    # A small Illum-like data set with a Bayer mosaic (RGGB), written as by `simulate`.
    root = tmp_path_factory.mktemp('cli_ds')
    camera = preset('illum', scale=0.2, sensor__bayer='rggb')
    board = Checkerboard(8, 5, 0.0065)
    rv, tv = random_poses(camera, board, 4, rng=np.random.default_rng(5), max_tilt_deg=35.0)
    write_dataset(root, camera, board, rv, tv, seed=5, samples=2)
    return root


def test_cli_calibrate_raw_writes_file_table_and_report(dataset, tmp_path, capsys):
    out = tmp_path / 'calibration.yaml'
    rc = main(['calibrate-raw', str(dataset), '-o', str(out), '--report',
               str(tmp_path / 'report'), '--views', '7x7'])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    # Progress per image (a skipped frame goes to stderr with its reason), then the summary.
    both = captured.out + captured.err
    for k in range(4):
        assert f'[{k + 1}/4] frame_{k:03d}.png:' in both
    skipped = captured.err.count('warning: skipped')
    assert skipped <= 1, captured.err
    assert 'RMS reprojection' in captured.out
    cal = load_calibration(out)
    assert cal.camera_type == 'conventional' and cal.num_poses == 4 - skipped
    # 7x7 views: view indices -3..3.
    assert cal.views == {'i': [-3, 3], 'j': [-3, 3]}
    obs = read_observations(tmp_path / 'calibration_observations.csv')
    assert np.abs(obs.ijuv[:, :2]).max() == 3
    # Sub-pixel consistency of the whole chain (measured 0.46 px: demosaiced 109 x 85 px
    # views, ~7 px squares); a mislabelled pose or a wrong Bayer handling gives pixels.
    assert cal.errors['rms_reprojection_px'] < 0.7
    assert (tmp_path / 'report' / 'detections.txt').is_file()
    assert len(list((tmp_path / 'report').glob('detections_*.png'))) == 4 - skipped


def test_cli_calibrate_raw_too_few_poses_exits_with_message(dataset, tmp_path, capsys):
    rc = main(['calibrate-raw', str(dataset), '-o', str(tmp_path / 'c.yaml'),
               '--board', '7x5', '--square', '0.0065', '--quiet'])
    err = capsys.readouterr().err
    assert rc == 1
    assert 'found in 0 of 4 frames, at least 3 are needed' in err
    assert not (tmp_path / 'c.yaml').exists()


def test_cli_calibrate_raw_bad_options(dataset, tmp_path, capsys):
    rc = main(['calibrate-raw', str(dataset), '-o', str(tmp_path / 'c.yaml'), '--board', '8x5'])
    assert rc == 1
    assert '--board COLSxROWS and --square M must be given together' in capsys.readouterr().err
    with pytest.raises(InvalidInputError, match='NIxNJ'):
        parse_views('7')
    with pytest.raises(InvalidInputError, match='unknown parameter'):
        parse_fix('k_1,k_9')
    assert parse_views('5x3') == (5, 3)
