"""A raw data set's manifest is checked against the images it names (issue 41)."""

import numpy as np
import pytest

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.images import image_bit_depth, write_image
from lf_mpc_calib.io.raw_dataset import load_raw_folder


def _image(path, dtype=np.uint8):
    img = np.full((40, 50), 100, dtype)
    img[::7, ::5] = 200
    write_image(path, img)
    return path


def _folder(root, bit_depth, *, frame_dtype=np.uint8, white_dtype=np.uint8):
    _image(root / 'white.png', white_dtype)
    _image(root / 'frame_000.png')
    _image(root / 'frame_001.png', frame_dtype)
    (root / 'manifest.yaml').write_text(
        'format: lf_mpc_calib-raw-dataset\nformat_version: 1\n'
        'board: {cols: 6, rows: 5, square_m: 0.01}\nwhite: white.png\n'
        f'bit_depth: {bit_depth}\nframes: [frame_000.png, frame_001.png]\n')
    return root


@pytest.mark.parametrize('suffix', ['.png', '.tif'])
@pytest.mark.parametrize('dtype, bits', [(np.uint8, 8), (np.uint16, 16)])
def test_image_bit_depth_reads_the_header(tmp_path, suffix, dtype, bits):
    assert image_bit_depth(_image(tmp_path / f'a{suffix}', dtype)) == bits


def test_a_manifest_whose_images_have_its_bit_depth_is_read(tmp_path):
    ds = load_raw_folder(_folder(tmp_path, 8))
    assert [p.name for p in ds.frames] == ['frame_000.png', 'frame_001.png']


def test_a_frame_of_another_bit_depth_than_the_manifest_says_is_refused_naming_both(tmp_path):
    _folder(tmp_path, 8, frame_dtype=np.uint16)
    with pytest.raises(InvalidInputError, match=r'bit_depth is 8 but frame_001.png holds '
                                                r'16-bit pixels; expected every image'):
        load_raw_folder(tmp_path)


def test_a_white_of_another_bit_depth_than_the_manifest_says_is_refused(tmp_path):
    _folder(tmp_path, 16, white_dtype=np.uint16)     # the frames are 8-bit
    with pytest.raises(InvalidInputError, match='bit_depth is 16 but frame_000.png holds 8-bit'):
        load_raw_folder(tmp_path)
    _folder(tmp_path, 8, white_dtype=np.uint16)
    with pytest.raises(InvalidInputError, match='bit_depth is 8 but white.png holds 16-bit'):
        load_raw_folder(tmp_path)
    # a white given in its place is not the manifest's to describe
    other = _image(tmp_path / 'other_white.png')
    assert load_raw_folder(tmp_path, white=other).white == other


@pytest.mark.parametrize('value', ['12', 'sixteen', 'true', '[8]'])
def test_a_bit_depth_other_than_8_or_16_is_refused(tmp_path, value):
    _folder(tmp_path, value)
    with pytest.raises(InvalidInputError, match='bit_depth must be 8 or 16, got'):
        load_raw_folder(tmp_path)
