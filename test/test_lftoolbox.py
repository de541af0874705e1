"""LFToolbox CalInfo.json in and out (lf_mpc_calib.io.lftoolbox, issue 43 #2)."""

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from lf_mpc_calib.camera.model import MPCModel
from lf_mpc_calib.cli import main
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io import lftoolbox as lt
from lf_mpc_calib.io.calibration_file import CalibrationFile, load_calibration, save_calibration

REAL = Path('/work/shared/data/lftoolbox-calinfo/CalInfo.json')
if not REAL.exists():
    REAL = Path(__file__).resolve().parents[2] / 'shared/data/lftoolbox-calinfo/CalInfo.json'
TRUTH = MPCModel(k_i=3.1e-4, k_j=2.9e-4, k_u=1.9e-3, k_v=1.87e-3, u_0=-0.36, v_0=-0.35,
                 k_3=-4.7, k_4=-4.6)
SIZE = [11, 11, 379, 379, 4]


def _h_of(m, n=11):
    """H written by the test from the toolbox's formula: s = H [i j k l 1], i 1-based with the
    centre view at (n + 1) / 2, and our pixel u = k - 1 (LFCalRefine.m FindError)."""
    c = (n + 1) / 2.0
    H = np.eye(5)
    H[0, 0], H[0, 4] = m.k_i, -m.k_i * c
    H[1, 1], H[1, 4] = m.k_j, -m.k_j * c
    H[2, 0], H[2, 2], H[2, 4] = m.k_3 * m.k_i, m.k_u, m.u_0 - m.k_u - m.k_3 * m.k_i * c
    H[3, 1], H[3, 3], H[3, 4] = m.k_4 * m.k_j, m.k_v, m.v_0 - m.k_v - m.k_4 * m.k_j * c
    return H


def _doc(H, dist=(0, 0, 0, 0, 0)):
    return {'GeneratedByInfo': {'mfilename': 'LFCalRefine', 'VersionStr': 'v0.5.1'},
            'EstCamIntrinsicsH': np.asarray(H).tolist(), 'EstCamDistortionV': list(dist),
            'EstCamPosesV': [[0.01, -0.02, 0.2, 0.1, -0.2, 0.05]],
            'CalOptions': {'LFSize': SIZE}, 'ReprojectionError': {'RMSE': 1.5e-4}}


def test_lftoolbox_simulated_mpc_gives_the_truth():
    cal = lt.parse_calinfo(_doc(_h_of(TRUTH)))
    result = lt.import_calinfo(cal)
    # exact conversion: the difference is rounding only
    assert np.allclose(result.model.to_vector(), TRUTH.to_vector(), rtol=1e-9, atol=1e-12)
    assert result.figures['max_ray_error_mm'] < 1e-9
    # the rays themselves, from the test's own reading of the toolbox formula
    rng = np.random.default_rng(3)
    idx = np.column_stack([rng.integers(1, 12, 200), rng.integers(1, 12, 200),
                           rng.uniform(1, 379, 200), rng.uniform(1, 379, 200)])
    h = np.column_stack([idx, np.ones(200)]) @ _h_of(TRUTH).T
    ours = result.model.rays(np.column_stack([idx[:, 0] - 6, idx[:, 1] - 6,
                                              idx[:, 2] - 1, idx[:, 3] - 1]))
    assert np.allclose(ours, h[:, :4], atol=1e-12)


def test_lftoolbox_radial_only_distortion_is_exact():
    truth = TRUTH.replace(k_3=0.0, k_4=0.0, k_1=0.15, k_2=-0.3)
    result = lt.import_calinfo(lt.parse_calinfo(_doc(_h_of(truth), (0.15, -0.3, 0, 0, 0))))
    assert np.allclose(result.model.to_vector(), truth.to_vector(), rtol=1e-9, atol=1e-12)


def _calfile(model, tmp_path):
    cal = CalibrationFile(camera_type='conventional', model=model, stddev={},
                          errors={'rms_reprojection_px': 0.1, 'rms_ray_reprojection_mm': 0.05},
                          rotation_vectors=[[0.1, -0.2, 0.05]], translations=[[0.01, 0, 0.2]],
                          views={'i': [-5.0, 5.0], 'j': [-5.0, 5.0]}, image_size=(379, 379))
    path = tmp_path / 'cal.yaml'
    save_calibration(path, cal)
    return path


@pytest.mark.parametrize('model', [TRUTH, TRUTH.replace(k_3=0.0, k_4=0.0, k_1=0.1, k_2=-0.2)])
def test_lftoolbox_cli_round_trip_to_1e9(tmp_path, model, capsys):
    path = _calfile(model, tmp_path)
    assert main(['export-calibration', str(path), '--format', 'lftoolbox',
                 '-o', str(tmp_path / 'CalInfo.json')]) == 0
    assert 'exact' in capsys.readouterr().out
    assert main(['import-calibration', str(tmp_path / 'CalInfo.json'),
                 '-o', str(tmp_path / 'back.yaml')]) == 0
    back = load_calibration(tmp_path / 'back.yaml')
    assert np.allclose(back.model.to_vector(), model.to_vector(), rtol=1e-9, atol=1e-12)
    assert np.allclose(back.translations, [[0.01, 0, 0.2]], atol=1e-12)
    assert back.lenslet_grid is None
    res = back.camera_metadata['lftoolbox_import']['ray_residual']
    assert res['max_ray_error_mm'] < 1e-9


def test_lftoolbox_export_refuses_unrepresentable_model_with_figures(tmp_path):
    path = _calfile(TRUTH.replace(k_1=0.2, k_2=-0.5), tmp_path)
    with pytest.raises(InvalidInputError, match=r'cannot represent.*largest miss [0-9.]+ mm'):
        lt.calinfo_document(load_calibration(path), time_str='x')


@pytest.mark.skipif(not REAL.exists(), reason='the shipped CalInfo.json is absent')
def test_lftoolbox_real_file_refused_with_its_figures(tmp_path):
    cal = lt.read_calinfo(REAL)
    # the toolbox's two planes of projection centres differ by 4.8 mm: not an MPC
    with pytest.raises(InvalidInputError, match=r'28\.77 mm \(i, k\) and 33\.61 mm.*4\.84 mm '
                                                r'apart.*> --max-ray-error-mm 0\.05'):
        lt.import_calinfo(cal)
    result = lt.import_calinfo(cal, max_ray_error_mm=2.0)
    f = result.figures
    # measured 2024: 0.83 mm RMS on the plane, 3.5 mrad RMS, 0.83 mm max at 0.196 m
    assert 0.5 < f['position_rms_mm'] < 1.2 and 2 < f['direction_rms_mrad'] < 5
    assert 0.5 < f['miss_at_working_distance_max_mm'] < 1.2
    assert main(['import-calibration', str(REAL), '-o', str(tmp_path / 'c.yaml')]) == 1
    assert not (tmp_path / 'c.yaml').exists()


@pytest.mark.parametrize('change, message', [
    (lambda d: d['GeneratedByInfo'].update(VersionStr='v0.4 released 12-Feb-2015'),
     r'VersionStr is .v0\.4'),
    (lambda d: d['EstCamIntrinsicsH'][2].__setitem__(2, 0.0), r'singular'),
    (lambda d: d['EstCamIntrinsicsH'][0].__setitem__(0, float('nan')),
     r'EstCamIntrinsicsH\[0\]\[0\] must be finite, got nan'),
    (lambda d: d['EstCamIntrinsicsH'][0].__setitem__(1, 1e-4), r'EstCamIntrinsicsH\[0\]\[1\]'),
    (lambda d: d.pop('EstCamIntrinsicsH'), r'lacks the field EstCamIntrinsicsH'),
    (lambda d: d['CalOptions'].pop('LFSize'), r'lacks the field CalOptions\.LFSize'),
    (lambda d: d.__setitem__('EstCamDistortionV', [1, 2]), r'EstCamDistortionV must be 5'),
])
def test_lftoolbox_bad_input_refused(change, message):
    d = copy.deepcopy(_doc(_h_of(TRUTH)))
    change(d)
    with pytest.raises(InvalidInputError, match=message):
        lt.parse_calinfo(d)


def test_lftoolbox_import_never_writes_over_its_input(tmp_path):
    src = tmp_path / 'CalInfo.json'
    src.write_text(json.dumps(_doc(_h_of(TRUTH))))
    before = src.read_bytes()
    assert main(['import-calibration', str(src), '-o', str(src)]) == 2
    assert src.read_bytes() == before
