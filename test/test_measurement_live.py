"""Tests of lf_mpc_calib.measurement.live: decode, rectify, detect, triangulate, rays."""

import cv2
import numpy as np
import pytest

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.measurement.live import LiveMeasurer, central_view_intrinsics, rectify_maps


@pytest.fixture(scope='module')
def scene():
    """A 0.3-crop Lytro camera, its ground-truth model and grid, white and one 8-bit frame."""
    from lf_mpc_calib.simulation.dataset import random_poses
    from lf_mpc_calib.simulation.optics import default_board, preset
    from lf_mpc_calib.simulation.render import quantize, render_raw, render_white
    camera = preset('lytro', scale=0.3)
    board = default_board(camera)
    rng = np.random.default_rng(3)
    rvecs, tvecs = random_poses(camera, board, 1, rng=rng)
    white = quantize(render_white(camera), 8)
    raw = quantize(render_raw(camera, board, rvecs[0], tvecs[0], rng=rng), 8)
    grid = camera.lenslet_grid()
    truth = camera.ground_truth_model(grid)
    corners = board.points() @ cv2.Rodrigues(rvecs[0])[0].T + tvecs[0]
    return dict(camera=camera, board=board, white=white, raw=raw, grid=grid, truth=truth,
                corners=corners)


@pytest.fixture(scope='module')
def measured(scene):
    m = LiveMeasurer(scene['truth'], scene['grid'], board=scene['board'], white=scene['white'])
    return m, m.measure(scene['raw'])


def test_measure_triangulates_board_corners_near_ground_truth(measured, scene):
    _, meas = measured
    corners = scene['corners']
    assert meas.reason == ''
    assert len(meas.point_ids) == len(corners)  # every inner corner is in view
    # the 6 x 6 board is symmetric under a half turn, so the detector may label it either way
    # (calibration absorbs that in the pose): take the labelling closer to the truth
    n = len(corners)
    err = min((np.linalg.norm(meas.points - corners[ids], axis=1)
               for ids in (meas.point_ids, n - 1 - meas.point_ids)), key=np.mean)
    depth = np.linalg.norm(corners.mean(axis=0))
    # with the exact model, decoded-view corners carry ~0.03 px of disparity bias between the
    # outer views (see pipeline.clean_views); at a 2 mm baseline and 0.35 m that is a depth
    # bias of ~2-3 %: measured mean 9.2 mm (2.6 %), max 22 mm; 5 % / 10 % tolerance
    assert err.mean() < 0.05 * depth and err.max() < 0.10 * depth
    # rays of one corner meet within tens of micrometres (measured 35-65 um)
    assert np.all(meas.residual_m < 2e-4)
    assert np.all(meas.rays_per_point >= 5)


def test_measure_timings_cover_every_stage(measured):
    _, meas = measured
    assert set(meas.timings) == {'decode', 'rectify', 'detect', 'triangulate', 'rays'}
    assert all(t >= 0.0 for t in meas.timings.values())


def test_measure_rays_round_trip_through_the_model(measured, scene):
    m, meas = measured
    rays = meas.rays
    truth = scene['truth']
    np.testing.assert_allclose(np.linalg.norm(rays.directions, axis=1), 1.0, atol=1e-12)
    assert np.all(rays.origins[:, 2] == 0.0)
    assert np.all(np.abs(rays.ijuv[:, :2]) % m.ray_view_step == 0)
    # a point 0.4 m along each ray projects back to the pixel it came from
    pts = rays.origins + rays.directions * (0.4 / rays.directions[:, 2:3])
    uv = truth.project(pts, rays.ijuv[:, :2])
    np.testing.assert_allclose(uv, rays.ijuv[:, 2:], atol=1e-6)
    # intensities are the decoded views at those pixels, over the 8-bit full scale
    lf = meas.lightfield
    jj = np.searchsorted(lf.j_values, rays.ijuv[:, 1])
    ii = np.searchsorted(lf.i_values, rays.ijuv[:, 0])
    expect = lf.views[jj, ii, rays.ijuv[:, 3].astype(int), rays.ijuv[:, 2].astype(int)] / 255
    np.testing.assert_allclose(rays.intensity, expect, rtol=1e-6)
    assert 0.0 <= rays.intensity.min() and rays.intensity.max() <= 1.5


def test_measure_center_is_the_central_view_without_radial_distortion(measured):
    _, meas = measured
    lf = meas.lightfield
    np.testing.assert_array_equal(meas.center, lf.view(0, 0))  # k_1 = k_2 = 0: identity


def test_rectify_maps_follow_the_pinhole_of_the_central_view(scene):
    model = scene['truth'].replace(k_1=-0.3, k_2=0.5)
    rows, cols = 40, 50
    maps = rectify_maps(model, (rows, cols))
    k = central_view_intrinsics(model)
    rng = np.random.default_rng(0)
    v = rng.integers(0, rows, 20)
    u = rng.integers(0, cols, 20)
    # the camera point seen at rectified pixel (u, v) by the pinhole K ...
    xy = np.column_stack([(u - k[0, 2]) / k[0, 0], (v - k[1, 2]) / k[1, 1]])
    points = np.column_stack([xy, np.ones(len(u))])
    # ... is seen by the distorted central view where the map samples (float32 maps: 1e-4 px)
    seen = model.project(points, np.zeros((len(u), 2)))
    np.testing.assert_allclose(np.column_stack([maps[0][v, u], maps[1][v, u]]), seen,
                               atol=1e-4)
    assert rectify_maps(scene['truth'], (rows, cols)) is None


def test_measure_without_white_or_board(scene):
    m = LiveMeasurer(scene['truth'], scene['grid'])
    meas = m.measure(scene['raw'], rays=False)
    assert meas.reason == 'no board given' and meas.points.shape == (0, 3)
    assert meas.rays is None and 'detect' not in meas.timings
    # no white image: gain 1, views within the micro-image; the board is still found
    m = LiveMeasurer(scene['truth'], scene['grid'], board=scene['board'])
    meas = m.measure(scene['raw'], rays=False)
    assert meas.reason == '' and len(meas.point_ids) == 36


def test_measure_frame_without_board_gives_the_reason(measured, scene):
    m, _ = measured
    meas = m.measure(scene['white'])
    assert meas.points.shape == (0, 3) and 'no checkerboard' in meas.reason


def test_measure_uint16_and_float_frames_agree_with_uint8(measured, scene):
    m, meas8 = measured
    raw16 = scene['raw'].astype(np.uint16) * 257
    meas16 = m.measure(raw16, rays=False)
    # 8 -> 16 bit is exact (x 257); same corners to the remap's 1/32 px weight rounding
    np.testing.assert_allclose(meas16.points, meas8.points, atol=2e-3)
    measf = m.measure(scene['raw'].astype(np.float32) / 255, rays=False)
    np.testing.assert_allclose(measf.points, meas8.points, atol=2e-3)


def test_measure_rejects_bad_input(scene):
    from lf_mpc_calib.io.calibration_file import CalibrationFile
    with pytest.raises(InvalidInputError, match='model must be an MPCModel'):
        LiveMeasurer('model', scene['grid'])
    with pytest.raises(InvalidInputError, match='ray_step'):
        LiveMeasurer(scene['truth'], scene['grid'], ray_step=0)
    m = LiveMeasurer(scene['truth'], scene['grid'])
    with pytest.raises(InvalidInputError, match='must have shape'):
        m.measure(np.zeros((10, 10), np.uint8))
    with pytest.raises(InvalidInputError, match='white image is 10x10 px'):
        m.set_white(np.zeros((10, 10), np.uint8))
    cal = CalibrationFile(camera_type='conventional', model=scene['truth'], stddev={},
                          errors={'rms_reprojection_px': 0.0, 'rms_ray_reprojection_mm': 0.0},
                          rotation_vectors=np.zeros((0, 3)), translations=np.zeros((0, 3)))
    with pytest.raises(InvalidInputError, match='no lenslet_grid'):
        LiveMeasurer.from_calibration(cal)


def test_measure_decodes_the_usable_views_unless_all_are_asked_for(scene):
    m = LiveMeasurer(scene['truth'], scene['grid'], board=scene['board'], white=scene['white'],
                     track_corners=False)
    some = m.measure(scene['raw'], rays=False)
    every = m.measure(scene['raw'], rays=False, all_views=True)
    valid = every.lightfield.valid
    assert not valid.all() and np.array_equal(some.lightfield.valid, valid)
    assert np.array_equal(some.lightfield.views[valid], every.lightfield.views[valid])
    assert not some.lightfield.views[~valid].any() and every.lightfield.views[~valid].any()
    np.testing.assert_array_equal(some.center, every.center)
    np.testing.assert_array_equal(some.points, every.points)   # corners read usable views
    assert m.measure(scene['raw']).lightfield.views[~valid].any()   # rays: every view


def test_measure_tracks_the_corners_of_the_previous_frame(scene):
    m = LiveMeasurer(scene['truth'], scene['grid'], board=scene['board'], white=scene['white'])
    first = m.measure(scene['raw'], rays=False)
    again = m.measure(scene['raw'], rays=False)
    assert first.corner_search == 'full search: no previous frame'
    assert again.corner_search == 'tracked'
    np.testing.assert_array_equal(again.point_ids, first.point_ids)
    np.testing.assert_allclose(again.points, first.points, atol=2e-4)  # 0.2 mm at 0.35 m
    assert m.measure(scene['white'], rays=False).corner_search.startswith('full search')
    off = LiveMeasurer(scene['truth'], scene['grid'], board=scene['board'],
                       white=scene['white'], track_corners=False)
    assert off.measure(scene['raw'], rays=False).corner_search == 'full search: tracking off'
