"""Tests of calibrate-raw's inputs: grid files, Bayer whites, frames (io, lenslet.white_image)."""

import numpy as np
import pytest
import yaml

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.images import read_float_image as read_image, write_image
from lf_mpc_calib.io.raw_dataset import checked_grid, load_grid
from lf_mpc_calib.lenslet.demosaic import mosaic_bayer
from lf_mpc_calib.lenslet.estimate import estimate_grid
from lf_mpc_calib.lenslet.grid import LensletGrid
from lf_mpc_calib.lenslet.white_image import bayer_neutral, make_decoder

ERRORS = {'rms_reprojection_px': 0.1, 'rms_ray_reprojection_mm': 0.1}
GRID = LensletGrid('hex', 9.9, 9.9 * np.sqrt(3) / 2, 0.0021, (5.2, 4.1), (30, 34), (300, 290))


def _grid_error(grid, truth):
    """Mean distance (px) of every lens's centre in ``grid`` to its true centre (one numbering,
    docs/file-formats.md: the same lens has the same index in both)."""
    assert grid.shape == truth.shape and grid.hex_parity == truth.hex_parity
    return float(np.hypot(*(grid.centres() - truth.centres()).T).mean())


@pytest.fixture(scope='module')
def bayer_white():
    from lf_mpc_calib.simulation.optics import preset
    from lf_mpc_calib.simulation.render import quantize, render_white
    cam = preset('lytro', scale=0.2, sensor__bayer='rggb')
    white = quantize(render_white(cam, samples=4), 8).astype(np.float32) / 255.0
    mono = quantize(render_white(preset('lytro', scale=0.2), samples=4), 8)
    return cam, white, mono.astype(np.float32) / 255.0


def test_make_decoder_bayer_white_grid_as_good_as_mono(bayer_white):
    cam, white, mono = bayer_white
    truth = cam.lenslet_grid()
    raw_err = _grid_error(estimate_grid(white), truth)
    mono_err = _grid_error(estimate_grid(mono), truth)
    grid, decoder = make_decoder(white, views=(5, 5), demosaic='rggb')
    err = _grid_error(grid, truth)
    # The channel gains (0.8, 1, 0.7) put a 2 x 2 pattern on every micro-image; balancing
    # each CFA phase removes it exactly for a white of uniform colour, so the Bayer grid must
    # match the mono one. Measured (Lytro 0.2 crop, 656 px): balanced 0.0057 px, mono 0.0058 px;
    # the mosaic as it is 0.003 px since estimate_grid normalises each pixel by its 3 x 3
    # neighbourhood (it was 0.048 px with a wider normalisation), so it must stay close too.
    assert err < mono_err + 0.005, (err, mono_err)
    assert raw_err < mono_err + 0.01, (raw_err, mono_err)
    assert err < 0.04, 'the lattice issue\'s target (< 0.1 px) with room to spare'
    assert decoder.grid is grid


def test_bayer_neutral_round_trip():
    rng = np.random.default_rng(4)
    grey = rng.uniform(0.0, 1.0, (40, 50)).astype(np.float32)
    gains = np.array([0.8, 1.0, 0.7], np.float32)
    mosaic = mosaic_bayer(grey[..., None] * gains, 'gbrg')
    out = bayer_neutral(mosaic, 'gbrg')
    # Each phase divided by its 99th percentile: gains cancel, grey comes back up to the
    # per-phase percentile of grey itself (float32 rounding only).
    expected = grey.copy()
    for dy in (0, 1):
        for dx in (0, 1):
            expected[dy::2, dx::2] /= np.percentile(grey[dy::2, dx::2], 99)
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    with pytest.raises(InvalidInputError, match="unsupported Bayer pattern 'rgbg'"):
        bayer_neutral(mosaic, 'rgbg')
    with pytest.raises(InvalidInputError, match=r'shape \(H, W\), got \(40, 50, 3\)'):
        bayer_neutral(np.zeros((40, 50, 3)), 'rggb')


def test_load_grid_reads_grid_cli_calibration_and_bare_files(tmp_path):
    from lf_mpc_calib.io.calibration_file import CalibrationFile, save_calibration
    from lf_mpc_calib.camera.model import MPCModel
    cli = tmp_path / 'grid.yaml'
    cli.write_text(yaml.safe_dump({'lenslet_grid': GRID.to_dict(), 'fit': {'spots': 3}}))
    bare = tmp_path / 'bare.yaml'
    bare.write_text(yaml.safe_dump(GRID.to_dict()))
    cal = tmp_path / 'cal.yaml'
    model = MPCModel(k_i=1e-3, k_j=1e-3, k_u=2e-3, k_v=2e-3, u_0=0.0, v_0=0.0)
    save_calibration(cal, CalibrationFile('conventional', model, {}, ERRORS, np.zeros((1, 3)),
                                          np.array([[0.0, 0.0, 0.5]]), lenslet_grid=GRID))
    for path in (cli, bare, cal):
        g = load_grid(path)
        # Round trip through YAML: the same lattice to float precision.
        np.testing.assert_allclose(g.centres(), GRID.centres(), atol=1e-9)
        assert g.image_size == GRID.image_size and g.lattice == 'hex'


def test_load_grid_bad_files_raise(tmp_path):
    with pytest.raises(InvalidInputError, match='does not exist'):
        load_grid(tmp_path / 'none.yaml')
    (tmp_path / 'list.yaml').write_text('[1, 2]\n')
    with pytest.raises(InvalidInputError, match='expected a mapping, got list'):
        load_grid(tmp_path / 'list.yaml')
    (tmp_path / 'other.yaml').write_text('foo: 1\n')
    with pytest.raises(InvalidInputError, match=r"expected a lenslet_grid.*got keys \['foo'\]"):
        load_grid(tmp_path / 'other.yaml')
    d = GRID.to_dict()
    del d['pitch']
    (tmp_path / 'partial.yaml').write_text(yaml.safe_dump({'lenslet_grid': d}))
    with pytest.raises(InvalidInputError, match="lacks key 'pitch'"):
        load_grid(tmp_path / 'partial.yaml')


def test_grid_size_must_match_white():
    white = np.zeros((291, 300), np.float32)
    msg = r'grid is for 300x290 px images but the white image is 300x291 px'
    with pytest.raises(InvalidInputError, match=msg):
        checked_grid(GRID, white)
    with pytest.raises(InvalidInputError, match=msg):
        make_decoder(white, grid=GRID)
    assert checked_grid(GRID, np.zeros((290, 300))) is GRID and checked_grid(None, white) is None


class _MemoryFrame:
    def __init__(self, pixels):
        self.pixels = pixels

    def load(self):
        return self.pixels


@pytest.mark.parametrize('dtype', [np.uint8, np.uint16])
def test_read_image_memory_frame_same_as_file(tmp_path, dtype):
    rng = np.random.default_rng(2)
    pixels = rng.integers(0, np.iinfo(dtype).max, (9, 13), endpoint=True).astype(dtype)
    from_file = read_image(write_image(tmp_path / 'f.png', pixels))
    from_memory = read_image(_MemoryFrame(pixels))
    # The same conversion (scaled to [0, 1] float32) whatever the source: bit-exact.
    assert from_memory.dtype == np.float32 and np.array_equal(from_memory, from_file)
    assert from_memory.max() <= 1.0
