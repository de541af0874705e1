"""
Every lattice orientation and layout (issue 26 part 5): column-shifted hexagonal lattices and
cameras mounted in portrait, each turned by up to 5 degrees either way, go through grid,
decode, views, corners and calibration like the row-major presets they were turned from.
"""

import numpy as np
import pytest
import yaml
from scipy.spatial import cKDTree

from lf_mpc_calib.cli import main
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.lenslet.estimate import estimate_grid
from lf_mpc_calib.lenslet.grid import LensletGrid, layout_of, row_direction
from lf_mpc_calib.simulation.lattice_turn import turn_lattice
from lf_mpc_calib.simulation.optics import preset
from lf_mpc_calib.simulation.render import quantize, render_white

pytestmark = pytest.mark.cost(50)   # s on the CI machine: scheduled early (conftest)

TURNS = [(layout, portrait, deg) for layout, portrait in (('columns', False), ('rows', True))
         for deg in (-5.0, 0.0, 5.0)]


def _whole_error(grid, truth):
    """Centre error (N,) px of every whole micro-image; the grids number lenses alike."""
    assert grid.shape == truth.shape and grid.hex_parity == truth.hex_parity
    xy = truth.centres()
    half = 0.5 * truth.pitch
    whole = ((xy >= half - 0.5) & (xy <= np.array(truth.image_size) - 0.5 - half)).all(axis=1)
    return np.hypot(*(grid.centres()[whole] - xy[whole]).T)


@pytest.mark.parametrize('name,scale', [('lytro', 0.15), ('illum', 0.08),
                                        ('focused-keplerian', 0.3)])
@pytest.mark.parametrize('layout,portrait,deg', TURNS)
def test_turned_white_gives_the_true_grid(name, scale, layout, portrait, deg):
    # a column-shifted array (the preset's turned by 90 degrees on its sensor) and a camera
    # mounted in portrait (sensor and array turned), each turned 5 degrees more either way:
    # before, the estimator numbered such a lattice along a diagonal and refused it ('46 % of
    # the lattice outside the image'). Measured: mean error 0.002-0.007 px, as the presets.
    cam = turn_lattice(preset(name, scale=scale), layout=layout, degrees=deg,
                       portrait=portrait)
    truth = cam.lenslet_grid()
    if portrait:
        assert cam.sensor.size == preset(name, scale=scale).sensor.size[::-1]
    white = quantize(render_white(cam, samples=1), 8)
    grid = estimate_grid(white)
    assert grid.layout == truth.layout == 'columns'
    assert abs(np.degrees(grid.rotation) - np.degrees(truth.rotation)) < 0.05
    err = _whole_error(grid, truth)
    assert err.mean() <= 0.05 and err.max() < 0.15, (err.mean(), err.max())


def test_portrait_of_a_column_shifted_camera_is_row_major():
    cam = turn_lattice(preset('lytro', scale=0.1), layout='columns', degrees=5.0,
                       portrait=True)
    truth = cam.lenslet_grid()
    assert truth.layout == 'rows'
    assert abs(np.degrees(truth.rotation) - (5.0 + np.degrees(preset('lytro').mla.rotation))) \
        < 1e-9
    err = _whole_error(estimate_grid(quantize(render_white(cam, samples=1), 8)), truth)
    assert err.mean() <= 0.05


def test_row_direction_picks_the_row_axis_nearest_an_image_axis():
    # hexagonal: directions 60 degrees apart are the same lattice; the one nearest x or y
    for deg, want in ((0, 0), (4, 4), (-4, -4), (25, 85), (-25, 95), (30, 90), (-30, 90),
                      (90, 90), (-90, 90), (95, 95), (-85, 95), (180, 0)):
        got = np.degrees(row_direction('hex', np.radians(deg)))
        assert abs(got - want) < 1e-9, (deg, got)
        assert layout_of(np.radians(want)) == ('columns' if want > 45 else 'rows')
    # rectangular: turned by 90 degrees it is a rectangular lattice of rows again
    for deg, want in ((0, 0), (30, 30), (85, -5), (95, 5), (-90, 0)):
        assert abs(np.degrees(row_direction('rect', np.radians(deg))) - want) < 1e-9


def test_grid_files_without_a_layout_load_and_keep_their_numbering():
    # no new key: a column-shifted grid is one whose rows run at about 90 degrees, so grid and
    # calibration files written before load unchanged and a turned one round-trips
    old = {'lattice': 'hex', 'pitch': 10.0, 'row_spacing': 8.66, 'rotation': 0.002,
           'origin': [5.0, 6.0], 'shape': [40, 45], 'image_size': [410, 400], 'hex_parity': 1}
    g = LensletGrid.from_dict(old)
    assert g.layout == 'rows' and g.to_dict() == old
    turned = LensletGrid.from_dict({**old, 'rotation': np.pi / 2 + 0.05,
                                    'origin': [404.0, 5.0], 'shape': [45, 40]})
    assert turned.layout == 'columns'
    back = LensletGrid.from_dict(yaml.safe_load(yaml.safe_dump(turned.to_dict())))
    np.testing.assert_array_equal(back.centres(), turned.centres())


def test_turn_lattice_refuses_bad_layout_and_angles():
    cam = preset('lytro', scale=0.1)
    for bad in (10.5, -11, float('nan'), float('inf'), 'five'):
        with pytest.raises(InvalidInputError, match='from -10 to 10'):
            turn_lattice(cam, layout='columns', degrees=bad)
    with pytest.raises(InvalidInputError, match="layout must be one of"):
        turn_lattice(cam, layout='diagonal')
    # portrait twice: the camera turned by 180 degrees about the sensor centre, its rotation
    # brought back to the row direction nearest x (same lenses, numbered from the other end)
    twice = turn_lattice(turn_lattice(cam, portrait=True), portrait=True)
    assert abs(twice.mla.rotation - cam.mla.rotation) < 1e-12
    w, h = cam.sensor.size
    inside = (lambda xy: xy[((xy >= -0.5) & (xy <= [w - 0.5, h - 0.5])).all(axis=1)])
    turned = inside(np.array([w - 1, h - 1]) - cam.lenslet_grid().centres())
    got = inside(twice.lenslet_grid().centres())
    d, _ = cKDTree(got).query(turned)
    assert len(got) == len(turned) and d.max() < 1e-6


def test_cli_simulate_lattice_options(tmp_path, capsys):
    out = tmp_path / 'ds'
    assert main(['simulate', '--preset', 'lytro', '--scale', '0.06', '--poses', '1',
                 '--samples', '1', '--lattice-layout', 'columns', '--lattice-rotation', '-4',
                 '-o', str(out), '--quiet']) == 0
    manifest = yaml.safe_load((out / 'manifest.yaml').read_text())
    rot = manifest['camera']['mla']['rotation']
    assert abs(np.degrees(rot) - (86.0 + np.degrees(preset('lytro').mla.rotation))) < 1e-9
    assert main(['grid', str(out / 'white.png'), '-o', str(tmp_path / 'grid.yaml')]) == 0
    assert 'column-shifted' in capsys.readouterr().out
    for bad in ('12', 'nan'):
        with pytest.raises(SystemExit) as refused:      # where it enters, by argparse
            main(['simulate', '--preset', 'lytro', '--scale', '0.06', '--poses', '1',
                  '--lattice-rotation', bad, '-o', str(tmp_path / 'bad')])
        assert refused.value.code == 2
        assert 'from -10 to 10' in capsys.readouterr().err
        assert not (tmp_path / 'bad').exists()


@pytest.fixture(scope='module')
def turned_views():
    """Per camera (row-major Lytro crop, column-shifted +5 deg, portrait -5 deg): the decoded
    light fields of two rendered board poses, the true model and the board points."""
    from lf_mpc_calib.lenslet.decode import Decoder
    from lf_mpc_calib.simulation.dataset import capture_poses
    from lf_mpc_calib.simulation.optics import default_board
    from lf_mpc_calib.simulation.render import render_raw
    from scipy.spatial.transform import Rotation
    out = {}
    for key, kw in (('rows', {}), ('columns', dict(layout='columns', degrees=5.0)),
                    ('portrait', dict(portrait=True, degrees=-5.0))):
        cam = turn_lattice(preset('lytro', scale=0.3), **kw)
        board = default_board(cam)
        rvecs, tvecs = capture_poses(cam, board, 2, rng=np.random.default_rng(0))
        white = quantize(render_white(cam), 8)
        grid = estimate_grid(white)
        decoder = Decoder(grid, white=white)
        frames = [(decoder.decode(quantize(render_raw(cam, board, r, t), 8)),
                   board.points() @ Rotation.from_rotvec(r).as_matrix().T + t)
                  for r, t in zip(rvecs, tvecs)]
        out[key] = (cam, grid, cam.ground_truth_model(grid), board, frames)
    return out


def _corner_errors(model, board, frames):
    """Distance (N,) of every detected corner to the true model's nearest projected corner."""
    from lf_mpc_calib.features.corners import detect_corners
    errors = []
    for pose, (lf, xyz) in enumerate(frames):
        obs = detect_corners(lf, board, pose=pose).observations
        assert len(obs.ijuv) >= 0.8 * np.count_nonzero(lf.valid) * len(xyz)
        for ij in np.unique(obs.ijuv[:, :2], axis=0):
            mine = np.all(obs.ijuv[:, :2] == ij, axis=1)
            truth = model.project(xyz, np.tile(ij, (len(xyz), 1)))
            d, _ = cKDTree(truth).query(obs.ijuv[mine, 2:])
            errors.append(d)
    return np.concatenate(errors)


@pytest.mark.parametrize('key', ['columns', 'portrait'])
def test_turned_camera_decodes_views_and_corners_as_its_row_major_twin(turned_views, key):
    # decode (views along the lens rows, which run down the image: the views show the raw
    # image turned by 90 degrees), the usable views and the corners detected in them, against
    # the optics' exact model with the estimated grid. Measured: RMS 0.099 / 0.092 px, 99th
    # percentile 0.21 / 0.23 px (the row-major twin: 0.17, 0.47 px).
    cam, grid, model, board, frames = turned_views[key]
    lf = frames[0][0]
    assert grid.layout == 'columns'
    assert lf.views.shape[2:] == (grid.shape[1], grid.shape[0])
    twin = turned_views['rows']
    assert np.count_nonzero(lf.valid) == np.count_nonzero(twin[4][0][0].valid)
    err = _corner_errors(model, board, frames)
    ref = _corner_errors(twin[2], twin[3], twin[4])
    rms, rms_ref = (float(np.sqrt(np.mean(e ** 2))) for e in (err, ref))
    assert rms < 0.25 and rms < rms_ref + 0.05, (rms, rms_ref)
    assert np.percentile(err, 99) < 0.6


@pytest.fixture(scope='module')
def column_shifted_calibration(tmp_path_factory):
    # a half-size Lytro whose array is turned by 95 degrees (column-shifted, +5), simulate's
    # default capture of 6 poses rendered with 2 rays per pixel: the whole raw chain
    from lf_mpc_calib.pipeline.offline import calibrate_raw, load_raw_dataset
    from lf_mpc_calib.simulation.dataset import capture_poses, write_dataset
    from lf_mpc_calib.simulation.optics import default_board
    root = tmp_path_factory.mktemp('columns')
    cam = turn_lattice(preset('lytro', scale=0.5), layout='columns', degrees=5.0)
    board = default_board(cam)
    rv, tv = capture_poses(cam, board, 6, rng=np.random.default_rng(1))
    write_dataset(root, cam, board, rv, tv, seed=1, samples=2)
    return cam, calibrate_raw(load_raw_dataset(root), accept_uncertain=True)


def test_column_shifted_camera_calibrates_to_its_truth(column_shifted_calibration):
    # calibrate-raw on the column-shifted camera: grid, decode, views, corners, calibration.
    # Measured: k_i..k_v within 0.48 %, k_3, k_4 within 0.52 %, principal point 0.51 / 0.74 px,
    # RMS 0.15 px; its row-major twin (same poses): 1.58 %, 0.79 %, 0.003 / 4.0 px, RMS 0.24
    # px. This crop (views ~165 px, +-9 degrees) does not determine the principal point to
    # the full-size targets for either layout; benchmarks/bench_lattice_layouts.py measures
    # full-size Lytro twins against them.
    cam, run = column_shifted_calibration
    r, t = run.result, run.truth
    assert run.grid.layout == 'columns' and run.view_size == run.grid.shape
    sx, sy = np.sign(r.model.k_i * t.k_i), np.sign(r.model.k_j * t.k_j)
    m = r.model.replace(k_i=sx * r.model.k_i, k_u=sx * r.model.k_u, u_0=sx * r.model.u_0,
                        k_j=sy * r.model.k_j, k_v=sy * r.model.k_v, v_0=sy * r.model.v_0)
    for name in ('k_i', 'k_j', 'k_u', 'k_v'):
        err = abs(getattr(m, name) - getattr(t, name))
        assert err < 0.01 * abs(getattr(t, name)), name
        assert err < 3 * r.stddev[name] + 1e-3 * abs(getattr(t, name)), name
    for name in ('k_3', 'k_4'):
        assert abs(getattr(m, name) / getattr(t, name) - 1) < 0.05, name
    assert np.all(np.abs(m.principal_point - t.principal_point) < 1.5)
    assert r.rms_reprojection_px < 0.2 and r.converged


@pytest.mark.parametrize('deg,parity', [(90.0, 1), (95.0, 0), (85.0, 1), (30.0, 0)])
def test_synthetic_column_shifted_white_and_linear_scene_decode(deg, parity):
    # a column-shifted lattice given as rows at 90 +- 5 degrees (or at 30 degrees: the same
    # lattice, numbered along its columns once estimated); white and raw from the synthetic
    # renderer, whose scene is linear in the lens position and the view offset: every view
    # decoded with the estimated grid reads it within 1 %, hex resampling along the columns
    from lf_mpc_calib.lenslet.decode import Decoder
    from lf_mpc_calib.lenslet.grid import numbered_grid
    from lf_mpc_calib.lenslet.synthetic import raw_image, white_image
    pitch = 12.0
    truth = numbered_grid('hex', pitch, pitch * np.sqrt(3) / 2, np.radians(deg), [7.3, 4.1],
                          (230, 260))
    white = white_image(truth, radius=5.3, edge=0.5, dtype=np.float32)
    grid = estimate_grid(white)
    assert grid.layout == 'columns'
    assert abs(np.degrees(grid.rotation) - np.degrees(row_direction('hex', np.radians(deg)))) \
        < 0.02
    d, _ = cKDTree(grid.centres()).query(truth.centres())
    inside = ((truth.centres() >= 6) & (truth.centres() <= [224, 254])).all(axis=1)
    assert d[inside].mean() < 0.05

    def linear(centres, a, b):
        uv = np.linalg.solve(np.column_stack([grid.row_vector, grid.column_vector]),
                             (centres - grid.origin).T).T
        return 0.5 + 0.01 * uv[:, :1] - 0.007 * uv[:, 1:] + 0.03 * a + 0.02 * b

    raw = raw_image(grid, linear, radius=5.3, edge=0.5, dtype=np.float32)
    lf = Decoder(grid, white=white, views=(7, 7)).decode(raw)
    rows, cols = grid.shape[1], grid.shape[0]
    vv, uu = np.mgrid[0:rows, 0:cols]
    scale = float(np.median(lf.view(0, 0)[2:-2, 2:-2]
                            / (0.5 + 0.01 * uu - 0.007 * vv)[2:-2, 2:-2]))
    # lenses whose disk and both neighbours along the row (hex average and matching blur)
    # are in the image: the lattice is turned, so some rows end before the image does
    xy = grid.centres().reshape(rows, cols, 2)
    inside = ((xy >= 7) & (xy <= [222, 252])).all(axis=2)
    whole = np.zeros_like(inside)
    whole[:, 1:-1] = inside[:, 1:-1] & inside[:, :-2] & inside[:, 2:]
    assert np.count_nonzero(whole) > 0.5 * whole.size
    for i, j in [(0, 0), (2, -1), (-2, 2)]:
        want = 0.5 + 0.01 * uu - 0.007 * vv + 0.03 * i + 0.02 * j
        got = lf.view(i, j) / scale
        assert np.max(np.abs(got - want)[whole]) < 0.01, (i, j)


def test_column_shifted_multifocus_array_calibrates_with_its_lens_types(tmp_path, capsys):
    # a Raytrix-like multi-focus array turned to column-shifted (+5 degrees): calibrate-raw
    # tells its three lens types apart from the frames and calibrates within its own 3 sigma.
    # Measured: types matched one to one; k_i, k_j within 0.06 %, k_u, k_v 1.4 % (sigma 5 %:
    # 5 poses do not determine them, as for the row-major twin: 0.5 %, 2.7 %, sigma 4.4 %)
    from lf_mpc_calib.io.calibration_file import load_calibration
    from lf_mpc_calib.io.observation_table import read_observations
    from lf_mpc_calib.simulation.dataset import write_dataset
    from lf_mpc_calib.simulation.focused_raw import board_pose, lens_types_of
    from lf_mpc_calib.simulation.optics import Checkerboard
    cam = turn_lattice(preset('focused-multifocus', scale=0.5, sensor__noise=0.0),
                       layout='columns', degrees=5.0)
    assert cam.lenslet_grid().layout == 'columns'
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    poses = [board_pose(cam, board, z * cam.scene_distance, ang)
             for z, ang in ((1.0, (15, -10, 3)), (1.15, (-12, 18, -5)), (1.3, (20, 8, 2)),
                            (1.45, (-8, -20, 6)), (1.6, (10, 15, -3)))]
    root = tmp_path / 'ds'
    write_dataset(root, cam, board, np.array([r for r, _ in poses]),
                  np.array([t for _, t in poses]), samples=8, noise=0.0)
    out = tmp_path / 'cal.yaml'
    rc = main(['calibrate-raw', str(root), '-o', str(out), '--fix', 'k_1,k_2',
               '--accept-uncertain', '--lens-types', '3', '--pose-jackknife', 'off'])
    text = capsys.readouterr()
    assert rc == 0, text.err
    assert '3 micro-lens types (told from the frames)' in text.out
    cal = load_calibration(out)
    assert cal.lenslet_grid.layout == 'columns'
    obs = read_observations(tmp_path / 'cal_observations.csv')
    true = lens_types_of(cam, obs.ijuv[:, :2])
    pairs = set(zip(obs.lens_type.tolist(), true.tolist()))
    assert len(pairs) == 3 and len({a for a, _ in pairs}) == 3
    gt = cam.ground_truth_model(weights=np.bincount(true, minlength=3) / len(obs),
                                centres='lattice')
    for name in ('k_i', 'k_j', 'k_u', 'k_v'):
        got, want = abs(getattr(cal.model, name)), abs(getattr(gt, name))
        assert abs(got - want) < 3 * cal.stddev[name] + 1e-3 * want, name
    assert abs(cal.model.k_i / gt.k_i - 1) < 0.01 and abs(cal.model.k_j / gt.k_j - 1) < 0.01


def test_truth_refuses_a_grid_numbered_along_another_row_direction():
    # an array built at 30 degrees renders the lenses of a column-shifted lattice, which an
    # estimated grid numbers along rows at 90 degrees: the optics' truth for that grid would be
    # in another frame, so it is refused, not returned wrong
    cam = preset('lytro', scale=0.1, mla__rotation=np.radians(30.0))
    grid = estimate_grid(quantize(render_white(cam, samples=1), 8))
    assert abs(np.degrees(grid.rotation) - 90.0) < 0.05
    with pytest.raises(InvalidInputError, match='another frame'):
        cam.ground_truth_model(grid)
    assert cam.ground_truth_model() is not None      # its own grid (rows at 30 degrees)
