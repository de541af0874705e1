"""Tests of ``lf-mpc-calib calibrate-raw`` (front of lf_mpc_calib.pipeline.offline)."""

import re

import numpy as np
import pytest
import yaml

from lf_mpc_calib.io.calibration_file import load_calibration
from lf_mpc_calib.cli import main
from lf_mpc_calib.cli.calibrate_raw import parse_fix, parse_views
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.lenslet.grid import LensletGrid
from lf_mpc_calib.io.observation_table import read_observations
from lf_mpc_calib.pipeline.offline import load_raw_dataset
from lf_mpc_calib.simulation.dataset import random_poses, write_dataset
from lf_mpc_calib.simulation.optics import Checkerboard, preset

pytestmark = pytest.mark.cost(43)   # s on the CI machine: scheduled early (conftest)


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
    # A small Illum-like data set with a Bayer mosaic (RGGB), written as by `simulate`.
    root = tmp_path_factory.mktemp('cli_ds')
    camera = preset('illum', scale=0.2, sensor__bayer='rggb')
    board = Checkerboard(8, 5, 0.0065)
    rv, tv = random_poses(camera, board, 4, rng=np.random.default_rng(5), max_tilt_deg=35.0)
    write_dataset(root, camera, board, rv, tv, seed=5, samples=2)
    return root


def test_cli_calibrate_raw_refuses_undetermined_camera(dataset, tmp_path, capsys):
    # 4 poses of a +-5 degree crop leave the intrinsics several per cent uncertain: no file,
    # the figures and the poses to add instead
    out = tmp_path / 'calibration.yaml'
    rc = main(['calibrate-raw', str(dataset), '-o', str(out), '--views', '7x7', '--quiet'])
    err = capsys.readouterr().err
    assert rc == 1
    assert re.search(r'do not determine the camera: sigma of \S+ [0-9.]+ (%|px) \(limit', err)
    assert 'To do: ' in err and '--accept-uncertain' in err
    assert not out.exists()


def test_cli_calibrate_raw_writes_file_table_and_report(dataset, tmp_path, capsys):
    out = tmp_path / 'calibration.yaml'
    rc = main(['calibrate-raw', str(dataset), '-o', str(out), '--report',
               str(tmp_path / 'report'), '--views', '7x7', '--accept-uncertain'])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert 'WARNING (--accept-uncertain): sigma of' in captured.out
    # Progress per image (a skipped frame goes to stderr with its reason), then the summary.
    both = captured.out + captured.err
    for k in range(4):
        assert f'[{k + 1}/4] frame_{k:03d}.png:' in both
    skipped = captured.err.count('warning: skipped')
    assert skipped <= 1, captured.err
    assert 'RMS reprojection' in captured.out
    # what the 4 poses determine, and the next pose to add (capture guidance)
    assert re.search(r'pose set: \d poses; sigma k_i [0-9.]+ %, k_j [0-9.]+ %', captured.out)
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
    assert (tmp_path / 'report' / 'grid.png').stat().st_size > 10_000, 'grid over the white'
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


@pytest.mark.parametrize('argv, why', [
    (['--lens-types', '3'], 'simulated conventional camera illum'),
    (['--lens-types', 'simulated', '--camera-type', 'conventional'],
     '--camera-type conventional'),
])
def test_cli_calibrate_raw_refuses_lens_types_on_a_conventional_camera(dataset, tmp_path,
                                                                       capsys, argv, why):
    out = tmp_path / 'c.yaml'
    assert main(['calibrate-raw', str(dataset), '-o', str(out), '--quiet'] + argv) == 1
    err = capsys.readouterr().err
    assert f'a conventional camera ({why}) has one micro-lens type' in err, err
    assert 'expected --lens-types 1 or none' in err and not out.exists()


def test_a_checkerboard_of_fewer_than_3_corners_a_side_is_refused_before_any_frame(
        dataset, tmp_path, capsys):
    # findChessboardCornersSB refuses such a pattern with an error, once a frame
    out = tmp_path / 'c.yaml'
    assert main(['calibrate-raw', str(dataset), '-o', str(out), '--board', '5x2', '--square',
                 '0.01']) == 1
    err = capsys.readouterr().err
    assert 'board 5x2: a checkerboard needs at least 3 x 3 inner corners' in err, err
    assert 'OpenCV(' not in err and '[1/' not in err and not out.exists()
    # the focused pipeline the same, before it reads the white image
    from lf_mpc_calib.io.raw_dataset import RawDataset
    from lf_mpc_calib.pipeline.focused_raw import calibrate_focused_raw
    from lf_mpc_calib.camera.board import Checkerboard as Board
    absent = RawDataset([tmp_path / 'frame.png'], tmp_path / 'white.png', Board(2, 4, 0.01))
    with pytest.raises(InvalidInputError, match=r'board 2x4: a checkerboard needs at least 3 x 3'):
        calibrate_focused_raw(absent)


def test_cli_calibrate_raw_grid_file_from_grid_and_calibration(dataset, tmp_path, capsys):
    # `lf-mpc-calib grid` fits the lattice once (of the Bayer mosaic as it is); calibrate-raw
    # then decodes with exactly that grid, and a calibration file's grid can be reused too.
    grid_yaml = tmp_path / 'grid.yaml'
    assert main(['grid', str(dataset / 'white.png'), '-o', str(grid_yaml)]) == 0
    given = yaml.safe_load(grid_yaml.read_text())['lenslet_grid']
    out = tmp_path / 'calibration.yaml'
    rc = main(['calibrate-raw', str(dataset), '-o', str(out), '--views', '7x7', '--grid',
               str(grid_yaml), '--accept-uncertain'])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert f'lenslet grid from {grid_yaml}' in captured.out
    used = load_calibration(out).lenslet_grid
    # The file's grid went through unchanged (YAML floats round-trip exactly).
    assert used.to_dict() == LensletGrid.from_dict(given).to_dict()
    # and decodes as well as the estimated one (0.46 px measured, first test).
    assert load_calibration(out).errors['rms_reprojection_px'] < 0.7
    out2 = tmp_path / 'again.yaml'
    assert main(['calibrate-raw', str(dataset), '-o', str(out2), '--views', '7x7', '--quiet',
                 '--grid', str(out), '--accept-uncertain']) == 0, capsys.readouterr().err
    np.testing.assert_allclose(load_calibration(out2).model.to_vector(),
                               load_calibration(out).model.to_vector(), rtol=1e-9,
                               err_msg='same grid, same frames: the same calibration')


def test_cli_calibrate_raw_grid_of_other_size_fails(dataset, tmp_path, capsys):
    d = yaml.safe_load((dataset / 'manifest.yaml').read_text())
    w, h = d['image_size']
    grid = LensletGrid('hex', 14.2, 12.3, 0.0, (7.0, 7.0), (40, 30), (w + 2, h))
    path = tmp_path / 'grid.yaml'
    path.write_text(yaml.safe_dump({'lenslet_grid': grid.to_dict()}))
    rc = main(['calibrate-raw', str(dataset), '-o', str(tmp_path / 'c.yaml'), '--grid',
               str(path)])
    err = capsys.readouterr().err
    assert rc == 1
    assert (f'the lenslet grid is for {w + 2}x{h} px images but the white image is {w}x{h} px'
            in err), err
    assert not (tmp_path / 'c.yaml').exists()
    with pytest.raises(InvalidInputError, match='grid file .* does not exist'):
        load_raw_dataset(dataset, grid=tmp_path / 'missing.yaml')
