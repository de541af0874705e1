"""Consumers of a focused camera's calibration: rays of raw pixels through their micro-images
with the lens-type terms, and board corners triangulated from all micro-images that see them,
against the optics' ground truth."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.features.micro_image_corners import MicroImageCornerDetector
from lf_mpc_calib.measurement.focused import (FocusedMeasurer, micro_image_types,
                                              raw_pixel_rays, triangulate_rows,
                                              type_class_map)
from lf_mpc_calib.simulation.focused_observations import focused_observations
from lf_mpc_calib.simulation.focused_raw import board_pose, lens_types_of
from lf_mpc_calib.simulation.optics import Checkerboard, preset
from lf_mpc_calib.simulation.render import render_raw, render_white


@pytest.fixture(scope='module')
def frame():
    cam = preset('focused-multifocus', scale=0.5, sensor__noise=0.0)
    det = MicroImageCornerDetector(render_white(cam, samples=4))
    det.lens_types = lens_types_of(cam, det.centres)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    rv, tv = board_pose(cam, board, 1.25 * cam.scene_distance, (12.0, -9.0, 4.0))
    raw = render_raw(cam, board, rv, tv, samples=8, noise=0.0)
    found = det.detect(raw, board)
    truth_points = board.points() @ Rotation.from_rotvec(rv).as_matrix().T + tv
    return cam, det, found.observations, truth_points


def test_corners_triangulated_through_the_type_terms(frame):
    cam, _, obs, truth_points = frame
    model, terms = cam.ground_truth_model(), cam.ground_truth_lens_types()
    # the optics' own rows (exact chief rays, per-type gaps): the type terms make the model
    # exact up to the per-type view-plane shift it leaves out (~1e-4 relative)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    rv, tv = board_pose(cam, board, 1.25 * cam.scene_distance, (12.0, -9.0, 4.0))
    exact = focused_observations(cam, board, rv[None], tv[None])
    pts, keys = triangulate_rows(model, exact, terms=terms)
    err = np.linalg.norm(pts - truth_points[keys[:, 1]], axis=1)
    depth = 1.25 * cam.scene_distance
    assert len(pts) == board.n_points and err.max() < 2e-4 * depth
    plain, keys0 = triangulate_rows(model, exact)
    err0 = np.linalg.norm(plain - truth_points[keys0[:, 1]], axis=1)
    assert err0.mean() > 5 * err.mean()
    # detected corners: the detection noise (0.15-0.2 px over a few-millimetre baseline of
    # micro-images) sets the depth error, measured 1 % of the distance on average
    pts, keys = triangulate_rows(model, obs, terms=terms)
    assert len(pts) >= 0.9 * len(np.unique(obs.point))
    err = np.linalg.norm(pts - truth_points[keys[:, 1]], axis=1)
    assert np.median(err) < 0.02 * depth


def test_raw_pixel_rays_are_the_rows_rays(frame):
    cam, det, obs, _ = frame
    model, terms = cam.ground_truth_model(), cam.ground_truth_lens_types()
    q = obs.ijuv[:, :2] + obs.ijuv[:, 2:]
    rays = raw_pixel_rays(model, det.grid, q, types=det.lens_types, terms=terms)
    expected = model.rays(terms.corrected_ijuv(obs.ijuv, obs.lens_type))
    np.testing.assert_allclose(rays, expected, rtol=0, atol=1e-12)
    outside = raw_pixel_rays(model, det.grid, [[-50.0, -50.0]])
    assert np.all(np.isnan(outside))
    with pytest.raises(InvalidInputError, match='lens type'):
        raw_pixel_rays(model, det.grid, q, terms=terms)


def test_focused_measurer_renders_and_measures_a_frame(frame):
    cam, det, _, truth_points = frame
    terms = cam.ground_truth_lens_types()
    rule = type_class_map(det.grid, det.lens_types, 3)
    assert rule is not None
    lens_types = {'terms': 'affine', 'scale': terms.scale.tolist(),
                  'offset_px': terms.offset_px.tolist(), 'weights': terms.weights.tolist(),
                  **rule}
    np.testing.assert_array_equal(micro_image_types(det.grid, lens_types), det.lens_types)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    measurer = FocusedMeasurer(cam.ground_truth_model(), det.grid, lens_types=lens_types,
                               board=board)
    rv, tv = board_pose(cam, board, 1.25 * cam.scene_distance, (12.0, -9.0, 4.0))
    raw = render_raw(cam, board, rv, tv, samples=8, noise=0.0)
    assert 'no white' in measurer.measure(raw).reason
    measurer.set_white(render_white(cam, samples=4))
    meas = measurer.measure(raw)
    assert meas.reason == '' and meas.center.ndim == 2 and meas.lightfield is None
    assert len(meas.point_ids) >= 0.9 * board.n_points
    err = np.linalg.norm(meas.points - truth_points[meas.point_ids], axis=1)
    assert np.median(err) < 0.02 * 1.25 * cam.scene_distance
    assert np.all(meas.rays_per_point >= 2) and np.all(meas.residual_m < 1e-3)


def test_render_then_find_points_is_measure_whatever_the_pixel_type(frame):
    """render + find_points (the decode node's two threads) give what measure gives; a uint8
    frame (normalised without a float copy) the same points as it in floats in [0, 1]."""
    from lf_mpc_calib.simulation.render import quantize
    cam, det, _, _ = frame
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    rv, tv = board_pose(cam, board, 1.25 * cam.scene_distance, (12.0, -9.0, 4.0))
    raw8 = quantize(render_raw(cam, board, rv, tv, samples=8, noise=0.0), 8)
    white = render_white(cam, samples=4)

    def measurer():
        return FocusedMeasurer(cam.ground_truth_model(), det.grid, board=board, white=white)
    whole = measurer().measure(raw8)
    assert whole.reason == '' and len(whole.point_ids) >= 0.9 * board.n_points
    split = measurer()
    rendered, frame_state = split.render(raw8)
    assert rendered.reason == 'no board to measure' and len(rendered.point_ids) == 0
    np.testing.assert_array_equal(rendered.center, whole.center)
    found = split.find_points(rendered, frame_state)
    np.testing.assert_array_equal(found.point_ids, whole.point_ids)
    np.testing.assert_allclose(found.points, whole.points, rtol=0, atol=1e-12)
    assert found.corner_search == whole.corner_search and 'detect' in found.timings
    floats = measurer().measure(raw8.astype(np.float32) / np.float32(255.0))
    np.testing.assert_allclose(floats.center * 255.0, whole.center, rtol=0, atol=1e-3)
    np.testing.assert_array_equal(floats.point_ids, whole.point_ids)
    # the float32 rounding of the normalised frame differs (one scale divided in, or not),
    # which moved the points by up to 0.24 mm here: 4e-4 of the distance, where the
    # detection's own noise is 1 % of it
    diff = np.linalg.norm(floats.points - whole.points, axis=1).max()
    assert diff < 1e-3 * 1.25 * cam.scene_distance, diff
