"""Tests of ``lf-mpc-calib calibrate`` (observation table -> calibration file)."""

import re

import numpy as np

from lf_mpc_calib.io.calibration_file import load_calibration
from lf_mpc_calib.cli import main
from lf_mpc_calib.cli.calibrate import guess_camera_type
from lf_mpc_calib.io.observation_table import write_observations
from lf_mpc_calib.simulation.observations import paper_scene


def _scene_csv(tmp_path, noise_px, seed):
    truth, rv, tr, obs = paper_scene(n_poses=3, n_views=3, noise_px=noise_px,
                                     rng=np.random.default_rng(seed))
    path = tmp_path / 'obs.csv'
    write_observations(path, obs)
    return truth, rv, tr, obs, path


def test_cli_calibrate_noise_free_recovers_truth(tmp_path, capsys):
    truth, rv, tr, obs, csv = _scene_csv(tmp_path, 0.0, 1)
    out = tmp_path / 'cal.yaml'
    rc = main(['calibrate', str(csv), '-o', str(out), '--no-distortion', '--quiet',
               '--report', str(tmp_path / 'report')])
    assert rc == 0
    printed = capsys.readouterr().out
    assert 'RMS reprojection error' in printed and 'k_u' in printed
    cal = load_calibration(out)
    assert cal.camera_type == 'conventional'  # guessed from integer view indices
    # noise-free data: the calibration reproduces the simulator's camera to 1e-6 relative
    # (the CSV stores repr(float), so only solver tolerances limit it)
    np.testing.assert_allclose(cal.model.to_vector()[:6], truth.to_vector()[:6], rtol=1e-6)
    np.testing.assert_array_equal(cal.model.to_vector()[6:], 0.0)  # --no-distortion
    np.testing.assert_allclose(cal.translations, tr, rtol=1e-5, atol=1e-9)
    assert cal.errors['rms_reprojection_px'] < 1e-4
    assert cal.views == {'i': [-1.0, 1.0], 'j': [-1.0, 1.0]}
    assert (tmp_path / 'report' / 'summary.txt').is_file()
    assert (tmp_path / 'report' / 'per_view_rms.png').stat().st_size > 5000


def test_cli_calibrate_noisy_with_fix_and_method(tmp_path, capsys):
    truth, _, _, obs, csv = _scene_csv(tmp_path, 0.3, 2)
    out = tmp_path / 'cal.yaml'
    rc = main(['calibrate', str(csv), '-o', str(out), '--fix', 'k_1,k_2,k_3,k_4', '--quiet',
               '--method', 'paper', '--camera-type', 'focused', '--image-size', '320', '347'])
    assert rc == 0
    cal = load_calibration(out)
    assert cal.camera_type == 'focused' and cal.image_size == (320, 347)
    rel = np.abs(cal.model.to_vector()[:6] / truth.to_vector()[:6] - 1)
    # sigma 0.3 px, 3 poses x 9 views: a few tenths of a percent at most (paper Fig. 9-11)
    assert rel.max() < 0.02
    # the residual RMS of a correct fit estimates the noise: sqrt(2) * 0.3 px in 2-D
    assert abs(cal.errors['rms_reprojection_px'] - np.sqrt(2) * 0.3) < 0.03
    np.testing.assert_array_equal(cal.model.to_vector()[6:], 0.0)


def test_cli_calibrate_bad_input(tmp_path, capsys):
    _, _, _, _, csv = _scene_csv(tmp_path, 0.0, 3)
    rc = main(['calibrate', str(csv), '-o', str(tmp_path / 'c.yaml'), '--fix', 'k_9'])
    assert rc == 1
    assert "unknown parameter(s) ['k_9']" in capsys.readouterr().err
    bad = tmp_path / 'bad.csv'
    bad.write_text('pose,point,X\n0,0,1\n')
    rc = main(['calibrate', str(bad), '-o', str(tmp_path / 'c.yaml')])
    assert rc == 1
    assert 'header must start with pose,point,X,Y,Z,i,j,u,v' in capsys.readouterr().err


def test_guess_camera_type():
    _, _, _, obs = paper_scene(n_poses=2, n_views=2, noise_px=0.0)
    assert guess_camera_type(obs) == 'conventional'
    from lf_mpc_calib.camera.observations import Observations
    shifted = Observations(obs.pose, obs.point, obs.board, obs.ijuv + [1500.25, 900.5, 0, 0])
    assert guess_camera_type(shifted) == 'focused'


def test_cli_lens_type_term_choices_are_the_calibrations():
    # the parser spells them out so that building it imports no calibration module
    from lf_mpc_calib.calibration.type_terms import LENS_TYPE_TERMS
    from lf_mpc_calib.cli.calibrate import LENS_TYPE_TERM_CHOICES
    assert LENS_TYPE_TERM_CHOICES == LENS_TYPE_TERMS


def test_cli_pose_jackknife_on_asked_and_refused_for_too_few_poses(tmp_path, capsys):
    # a conventional table: off by default ('auto' is for focused cameras), on when asked
    truth, rv, tr, obs = paper_scene(n_poses=5, n_views=3, noise_px=0.1,
                                     rng=np.random.default_rng(4))
    csv = tmp_path / 'obs5.csv'
    write_observations(csv, obs)
    assert main(['calibrate', str(csv), '-o', str(tmp_path / 'a.yaml'), '--quiet']) == 0
    assert 'leave-one-pose-out' not in capsys.readouterr().out
    assert main(['calibrate', str(csv), '-o', str(tmp_path / 'b.yaml'), '--quiet',
                 '--pose-jackknife', 'on', '--report', str(tmp_path / 'rep')]) == 0
    printed = capsys.readouterr().out
    assert 'leave-one-pose-out over 5 poses' in printed and 'principal point sd' in printed
    assert (tmp_path / 'rep' / 'pose_influence.png').is_file()
    # 3 poses: nothing to leave out, said on stderr, the calibration still written
    _, _, _, _, csv3 = _scene_csv(tmp_path, 0.1, 5)
    assert main(['calibrate', str(csv3), '-o', str(tmp_path / 'c.yaml'), '--quiet',
                 '--pose-jackknife', 'on']) == 0
    assert 'needs >= 4 poses, got 3: skipped' in capsys.readouterr().err
    assert (tmp_path / 'c.yaml').is_file()


def test_cli_calibrate_focused_table_in_calibrate_raws_orientation(tmp_path, capsys):
    # a focused camera's rays do not tell the camera frame from its point reflection
    # (calibration.focused); calibrate-raw reports k_3 + k_4 > 0 with the boards beyond the
    # main lens. Before, `calibrate` on calibrate-raw's own table returned the mirror image:
    # k_i, k_3 of the other sign and every board at negative z
    from lf_mpc_calib.calibration import calibrate
    from lf_mpc_calib.calibration.focused import orient_focused
    from lf_mpc_calib.simulation.focused_observations import focused_observations
    from lf_mpc_calib.simulation.focused_raw import board_pose
    from lf_mpc_calib.simulation.optics import Checkerboard, preset
    cam = preset('focused-keplerian', scale=0.5)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    poses = [board_pose(cam, board, z * cam.scene_distance, ang) for z, ang in (
        (1.0, (15, -10, 3)), (1.15, (-12, 18, -5)), (1.3, (20, 8, 2)), (1.45, (-8, -20, 6)),
        (1.6, (10, 15, -3)))]
    rv, tv = np.array([p[0] for p in poses]), np.array([p[1] for p in poses])
    obs = focused_observations(cam, board, rv, tv, noise_px=0.05,
                               rng=np.random.default_rng(0))
    table = tmp_path / 'calf_observations.csv'
    write_observations(table, obs)
    assert main(['calibrate', str(table), '-o', str(tmp_path / 'cal.yaml'), '--quiet']) == 0
    cal = load_calibration(tmp_path / 'cal.yaml')
    truth = cam.ground_truth_model()
    assert cal.camera_type == 'focused'
    raw_way = orient_focused(calibrate(obs, camera_type='focused'))     # calibrate-raw's
    assert np.sign(cal.model.k_i) == np.sign(raw_way.model.k_i) == np.sign(truth.k_i)
    assert cal.model.k_3 > 0 and cal.model.k_4 > 0
    # boards in front: z from the plane conjugate to the MLA, 1/k_3 beyond the main lens
    z = cal.translations[:, 2]
    np.testing.assert_allclose(z, tv[:, 2], rtol=0.05)     # measured within 2 %
    assert np.all(z + 1.0 / cal.model.k_3 > 0), 'every board beyond the main lens'


def test_cli_calibrate_progress_lines_are_labelled(tmp_path, capsys):
    # the solver's progress went out as bare numbers, '[0.03 s] 1 96.74'
    *_, csv = _scene_csv(tmp_path, 0.5, 1)
    assert main(['calibrate', str(csv), '-o', str(tmp_path / 'cal.yaml')]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert lines and all(re.search(r'\] iteration \d+ cost [0-9.e+-]+ px\^2', line)
                         for line in lines), lines[:3]
