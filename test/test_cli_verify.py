"""Tests of ``lf-mpc-calib verify`` (front of lf_mpc_calib.pipeline.verification)."""

import hashlib
import re
import shutil

import numpy as np
import pytest
import yaml

from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.cli import main
from lf_mpc_calib.io.observation_table import write_observations
from lf_mpc_calib.simulation.dataset import random_poses, write_dataset
from lf_mpc_calib.simulation.observations import board_points, paper_camera, \
    random_poses as table_poses, simulate_observations, view_grid
from lf_mpc_calib.simulation.optics import Checkerboard, preset

pytestmark = pytest.mark.cost(20)   # s on the CI machine: scheduled early (conftest)


def _digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob('*')) if p.is_file()}


@pytest.fixture(scope='module')
def tables(tmp_path_factory):
    """A folder with cal.yaml (calibrated on poses 0-5 of 12, its table beside it as
    calibrate-raw writes it) and held.csv (poses 4-11: two of them used)."""
    root = tmp_path_factory.mktemp('verify_tables')
    rng = np.random.default_rng(1)
    board = board_points(8, 8, 3.51e-3)
    rv, tv = table_poses(12, rng=rng, board=board)
    obs = simulate_observations(paper_camera(), rv, tv, board, view_grid(5), noise_px=0.2,
                                rng=rng, image_size=(320, 347))
    write_observations(root / 'cal_observations.csv', obs.select(obs.pose < 6))
    write_observations(root / 'held.csv', obs.select(obs.pose >= 4))
    assert main(['calibrate', str(root / 'cal_observations.csv'), '-o', str(root / 'cal.yaml'),
                 '--no-distortion', '--image-size', '320', '347']) == 0
    return root, obs


def _perturbed(root, name, change):
    """A copy of cal.yaml (and its table) with ``change(intrinsics)`` applied."""
    doc = yaml.safe_load((root / 'cal.yaml').read_text())
    change(doc['intrinsics'])
    (root / f'{name}.yaml').write_text(yaml.safe_dump(doc))
    shutil.copy(root / 'cal_observations.csv', root / f'{name}_observations.csv')
    return root / f'{name}.yaml'


def test_cli_verify_table_passes_and_writes_report(tables, tmp_path, capsys):
    root, _ = tables
    before = _digest(root)
    rc = main(['verify', str(root / 'cal.yaml'), str(root / 'held.csv'), '--report',
               str(tmp_path / 'rep')])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert '2 pose(s) used in the calibration, not counted: 4, 5' in out
    assert out.count('\npose ') == 6 and 'verdict: passes' in out
    doc = yaml.safe_load((tmp_path / 'rep' / 'verification.yaml').read_text())
    assert doc['passed'] and doc['reused_poses'] == [4, 5] and len(doc['poses']) == 6
    assert (tmp_path / 'rep' / 'poses.png').stat().st_size > 10_000
    assert _digest(root) == before, 'verify wrote into its inputs'


def test_cli_verify_k_i_off_1_percent_fails(tables, capsys):
    root, _ = tables
    bad = _perturbed(root, 'k_i', lambda d: d.update(k_i=1.01 * d['k_i']))
    rc = main(['verify', str(bad), str(root / 'held.csv')])
    out = capsys.readouterr().out
    assert rc == 1
    assert 'verdict: does not pass: square size error (fitted on the pixels)' in out
    assert 'FAILS: square size error (fitted on the pixels)' in out


def test_cli_verify_only_used_captures_fails(tables, capsys):
    root, _ = tables
    rc = main(['verify', str(root / 'cal.yaml'), str(root / 'cal_observations.csv')])
    out = capsys.readouterr().out
    assert rc == 1
    assert '6 pose(s) used in the calibration, not counted' in out
    assert 'no held-out pose to measure' in out


def test_cli_verify_refuses_other_board_and_camera(tables, tmp_path, capsys):
    root, obs = tables
    held = obs.select(obs.pose >= 6)
    bigger = Observations(held.pose, held.point, 1.25 * held.board, held.ijuv)
    write_observations(tmp_path / 'bigger.csv', bigger)
    assert main(['verify', str(root / 'cal.yaml'), str(tmp_path / 'bigger.csv')]) == 1
    err = capsys.readouterr().err
    assert re.search(r"the board's square is 4\.38\d mm, the calibration's 3\.51 mm", err)
    wide = held.ijuv.copy()
    wide[:, :2] *= 2            # views -4..4 of a 9 x 9 camera
    write_observations(tmp_path / 'wide.csv', Observations(held.pose, held.point, held.board,
                                                           wide))
    assert main(['verify', str(root / 'cal.yaml'), str(tmp_path / 'wide.csv')]) == 1
    err = capsys.readouterr().err
    assert "view index i spans [-4, 4], the calibration's views [-2, 2]" in err


def test_cli_verify_report_may_not_overwrite_inputs(tables, capsys):
    root, _ = tables
    rc = main(['verify', str(root / 'cal.yaml'), str(root / 'held.csv'), '--report',
               str(root / 'cal_observations.csv')])
    assert rc == 2
    assert 'would overwrite the input' in capsys.readouterr().err


@pytest.fixture(scope='module')
def raw(tmp_path_factory):
    """Raw data sets of one Illum-like camera (same white): 4 calibration poses, calibrated,
    and 2 held-out poses."""
    root = tmp_path_factory.mktemp('verify_raw')
    camera = preset('illum', scale=0.2)
    board = Checkerboard(8, 5, 0.0065)
    rv, tv = random_poses(camera, board, 6, rng=np.random.default_rng(5), max_tilt_deg=35.0)
    write_dataset(root / 'cal', camera, board, rv[:4], tv[:4], seed=5, samples=2)
    write_dataset(root / 'held', camera, board, rv[4:], tv[4:], seed=5, samples=2)
    assert main(['calibrate-raw', str(root / 'cal'), '-o', str(root / 'cal.yaml'), '--views',
                 '7x7', '--accept-uncertain', '--quiet']) == 0
    return root


def test_cli_verify_raw_dataset(raw, tmp_path, capsys):
    before = _digest(raw / 'held')
    rc = main(['verify', str(raw / 'cal.yaml'), str(raw / 'held'), '--report',
               str(tmp_path / 'rep')])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert '[1/2] frame_000.png: ' in out and out.count('\npose ') == 2
    assert _digest(raw / 'held') == before
    assert main(['verify', str(raw / 'cal.yaml'), str(raw / 'held'), '--report',
                 str(raw / 'held' / 'rep')]) == 2
    assert 'is inside the data set' in capsys.readouterr().err
    # the calibration's own frames, detected again: counted apart
    assert main(['verify', str(raw / 'cal.yaml'), str(raw / 'cal'), '--quiet']) == 1
    assert '4 pose(s) used in the calibration, not counted: 0, 1, 2, 3' in \
        capsys.readouterr().out
    # the views of another camera: every frame refused with both sizes
    doc = yaml.safe_load((raw / 'cal.yaml').read_text())
    doc['image_size'] = [doc['image_size'][0] + 4, doc['image_size'][1]]
    (tmp_path / 'other.yaml').write_text(yaml.safe_dump(doc))
    rc = main(['verify', str(tmp_path / 'other.yaml'), str(raw / 'held'), '--quiet'])
    assert rc == 1
    assert "the calibration's are" in capsys.readouterr().err


@pytest.fixture(scope='module')
def arm_tables(tmp_path_factory):
    """An eye-in-hand session as tables: cal.yaml calibrated with its hand-eye from captures
    0-5 (`calibrate --robot-poses`), held.csv of captures 6-11, robot.csv of all."""
    from lf_mpc_calib.io.robot_poses import write_robot_poses_csv
    from lf_mpc_calib.simulation.arm import arm_scene
    root = tmp_path_factory.mktemp('verify_arm')
    sc = arm_scene('eye-in-hand', n_captures=12, noise_px=0.2, rng=np.random.default_rng(2),
                   board=board_points(8, 8, 3.51e-3), views=view_grid(5))
    write_robot_poses_csv(root / 'robot.csv', [str(k) for k in range(12)], sc.robot_rvecs,
                          sc.robot_tvecs)
    write_observations(root / 'cal_observations.csv', sc.obs.select(sc.obs.pose < 6))
    write_observations(root / 'held.csv', sc.obs.select(sc.obs.pose >= 6))
    assert main(['calibrate', str(root / 'cal_observations.csv'), '-o', str(root / 'cal.yaml'),
                 '--no-distortion', '--robot-poses', str(root / 'robot.csv')]) == 0
    return root


def test_cli_verify_arm_base_spread(arm_tables, capsys):
    root = arm_tables
    args = [str(root / 'held.csv'), '--robot-poses', str(root / 'robot.csv'),
            '--robot-accuracy', '0']          # the simulated arm is exact
    capsys.readouterr()
    assert main(['verify', str(root / 'cal.yaml')] + args) == 0
    out = capsys.readouterr().out
    assert re.search(r'  board position spread in the base frame [0-9.]+ mm', out), out
    bad = _perturbed(root, 'u_0', lambda d: d.update(u_0=d['u_0'] - d['k_u']))   # 1 px
    assert main(['verify', str(bad)] + args) == 1
    out = capsys.readouterr().out
    assert 'verdict: does not pass: board position spread in the base frame' in out
