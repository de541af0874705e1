"""
Reads bounded by a file's size (issue 41): a device or FIFO is refused before it is opened
(``/dev/zero`` never ends), every read stops at a stated limit, and a .npy or image header
claiming more than the limit, or than the file holds, is refused before anything is allocated.
"""

import os
import struct

import numpy as np
import pytest

from lf_mpc_calib.errors import CalibrationFileError, InvalidInputError
from lf_mpc_calib.io.file_checks import check_npy, load_npy, read_bytes


READERS = ['yaml', 'table', 'calibration', 'image', 'npy', 'r12', 'robot_poses', 'raytrix_xml',
           'dataset_image']


@pytest.mark.parametrize('reader', READERS)
def test_library_readers_refuse_a_device_or_fifo(tmp_path, reader):
    from lf_mpc_calib.io.calibration_file import load_calibration
    from lf_mpc_calib.io.images import read_image
    from lf_mpc_calib.io.observation_table import read_observations
    from lf_mpc_calib.io.raytrix_r12 import read_r12
    from lf_mpc_calib.io.raytrix_xml import read_raytrix_xml
    from lf_mpc_calib.io.robot_poses import read_robot_poses
    from lf_mpc_calib.io.yaml_file import read_yaml
    from lf_mpc_calib.simulation.dataset import _imread
    read = {'yaml': read_yaml, 'table': read_observations, 'calibration': load_calibration,
            'image': read_image, 'npy': lambda p: load_npy(p, 'array'), 'r12': read_r12,
            'robot_poses': read_robot_poses,
            'raytrix_xml': lambda p: read_raytrix_xml(p, (100, 100)),
            'dataset_image': _imread}[reader]
    fifo = tmp_path / 'fifo'
    os.mkfifo(fifo)                 # opening it would block until a writer came
    refused = (InvalidInputError, CalibrationFileError)
    with pytest.raises(refused, match='FIFO.*expected a regular'):
        read(fifo)
    with pytest.raises(refused, match='character device, expected a regular file'):
        read('/dev/zero')


def test_reads_stop_at_their_limit(tmp_path):
    path = tmp_path / 'big.yaml'
    path.write_bytes(b'a: 1\n' * 100)
    with pytest.raises(InvalidInputError, match='500 bytes, expected at most 499 bytes'):
        read_bytes(path, 'file', 499)
    assert read_bytes(path, 'file', 500) == b'a: 1\n' * 100


def test_yaml_limit_is_checked_before_reading(tmp_path, monkeypatch):
    from lf_mpc_calib.io import yaml_file
    path = tmp_path / 'c.yaml'
    path.write_text('x: ' + '1' * 1000 + '\n')
    monkeypatch.setattr(yaml_file, 'MAX_BYTES', 100)
    with pytest.raises(InvalidInputError, match=r'1004 bytes, expected at most 100 bytes'):
        yaml_file.read_yaml(path)


def _npy_claiming(path, shape):
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': %r, }" % (shape,)
    header = header.ljust(118) + '\n'
    path.write_bytes(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode()
                     + b'\0' * 64)
    return path


def test_npy_header_claiming_more_than_the_file_holds_is_refused_before_allocating(tmp_path):
    path = _npy_claiming(tmp_path / 'd.npy', (100000, 100000))
    with pytest.raises(InvalidInputError, match=r'claims \(100000, 100000\) float64 '
                                                r'\(80000000000 bytes\), expected at most'):
        check_npy(path, 'depth map')
    path = _npy_claiming(tmp_path / 'e.npy', (100, 100))
    with pytest.raises(InvalidInputError, match='file holds 64 bytes of data'):
        load_npy(path, 'depth map')
    good = tmp_path / 'g.npy'
    np.save(good, np.arange(6.0).reshape(2, 3))
    assert load_npy(good, 'depth map').shape == (2, 3)


def test_depth_truth_npy_claiming_100000_squared_is_refused_naming_truth(tmp_path):
    from lf_mpc_calib.cli.depth import load_truth
    path = _npy_claiming(tmp_path / 't.npy', (100000, 100000))
    with pytest.raises(InvalidInputError, match='--truth'):
        load_truth(path)


def test_png_header_claiming_more_pixels_than_the_limit_is_refused_before_decoding(tmp_path):
    import cv2
    from lf_mpc_calib.io.images import MAX_IMAGE_PIXELS, read_image
    small = tmp_path / 's.png'
    cv2.imwrite(str(small), np.zeros((3, 4), np.uint8))
    data = small.read_bytes()
    big = tmp_path / 'b.png'
    big.write_bytes(data[:16] + struct.pack('>II', 20000, 20000) + data[24:])
    assert 20000 * 20000 > MAX_IMAGE_PIXELS
    with pytest.raises(InvalidInputError, match=r'header claims 20000 x 20000 pixels, '
                                                r'expected at most 100000000'):
        read_image(big)
    assert read_image(small).shape == (3, 4)


def test_yaml_integer_of_5000_digits_is_refused_not_an_internal_error(tmp_path):
    from lf_mpc_calib.io.calibration_file import load_calibration
    path = tmp_path / 'c.yaml'
    path.write_text('format_version: ' + '9' * 5000 + '\n')
    with pytest.raises(CalibrationFileError, match='expected numbers of ordinary size'):
        load_calibration(path)
