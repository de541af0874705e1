"""Tests for lf_mpc_calib.io.lytro: Lytro .lfr/.lfp/.raw files written here in their format."""

import numpy as np
import pytest

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.calibration_file import CalibrationFile, dumps, loads
from lf_mpc_calib.io.images import read_float_image, read_image
from lf_mpc_calib.io.lytro import (pack_raw, read_lytro, read_lytro_metadata, select_white,
                                   SENSORS)
from lf_mpc_calib.io.raw_dataset import load_raw_folder
from lf_mpc_calib.camera.board import Checkerboard
from lytro_files import f01_metadata, illum_metadata, private, write_lfp, write_raw


def _codes(shape, bits, seed=0):
    return np.random.default_rng(seed).integers(0, 2 ** bits, shape).astype(np.uint16)


def test_pack_matches_the_documented_bit_layout():
    # Illum 10 bit: four high bytes, then the low 2 bits of pixel k in bits 2k, 2k+1.
    assert pack_raw(np.array([[1023, 0, 512, 3]]), 10) == bytes([255, 0, 128, 0, 0b11000011])
    # F01 12 bit big-endian: p0 = b0 << 4 | b1 >> 4, p1 = (b1 & 15) << 8 | b2.
    assert pack_raw(np.array([[0xABC, 0x123]]), 12) == bytes([0xAB, 0xC1, 0x23])


def test_illum_lfr_round_trip_with_metadata(tmp_path):
    codes = _codes((12, 16), 10, seed=1)
    meta = illum_metadata(16, 12, zoom=321, focus=-45)
    path = write_lfp(tmp_path / 'IMG_0001.lfr', codes, meta, private('sn-A'), bits=10)
    img = read_lytro(path)
    assert img.codes.dtype == np.uint16 and np.array_equal(img.codes, codes)
    m = img.metadata
    assert (m.model, m.serial, m.zoom_step, m.focus_step) == ('ILLUM', 'sn-A', 321.0, -45.0)
    assert (m.exposure_s, m.iso, m.bits, m.bayer) == (0.01, 200.0, 10, 'grbg')
    expect = np.clip((codes.astype(np.float64) - 64) / (1023 - 64), 0, 1)
    np.testing.assert_allclose(img.normalized(), expect, atol=1e-6)
    # The PNG/TIFF readers dispatch on the suffix.
    np.testing.assert_allclose(read_float_image(path), expect, atol=1e-6)
    assert read_image(path).dtype == np.uint16
    np.testing.assert_allclose(read_image(path) / 65535.0, expect, atol=1e-5)
    assert read_lytro_metadata(path).serial == 'sn-A'


def test_f01_lfp_and_raw_sidecars(tmp_path):
    codes = _codes((6, 10), 12, seed=2)
    lfp = write_lfp(tmp_path / 'IMG_0002.lfp', codes, f01_metadata(10, 6), private('f-1'),
                    bits=12, layout='f01')
    img = read_lytro(lfp)
    assert np.array_equal(img.codes, codes)
    assert (img.metadata.model, img.metadata.bayer, img.metadata.bits) == ('F01', 'bggr', 12)
    # White-image archive layout (MOD_0000.RAW + .TXT) and Lytro Desktop export layout.
    raw = write_raw(tmp_path / 'MOD_0000.RAW', codes, 12, f01_metadata(10, 6, zoom=3),
                    private('f-1'))
    assert np.array_equal(read_lytro(raw).codes, codes)
    assert read_lytro(raw).metadata.zoom_step == 3.0
    exp = write_raw(tmp_path / 'frame.raw', _codes((4, 8), 10), 10, illum_metadata(8, 4),
                    private('i-2'), sidecar='export')
    m = read_lytro(exp).metadata
    assert (m.model, m.serial, m.bayer) == ('ILLUM', 'i-2', 'grbg')


def test_full_size_f01_raw_without_metadata(tmp_path):
    # No sidecar: only a full F01 sensor's byte count (3280 x 3280 x 12 bit) is accepted.
    bits, _, w, h, bayer = SENSORS['F01']
    codes = _codes((h, w), 12, seed=3)
    path = write_raw(tmp_path / 'x.raw', codes, 12, sidecar=None)
    img = read_lytro(path)
    assert np.array_equal(img.codes, codes) and img.metadata.bayer == bayer == 'bggr'
    assert img.metadata.serial is None


def test_bayer_from_model_when_mosaic_absent(tmp_path):
    path = write_lfp(tmp_path / 'a.lfr', _codes((4, 8), 10), illum_metadata(8, 4, mosaic=False),
                     private('x'), bits=10)
    assert read_lytro_metadata(path).bayer == 'grbg'


def test_bad_files_raise_invalid_input_naming_file_and_fault(tmp_path):
    path = write_lfp(tmp_path / 'good.lfr', _codes((8, 16), 10), illum_metadata(16, 8),
                     private('x'), bits=10)
    data = path.read_bytes()
    # Truncated anywhere: in the header, inside a section header, inside the data.
    for cut in (10, 40, len(data) - 20):
        bad = tmp_path / f'cut{cut}.lfr'
        bad.write_bytes(data[:cut])
        with pytest.raises(InvalidInputError, match=rf'cut{cut}\.lfr.*(truncated|magic)'):
            read_lytro(bad)
    wrong = tmp_path / 'png.lfr'
    wrong.write_bytes(b'\x89PNG\r\n\x1a\n' + b'\0' * 100)
    with pytest.raises(InvalidInputError, match=r'png\.lfr: not a Lytro LFP/LFR container'):
        read_lytro(wrong)
    corrupt = tmp_path / 'corrupt.lfr'
    corrupt.write_bytes(data.replace(b'"ILLUM"', b'"ILLUM'))
    with pytest.raises(InvalidInputError, match=r'corrupt\.lfr: metadata is not valid JSON'):
        read_lytro(corrupt)
    no_image = write_lfp(tmp_path / 'shared.lfp', _codes((8, 16), 10), illum_metadata(16, 8),
                         private('x'), bits=10, image=False)
    with pytest.raises(InvalidInputError, match='holds no raw light-field image'):
        read_lytro(no_image)
    # .raw whose size does not fit its metadata; unsupported packing; no metadata at all.
    raw = write_raw(tmp_path / 'w.raw', _codes((8, 16), 10), 10, illum_metadata(16, 9),
                    private('x'))
    with pytest.raises(InvalidInputError, match=r'w\.raw: the raw image holds 160 bytes but '
                                                r'16x9 pixels at 10 bit need 180'):
        read_lytro(raw)
    meta = illum_metadata(16, 8)
    meta['image']['pixelPacking'] = {'bitsPerPixel': 14, 'endianness': 'little'}
    odd = write_raw(tmp_path / 'odd.raw', _codes((8, 16), 10), 10, meta, private('x'))
    with pytest.raises(InvalidInputError, match='unsupported pixel packing 14-bit little'):
        read_lytro(odd)
    bare = write_raw(tmp_path / 'bare.raw', _codes((8, 16), 10), 10, sidecar=None)
    with pytest.raises(InvalidInputError, match=r'bare\.raw: no metadata'):
        read_lytro(bare)
    with pytest.raises(InvalidInputError, match='does not exist'):
        read_lytro(tmp_path / 'missing.lfr')


def _white_archive(folder, entries):
    folder.mkdir()
    for n, (serial, zoom, focus) in enumerate(entries):
        write_raw(folder / f'MOD_{n:04d}.RAW', _codes((4, 8), 10, seed=n), 10,
                  illum_metadata(8, 4, zoom=zoom, focus=focus), private(serial))
    return folder


def test_select_white_nearest_zoom_then_focus_of_same_serial(tmp_path):
    whites = _white_archive(tmp_path / 'whites', [
        ('A', 100, 0), ('A', 200, 10), ('A', 200, 90), ('A', 400, 50), ('B', 195, 60)])
    (whites / 'notes.txt').write_text('not a white image')
    frame = read_lytro_metadata(write_lfp(tmp_path / 'f.lfr', _codes((4, 8), 10),
                                          illum_metadata(8, 4, zoom=190, focus=60),
                                          private('A'), bits=10))
    choice = select_white(whites, frame)
    # Zoom first (200 beats serial B's 195 and A's 100), then focus (90 is nearer 60 than 10).
    assert choice.file.name == 'MOD_0002.RAW'
    assert (choice.zoom_gap, choice.focus_gap) == (10.0, 30.0)
    other = read_lytro_metadata(write_lfp(tmp_path / 'g.lfr', _codes((4, 8), 10),
                                          illum_metadata(8, 4), private('C'), bits=10))
    with pytest.raises(InvalidInputError, match=r"no white image of camera serial 'C'.*"
                                                r"serials found: \['A', 'B'\]"):
        select_white(whites, other)
    anonymous = read_lytro_metadata(write_raw(tmp_path / 'n.raw', _codes((4, 8), 10), 10,
                                              illum_metadata(8, 4), {}))
    with pytest.raises(InvalidInputError, match='has no serial; cannot choose a white'):
        select_white(whites, anonymous)


def test_load_raw_folder_lytro_frames_pick_white_and_record_metadata(tmp_path):
    whites = _white_archive(tmp_path / 'whites', [('A', 100, 0), ('A', 300, 40)])
    frames = tmp_path / 'frames'
    frames.mkdir()
    for k in range(2):
        write_lfp(frames / f'IMG_{k}.lfr', _codes((4, 8), 10, seed=k),
                  illum_metadata(8, 4, zoom=280, focus=35), private('A'), bits=10)
    board = Checkerboard(4, 3, 0.01)
    ds = load_raw_folder(frames, board=board, white=whites)
    assert ds.white.name == 'MOD_0001.RAW' and ds.demosaic == 'grbg'
    meta = ds.camera_metadata
    assert (meta['serial'], meta['zoom_step'], meta['focus_step']) == ('A', 280.0, 35.0)
    assert meta['white_image']['file'] == 'MOD_0001.RAW' and meta['frames'] == 2
    # The calibration file keeps it (optional key, format_version 1 unchanged).
    write_lfp(frames / 'IMG_9.lfr', _codes((4, 8), 10), illum_metadata(8, 4, zoom=100),
              private('A'), bits=10)
    with pytest.raises(InvalidInputError, match=r"differ in zoom_step.*\['IMG_9.lfr'\]"):
        load_raw_folder(frames, board=board, white=whites)
    (frames / 'IMG_9.lfr').unlink()
    with pytest.raises(InvalidInputError, match="white image .*MOD_0000.RAW is from camera "
                                                "serial 'A' but the frames are from 'Z'"):
        wrong = tmp_path / 'wrong'
        wrong.mkdir()
        write_lfp(wrong / 'IMG.lfr', _codes((4, 8), 10), illum_metadata(8, 4), private('Z'),
                  bits=10)
        load_raw_folder(wrong, board=board, white=whites / 'MOD_0000.RAW')


def test_calibration_file_keeps_camera_metadata():
    from lf_mpc_calib.camera.model import MPCModel
    model = MPCModel.from_dict({'k_i': 1e-4, 'k_j': 1e-4, 'k_u': 2e-3, 'k_v': 2e-3,
                                'u_0': -0.1, 'v_0': -0.1},
                               {'k_1': 0.0, 'k_2': 0.0, 'k_3': 0.0, 'k_4': 0.0})
    meta = {'make': 'Lytro', 'model': 'ILLUM', 'serial': 'A', 'zoom_step': 280.0,
            'white_image': {'file': 'MOD_0001.RAW'}}
    cal = CalibrationFile('conventional', model, {}, {'rms_reprojection_px': 0.1,
                                                      'rms_ray_reprojection_mm': 0.01},
                          np.zeros((0, 3)), np.zeros((0, 3)), camera_metadata=meta)
    assert loads(dumps(cal)).camera_metadata == meta
    plain = CalibrationFile('conventional', model, {}, cal.errors, np.zeros((0, 3)),
                            np.zeros((0, 3)))
    assert 'camera_metadata' not in plain.to_dict()
    assert loads(dumps(plain)).camera_metadata is None
