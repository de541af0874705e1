"""Tests of the versioned YAML calibration file."""

from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from lf_mpc_calib.io.calibration_file import (
    CalibrationFile, dumps, FORMAT_VERSION, load_calibration, loads, save_calibration)
from lf_mpc_calib.errors import CalibrationFileError
from lf_mpc_calib.lenslet.grid import LensletGrid
from lf_mpc_calib.camera.model import MPCModel, PARAMETER_NAMES


def _example(rng, grid=None):
    model = MPCModel(2.4e-4, 2.5e-4, 2.0e-3, 1.9e-3, -0.32, -0.33,
                     k_1=0.01, k_2=-0.002, k_3=-4.1, k_4=-3.9)
    return CalibrationFile(
        camera_type='conventional', model=model,
        stddev={n: float(x) for n, x in zip(PARAMETER_NAMES, rng.uniform(1e-7, 1e-3, 10))},
        errors={'rms_reprojection_px': 0.4987654321, 'rms_ray_reprojection_mm': 0.0123},
        rotation_vectors=rng.normal(0, 0.3, (4, 3)), translations=rng.normal(0, 0.05, (4, 3)),
        views={'i': [-3, 3], 'j': [-3, 3]}, image_size=(320, 320), lenslet_grid=grid)


def test_calibration_file_round_trip_exact(tmp_path):
    rng = np.random.default_rng(1)
    grid = LensletGrid('hex', 23.31, 20.19, 1.5e-5, [12.5, 7.25], (176, 152), (4080, 3068))
    cal = _example(rng, grid)
    path = tmp_path / 'calibration.yaml'
    save_calibration(path, cal)
    back = load_calibration(path)
    # repr(float) round trips exactly through YAML, so equality is exact (reason: lossless I/O)
    np.testing.assert_array_equal(back.model.to_vector(), cal.model.to_vector())
    np.testing.assert_array_equal(back.rotation_vectors, cal.rotation_vectors)
    np.testing.assert_array_equal(back.translations, cal.translations)
    assert back.stddev == cal.stddev
    assert back.errors == cal.errors
    assert back.views == {'i': [-3.0, 3.0], 'j': [-3.0, 3.0]}
    assert back.image_size == (320, 320)
    assert back.lenslet_grid.to_dict() == grid.to_dict()
    assert back.frames == cal.frames and back.software == cal.software
    assert back.format_version == FORMAT_VERSION


def test_a_calibration_its_loader_refuses_is_not_written(tmp_path):
    # board coordinates in nanometres give projection centres picometres apart
    good = _example(np.random.default_rng(2))
    model = MPCModel(*(good.model.to_vector()[:6] * [1e-9, 1e-9, 1, 1, 1, 1]))
    cal = CalibrationFile(camera_type='conventional', model=model, stddev=good.stddev,
                          errors=good.errors, rotation_vectors=good.rotation_vectors,
                          translations=good.translations * 1e-9, views=good.views,
                          image_size=good.image_size)
    path = tmp_path / 'c.yaml'
    with pytest.raises(CalibrationFileError, match=r'c.yaml \(not written\): implausible'):
        save_calibration(path, cal)
    assert not path.exists()


def test_calibration_file_yaml_holds_plain_types():
    cal = _example(np.random.default_rng(2))
    d = yaml.safe_load(dumps(cal))
    assert set(d['intrinsics']) == {'k_i', 'k_j', 'k_u', 'k_v', 'u_0', 'v_0'}
    assert set(d['distortion']) == {'k_1', 'k_2', 'k_3', 'k_4'}
    assert len(d['poses']) == 4 and len(d['poses'][0]['translation_m']) == 3
    assert d['lenslet_grid'] is None
    assert d['camera_type'] == 'conventional'
    # safe_dump would have refused numpy scalars; check the types anyway
    assert isinstance(d['intrinsics']['k_i'], float)


def test_calibration_file_from_result_takes_fields():
    rng = np.random.default_rng(3)
    model = MPCModel(1e-4, 1e-4, 1e-3, 1e-3, -0.1, -0.2)
    result = SimpleNamespace(
        model=model, stddev={'k_i': 1e-8}, rms_reprojection_px=0.5,
        rms_ray_reprojection_mm=0.02, rotation_vectors=rng.normal(size=(3, 3)),
        translations=rng.normal(size=(3, 3)),
        view_ids=np.array([[-2, -1], [0, 0], [2, 3]]))
    cal = CalibrationFile.from_result(result, camera_type='focused', camera='r12')
    assert cal.views == {'i': [-2.0, 2.0], 'j': [-1.0, 3.0]}
    assert cal.stddev['k_i'] == 1e-8 and cal.stddev['k_4'] == 0.0
    assert cal.frames['optical'] == 'r12_optical_frame'
    assert cal.num_poses == 3
    back = loads(dumps(cal))
    np.testing.assert_array_equal(back.translations, result.translations)


def test_calibration_file_missing_key_is_named():
    d = yaml.safe_load(dumps(_example(np.random.default_rng(4))))
    del d['lenslet_grid']
    with pytest.raises(CalibrationFileError, match="lacks key 'lenslet_grid'"):
        loads(yaml.safe_dump(d))
    d = yaml.safe_load(dumps(_example(np.random.default_rng(4))))
    del d['intrinsics']['v_0']
    with pytest.raises(CalibrationFileError, match='intrinsics.v_0'):
        loads(yaml.safe_dump(d))
    d = yaml.safe_load(dumps(_example(np.random.default_rng(4))))
    del d['poses'][1]['translation_m']
    with pytest.raises(CalibrationFileError, match=r"poses\[1\] lacks key 'translation_m'"):
        loads(yaml.safe_dump(d))


def test_calibration_file_wrong_version_fails(tmp_path):
    d = yaml.safe_load(dumps(_example(np.random.default_rng(5))))
    d['format_version'] = 99
    path = tmp_path / 'c.yaml'
    path.write_text(yaml.safe_dump(d))
    with pytest.raises(CalibrationFileError,
                       match=r'format_version must be one of \(1, 2, 3\), got 99'):
        load_calibration(path)


def test_calibration_file_bad_input_fails(tmp_path):
    with pytest.raises(CalibrationFileError, match='camera_type must be one of'):
        CalibrationFile(camera_type='lytro', model=MPCModel(1, 1, 1, 1, 0, 0), stddev={},
                        errors={'rms_reprojection_px': 0, 'rms_ray_reprojection_mm': 0},
                        rotation_vectors=np.zeros((1, 3)), translations=np.zeros((1, 3)))
    with pytest.raises(CalibrationFileError, match='not valid YAML'):
        loads('a: [1, 2')
    with pytest.raises(CalibrationFileError, match='mapping at top level'):
        loads('- 1\n- 2\n')
    with pytest.raises(CalibrationFileError, match='cannot read'):
        load_calibration(tmp_path / 'absent.yaml')


def test_calibration_file_lens_types_optional():
    cal = _example(np.random.default_rng(6))
    d = yaml.safe_load(dumps(cal))
    assert d['lens_types'] is None
    del d['lens_types']  # optional key: files without it load
    assert loads(yaml.safe_dump(d)).lens_types is None
    import dataclasses
    terms = {'terms': 'affine', 'scale': [-0.06, 0.05, 0.01], 'offset_px': [[0.1, 0.2]] * 3}
    back = loads(dumps(dataclasses.replace(cal, lens_types=terms)))
    assert back.lens_types == terms


def test_calibration_file_deformed_grid_is_format_2(tmp_path):
    # a format-1 reader would drop the deformation silently; format 2 makes it refuse the file
    from lf_mpc_calib.lenslet.grid import LatticeDeformation
    coef = np.zeros((3, 2))
    coef[1, 0] = 0.8                                    # a 0.8 px shear across the sensor
    deform = LatticeDeformation(1, [2040.0, 1534.0], [2040.0, 1534.0], coef)
    grid = LensletGrid('hex', 23.31, 20.19, 1.5e-5, [12.5, 7.25], (176, 152), (4080, 3068),
                       deformation=deform)
    cal = _example(np.random.default_rng(2), grid)
    assert yaml.safe_load(dumps(cal))['format_version'] == 2
    back = loads(dumps(cal))
    np.testing.assert_array_equal(back.lenslet_grid.centres(), grid.centres())
    regular = _example(np.random.default_rng(2), grid.regular())
    assert yaml.safe_load(dumps(regular))['format_version'] == FORMAT_VERSION == 1


def test_covariance_round_trips_and_a_bad_one_is_refused(tmp_path):
    good = _example(np.random.default_rng(3))
    names = ['k_i', 'u_0']
    cov = {'parameters': names, 'matrix': [[4e-12, -1e-9], [-1e-9, 1e-5]]}
    cal = CalibrationFile(**{**good.__dict__, 'covariance': cov})
    path = tmp_path / 'c.yaml'
    save_calibration(path, cal)
    back_names, back = load_calibration(path).covariance_matrix()
    assert back_names == tuple(names)
    np.testing.assert_array_equal(back, cov['matrix'])
    assert good.covariance_matrix() is None
    for bad, why in (({'parameters': ['k_i', 'k_i'], 'matrix': [[1, 0], [0, 1]]}, 'distinct'),
                     ({'parameters': names, 'matrix': [[1, 0.5], [0, 1]]}, 'symmetric'),
                     ({'parameters': names, 'matrix': [[1, 0], [0, float('nan')]]}, 'finite'),
                     ({'parameters': names, 'matrix': [[-1, 0], [0, 1]]}, 'variances >= 0'),
                     ({'parameters': ['k_x'], 'matrix': [[1]]}, 'distinct names from')):
        with pytest.raises(CalibrationFileError, match=why):
            CalibrationFile(**{**good.__dict__, 'covariance': bad})
