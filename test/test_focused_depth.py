"""Depth of a focused camera's frame from the micro-images' disparities, in the pixels of the
rendered image, against the depth of the simulated board."""

import cv2
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.measurement.focused import FocusedMeasurer, rendered_depth_points
from lf_mpc_calib.simulation.focused_raw import board_depth_truth, board_pose
from lf_mpc_calib.simulation.optics import Checkerboard, preset
from lf_mpc_calib.simulation.render import render_raw, render_white


@pytest.mark.parametrize('name, distance', [('focused-keplerian', 1.25),
                                            ('focused-galilean', 0.8)])
def test_depth_of_the_board_from_micro_image_disparities(name, distance):
    cam = preset(name, scale=0.5)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    rv, tv = board_pose(cam, board, distance * cam.scene_distance, (12.0, -9.0, 4.0))
    raw = render_raw(cam, board, rv, tv, samples=8, rng=np.random.default_rng(0))
    measurer = FocusedMeasurer(cam.ground_truth_model(), cam.lenslet_grid(),
                               white=render_white(cam, samples=4))
    meas = measurer.measure(raw, points=False, depth=True)
    depth = meas.depth
    assert depth.shape == meas.center.shape and depth.dtype == np.float32
    truth = board_depth_truth(meas.pinhole, board, rv, tv)
    both = np.isfinite(depth) & np.isfinite(truth)
    rel = np.abs(depth[both] - truth[both]) / truth[both]
    # measured: median 1.3 % (Keplerian at 0.56 m), 1.4 % (Galilean at 0.36 m); 90 % and
    # 97 % within 5 %; 97 % and 86 % of the board's pixels get a depth
    assert np.median(rel) < 0.03 and np.mean(rel < 0.05) > 0.85
    assert both.sum() > 0.75 * np.isfinite(truth).sum()
    # off the board (the uniform background) depth only within ~2 micro-image tiles of its
    # edge (measured max 7.6 rendered px, 1.7 tiles)
    tile = measurer.grid.pitch * meas.center.shape[1] / raw.shape[1]   # rendered px
    off = np.isfinite(depth) & ~np.isfinite(truth)
    gap = cv2.distanceTransform((~np.isfinite(truth)).astype(np.uint8), cv2.DIST_L2, 3)
    assert gap[off].max() < 2.5 * tile, (gap[off].max(), tile)
    # the points of the true depth lie on the board's plane, those of the measured near it
    normal = Rotation.from_rotvec(rv).as_matrix()[:, 2]
    pts, uv = rendered_depth_points(meas.pinhole, truth, step=3)
    assert len(pts) == np.isfinite(truth[::3, ::3]).sum()
    assert np.abs((pts - tv) @ normal).max() < 1e-6      # float32 depth of ~0.5 m
    pts, uv = rendered_depth_points(meas.pinhole, depth, step=2)
    assert np.all(np.isfinite(depth[uv[:, 1], uv[:, 0]]))
    assert np.median(np.abs((pts - tv) @ normal) / np.linalg.norm(pts, axis=1)) < 0.03


def test_a_frame_without_texture_has_no_depth():
    cam = preset('focused-keplerian', scale=0.5)
    white = render_white(cam, samples=4)
    measurer = FocusedMeasurer(cam.ground_truth_model(), cam.lenslet_grid(), white=white)
    meas = measurer.measure(0.5 * white, points=False, depth=True)
    assert meas.depth is None or not np.any(np.isfinite(meas.depth))
