"""calibrate-raw for focused cameras: corners from the micro-images of rendered raw frames,
per-lens-type terms in the calibration file, and the camera type told from the data (a focused
data set given as conventional, or the reverse, is refused with the reason)."""

import shutil

import numpy as np
import pytest

from lf_mpc_calib.cli import main
from lf_mpc_calib.errors import DetectionError
from lf_mpc_calib.io.calibration_file import load_calibration
from lf_mpc_calib.io.observation_table import read_observations
from lf_mpc_calib.calibration.type_terms import LensTypeTerms
from lf_mpc_calib.lenslet.nearest import MicroImageLattice
from lf_mpc_calib.measurement.focused import micro_image_types, raw_pixel_rays
from lf_mpc_calib.pipeline.focused_raw import resolve_camera_type
from lf_mpc_calib.pipeline.offline import load_raw_dataset
from lf_mpc_calib.simulation.dataset import write_dataset
from lf_mpc_calib.simulation.focused_raw import board_pose, lens_types_of
from lf_mpc_calib.simulation.optics import Checkerboard, preset

pytestmark = pytest.mark.cost(90)   # s on the CI machine: scheduled early (conftest)


@pytest.fixture(scope='module')
def multifocus(tmp_path_factory):
    root = tmp_path_factory.mktemp('focused_ds')
    cam = preset('focused-multifocus', scale=0.5, sensor__noise=0.0)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    rv, tv = [], []
    for z, ang in ((1.0, (15, -10, 3)), (1.15, (-12, 18, -5)), (1.3, (20, 8, 2)),
                   (1.45, (-8, -20, 6)), (1.6, (10, 15, -3))):
        r, t = board_pose(cam, board, z * cam.scene_distance, ang)
        rv.append(r)
        tv.append(t)
    write_dataset(root, cam, board, np.array(rv), np.array(tv), samples=8, noise=0.0)
    return root, cam


def test_calibrate_raw_focused_multifocus(multifocus, tmp_path, capsys):
    root, cam = multifocus
    out = tmp_path / 'cal.yaml'
    rc = main(['calibrate-raw', str(root), '-o', str(out), '--report', str(tmp_path / 'rep'),
               '--fix', 'k_1,k_2', '--accept-uncertain', '--lens-types', '3'])
    text = capsys.readouterr()
    assert rc == 0, text.err
    assert 'camera type: focused' in text.out
    assert '3 micro-lens types (told from the frames)' in text.out
    cal = load_calibration(out)
    assert cal.camera_type == 'focused' and cal.num_poses >= 4
    assert cal.lens_types is not None and len(cal.lens_types['scale']) == 3
    obs = read_observations(tmp_path / 'cal_observations.csv')
    assert obs.lens_type is not None
    # against the optics (weights: ray fractions per true type, the gauge of the type terms)
    true = lens_types_of(cam, obs.ijuv[:, :2])
    # raw-frame rows sit at the white's lattice centres: the exact per-type terms there are
    # 'affine-slope' (calibration.type_terms), whose optics truth is centres='lattice'
    assert cal.lens_types['terms'] == 'affine-slope'
    w = np.bincount(true, minlength=3) / len(obs)
    gt = cam.ground_truth_model(weights=w, centres='lattice')
    m = cal.model
    z = {n: (getattr(m, n) - getattr(gt, n)) / cal.stddev[n]
         for n in ('k_i', 'k_j', 'k_u', 'k_v', 'u_0', 'v_0', 'k_3', 'k_4')}
    # a half-size sensor and 5 poses determine k_u to ~4 % (sigma); the errors must be what
    # the stated sigmas say (measured: |z| <= 2.1) and k_i close
    assert max(abs(v) for v in z.values()) < 4.0, z
    assert abs(m.k_i / gt.k_i - 1) < 0.02
    assert cal.errors['rms_reprojection_px'] < 0.3
    # the file says which micro-image has which type; rays from raw pixels through the file
    types = micro_image_types(cal.lenslet_grid, cal.lens_types)
    idx = MicroImageLattice(cal.lenslet_grid).nearest(obs.ijuv[:, :2])
    np.testing.assert_array_equal(types[idx], obs.lens_type)
    terms = LensTypeTerms.from_dict(cal.lens_types)
    tt = cam.ground_truth_lens_types(w, centres='lattice')
    told_to_true = [np.bincount(true[obs.lens_type == t], minlength=3).argmax() for t in range(3)]
    z_slope = (terms.slope - tt.slope[told_to_true]) / terms.slope_std
    assert np.all(np.abs(z_slope) < 4.0), z_slope
    rays = raw_pixel_rays(cal.model, cal.lenslet_grid, obs.ijuv[:, :2] + obs.ijuv[:, 2:],
                          types=types, terms=terms)
    expected = cal.model.rays(terms.corrected_ijuv(obs.ijuv, obs.lens_type))
    np.testing.assert_allclose(rays, expected, atol=1e-9)
    report = (tmp_path / 'rep' / 'detections.txt').read_text()
    assert 'lens type 2:' in report and 'micro-images (median)' in report
    # a focused camera's leave-one-pose-out sigmas by default: printed, in the summary, plotted
    assert f'leave-one-pose-out over {cal.num_poses} poses' in text.out
    assert 'leave-one-pose-out' in (tmp_path / 'rep' / 'summary.txt').read_text()
    assert (tmp_path / 'rep' / 'pose_influence.png').is_file()


def test_calibrate_raw_focused_refuses_an_undetermined_camera(multifocus, tmp_path, capsys):
    root, _ = multifocus
    rc = main(['calibrate-raw', str(root), '-o', str(tmp_path / 'c.yaml'), '--fix', 'k_1,k_2'])
    err = capsys.readouterr().err
    assert rc != 0 and 'sigma' in err and 'Traceback' not in err
    assert not (tmp_path / 'c.yaml').exists()


def test_focused_data_given_as_conventional_is_refused(multifocus, tmp_path, capsys):
    root, _ = multifocus
    rc = main(['calibrate-raw', str(root), '-o', str(tmp_path / 'c.yaml'),
               '--camera-type', 'conventional'])
    err = capsys.readouterr().err
    assert rc != 0 and 'focused' in err and 'Traceback' not in err


def test_camera_type_from_the_frames_without_a_manifest(multifocus, tmp_path):
    root, _ = multifocus
    plain = tmp_path / 'plain'
    plain.mkdir()
    for p in root.glob('*.png'):
        shutil.copy(p, plain / p.name)
    ds = load_raw_dataset(plain, board=Checkerboard(8, 5, 0.01))
    assert ds.camera is None
    found, grid, text = resolve_camera_type(ds)
    assert found == 'focused' and grid is not None and 'edge share' in text
    with pytest.raises(DetectionError, match='not conventional'):
        resolve_camera_type(ds, 'conventional', grid=grid)


def test_conventional_data_given_as_focused_is_refused(tmp_path):
    cam = preset('lytro', scale=0.2)
    board = Checkerboard(5, 4, 0.004)
    r, t = board_pose(cam, board, cam.scene_distance, (10, 5, 0))
    write_dataset(tmp_path, cam, board, r[None], t[None], samples=2)
    (tmp_path / 'manifest.yaml').unlink()
    ds = load_raw_dataset(tmp_path, board=board)
    assert resolve_camera_type(ds)[0] == 'conventional'
    with pytest.raises(DetectionError, match='not focused'):
        resolve_camera_type(ds, 'focused')


def test_lens_types_told_from_the_frames_without_a_manifest(multifocus, tmp_path, capsys):
    root, cam = multifocus
    plain = tmp_path / 'plain'
    plain.mkdir()
    for p in root.glob('*.png'):
        shutil.copy(p, plain / p.name)
    import yaml
    board = yaml.safe_load((root / 'manifest.yaml').read_text())['board']
    out = tmp_path / 'cal.yaml'
    rc = main(['calibrate-raw', str(plain), '-o', str(out), '--board',
               f'{board["cols"]}x{board["rows"]}', '--square', str(board['square_m']),
               '--lens-types', '3', '--fix', 'k_1,k_2', '--accept-uncertain'])
    text = capsys.readouterr()
    assert rc == 0, text.err
    assert 'camera type: focused' in text.out and 'told apart by sharpness' in text.out
    obs = read_observations(tmp_path / 'cal_observations.csv')
    # the inferred types are the true ones up to their labels
    true = lens_types_of(cam, obs.ijuv[:, :2])
    pairs = set(zip(obs.lens_type.tolist(), true.tolist()))
    assert len(pairs) == 3 and len({a for a, _ in pairs}) == 3
    assert len(load_calibration(out).lens_types['scale']) == 3


def test_one_type_camera_is_not_split_into_types(tmp_path, capsys):
    cam = preset('focused-keplerian', scale=0.5, sensor__noise=0.0)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    rv, tv = [], []
    for z, ang in ((1.0, (15, -10, 3)), (1.2, (-12, 18, -5)), (1.4, (20, 8, 2)),
                   (1.6, (-8, -20, 6))):
        r, t = board_pose(cam, board, z * cam.scene_distance, ang)
        rv.append(r)
        tv.append(t)
    write_dataset(tmp_path / 'ds', cam, board, np.array(rv), np.array(tv), samples=4,
                  noise=0.0)
    (tmp_path / 'ds' / 'manifest.yaml').unlink()
    rc = main(['calibrate-raw', str(tmp_path / 'ds'), '-o', str(tmp_path / 'c.yaml'),
               '--board', '8x5', '--square', str(board.square), '--lens-types', '3',
               '--accept-uncertain'])
    err = capsys.readouterr().err
    assert rc != 0 and 'do not fall into 3 lens types' in err


def test_simulated_lens_types_are_given_only_when_asked(multifocus, tmp_path, capsys):
    root, _ = multifocus
    rc = main(['calibrate-raw', str(root), '-o', str(tmp_path / 'one.yaml'), '--fix', 'k_1,k_2',
               '--accept-uncertain', '--lens-types', '1'])
    text = capsys.readouterr()
    assert rc == 0, text.err
    assert 'has 3 micro-lens types, calibrated as one' in text.out
    assert load_calibration(tmp_path / 'one.yaml').lens_types is None
    rc = main(['calibrate-raw', str(root), '-o', str(tmp_path / 'sim.yaml'), '--fix', 'k_1,k_2',
               '--accept-uncertain', '--lens-types', 'simulated'])
    text = capsys.readouterr()
    assert rc == 0, text.err
    assert "3 micro-lens types (the simulator's true types, given)" in text.out
    with pytest.raises(SystemExit):
        main(['calibrate-raw', str(root), '-o', str(tmp_path / 'bad.yaml'), '--lens-types', 'x'])
    assert "expected an integer from 1 to 64 or 'simulated'" in capsys.readouterr().err
