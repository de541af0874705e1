"""
``calibrate-raw``, ``grid`` and ``decode`` on Lytro Illum files: a simulated Illum-like data
set (Bayer 'grbg', as the Illum's) rewritten as .lfr frames and an archive of .raw whites.
"""

import numpy as np
import pytest
import yaml

from lf_mpc_calib.cli import main
from lf_mpc_calib.io.calibration_file import load_calibration
from lf_mpc_calib.io.images import read_float_image, read_image, write_image
from lf_mpc_calib.lenslet.estimate import estimate_grid
from lf_mpc_calib.lenslet.white_image import bayer_neutral
from lf_mpc_calib.simulation.dataset import random_poses, write_dataset
from lf_mpc_calib.simulation.optics import Checkerboard, preset
from lytro_files import illum_metadata, private, write_lfp, write_raw

pytestmark = pytest.mark.cost(17)   # s on the CI machine: scheduled early (conftest)

BLACK, WHITE = 64, 1023


def _to_codes(path, width):
    """10-bit Illum codes of a PNG in [0, 1] with the camera's black and white levels."""
    x = read_float_image(path)[:, :width]
    return np.rint(BLACK + x * (WHITE - BLACK)).astype(np.uint16)


@pytest.fixture(scope='module')
def lytro(tmp_path_factory):
    root = tmp_path_factory.mktemp('lytro_ds')
    sim, png = root / 'sim', root / 'png'
    camera = preset('illum', scale=0.2, sensor__bayer='grbg')
    board = Checkerboard(8, 5, 0.0065)
    rv, tv = random_poses(camera, board, 4, rng=np.random.default_rng(5), max_tilt_deg=35.0)
    write_dataset(sim, camera, board, rv, tv, seed=5, samples=2)
    # The Illum packing needs a width that is a multiple of 4: crop (the PNG reference too).
    h, w = read_image(sim / 'white.png').shape
    w -= w % 4
    codes = _to_codes(sim / 'white.png', w)
    frames, whites = root / 'frames', root / 'whites'
    for d in (frames, whites, png):
        d.mkdir()
    write_image(png / 'white.png', read_image(sim / 'white.png')[:, :w])
    for p in sorted(sim.glob('frame_*.png')):
        write_image(png / p.name, read_image(p)[:, :w])
        write_lfp(frames / p.with_suffix('.lfr').name, _to_codes(p, w),
                  illum_metadata(w, h, zoom=500, focus=120), private('B5143'), bits=10)
    # The archive: the right white at zoom 480, decoys at another zoom (a black image) and of
    # another camera at the exact zoom/focus (a black image too): picking either breaks it.
    dark = np.full_like(codes, BLACK)
    for name, img, serial, zoom, focus in (('MOD_0000.RAW', dark, 'B5143', 900, 120),
                                           ('MOD_0001.RAW', codes, 'B5143', 480, 100),
                                           ('MOD_0002.RAW', dark, 'B9999', 500, 120)):
        write_raw(whites / name, img, 10, illum_metadata(w, h, zoom=zoom, focus=focus),
                  private(serial))
    return root, png


def test_cli_calibrate_raw_on_lytro_files_matches_png(lytro, tmp_path, capsys):
    root, png = lytro
    out = tmp_path / 'lytro.yaml'
    rc = main(['calibrate-raw', str(root / 'frames'), '--white', str(root / 'whites'),
               '--board', '8x5', '--square', '0.0065', '--views', '7x7', '-o', str(out),
               '--quiet', '--accept-uncertain'])   # 4 poses of a 0.2 crop: undetermined
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    cal = load_calibration(out)
    meta = cal.camera_metadata
    assert (meta['model'], meta['serial'], meta['bayer']) == ('ILLUM', 'B5143', 'grbg')
    assert (meta['zoom_step'], meta['focus_step'], meta['frames']) == (500.0, 120.0, 4)
    assert meta['white_image'] == {'file': 'MOD_0001.RAW', 'serial': 'B5143', 'zoom_step': 480.0,
                                   'focus_step': 100.0, 'zoom_gap': 20.0, 'focus_gap': 20.0}
    # The same frames as PNGs (Bayer given by hand): the 10-bit codes change the calibration
    # by far less than its own uncertainty (measured: < 0.01 sigma, RMS 0.1892 px both).
    ref_out = tmp_path / 'png.yaml'
    assert main(['calibrate-raw', str(png), '--bayer', 'grbg', '--views', '7x7', '-o',
                 str(ref_out), '--board', '8x5', '--square', '0.0065', '--quiet',
                 '--accept-uncertain']) == 0
    ref = load_calibration(ref_out)
    assert cal.num_poses == ref.num_poses >= 3
    assert cal.errors['rms_reprojection_px'] < 0.7
    for name, value in cal.model.intrinsics_dict().items():
        sigma = max(cal.stddev[name], ref.stddev[name])
        assert abs(value - ref.model.intrinsics_dict()[name]) < 0.1 * sigma, name


def test_cli_grid_and_decode_on_lytro_files(lytro, tmp_path, capsys):
    root, png = lytro
    grid_yaml = tmp_path / 'grid.yaml'
    assert main(['grid', str(root / 'whites' / 'MOD_0001.RAW'), '-o', str(grid_yaml)]) == 0
    doc = yaml.safe_load(grid_yaml.read_text())
    assert doc['camera_metadata']['serial'] == 'B5143'
    # The file's Bayer pattern balances the CFA channels before the fit: the lattice of the
    # same white as a PNG, balanced by hand (spot scatter 0.18 px; 0.29 px unbalanced).
    ref = estimate_grid(bayer_neutral(read_float_image(png / 'white.png'), 'grbg'),
                        return_details=True)
    assert abs(doc['lenslet_grid']['pitch'] - ref.grid.pitch) < 1e-3
    assert abs(doc['fit']['rms_residual_px'] - ref.rms_px) < 0.01
    frame = sorted((root / 'frames').glob('*.lfr'))[0]
    out = tmp_path / 'views'
    assert main(['decode', str(frame), '--white', str(root / 'whites'), '--views', '5x5',
                 '--grid', str(grid_yaml), '-o', str(out)]) == 0
    doc = yaml.safe_load((out / 'grid.yaml').read_text())
    assert doc['camera_metadata']['white_image']['file'] == 'MOD_0001.RAW'
    assert (out / 'mosaic.png').is_file()
    capsys.readouterr()
    # A frame of a camera with no white in the archive: refused with the reason.
    odd = tmp_path / 'odd.lfr'
    odd.write_bytes(frame.read_bytes().replace(b'B5143', b'B0000'))
    assert main(['decode', str(odd), '--white', str(root / 'whites'), '-o', str(out)]) == 1
    err = capsys.readouterr().err
    assert "no white image of camera serial 'B0000'" in err and 'B5143' in err
