"""Tests for lf_mpc_calib.io.images (8/16-bit PNG/TIFF, mono and RGB)."""

import numpy as np
import pytest

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.images import read_image, to_uint, write_image


@pytest.mark.parametrize('suffix', ['.png', '.tif'])
@pytest.mark.parametrize('dtype', [np.uint8, np.uint16])
@pytest.mark.parametrize('channels', [1, 3])
def test_write_read_round_trip(tmp_path, suffix, dtype, channels):
    rng = np.random.default_rng(1)
    shape = (17, 23) if channels == 1 else (17, 23, 3)
    img = rng.integers(0, np.iinfo(dtype).max, shape, endpoint=True).astype(dtype)
    back = read_image(write_image(tmp_path / f'x{suffix}', img))
    # lossless formats: bit-exact, RGB order preserved
    assert back.dtype == dtype and np.array_equal(back, img)


def test_to_uint_scales_and_clips():
    a = np.array([[-1.0, 0.0, 50.0, 100.0, np.nan, 200.0]])
    assert np.array_equal(to_uint(a, top=100.0), [[0, 0, 128, 255, 0, 255]])
    assert to_uint(a, bits=16, top=100.0)[0, 3] == 65535


def test_images_bad_input(tmp_path):
    with pytest.raises(InvalidInputError, match='does not exist'):
        read_image(tmp_path / 'missing.png')
    (tmp_path / 'junk.png').write_bytes(b'not an image')
    with pytest.raises(InvalidInputError, match='not an image'):
        read_image(tmp_path / 'junk.png')
    with pytest.raises(InvalidInputError, match='uint8 or uint16'):
        write_image(tmp_path / 'f.png', np.zeros((4, 4), np.float32))
    with pytest.raises(InvalidInputError, match='must end in'):
        write_image(tmp_path / 'f.jpg', np.zeros((4, 4), np.uint8))
    with pytest.raises(InvalidInputError, match='bits'):
        to_uint(np.zeros(3), bits=12)
