"""Depth of a focused camera's frame from the micro-images' disparities, in the pixels of the
rendered image, against the depth of the simulated board and planes (multi-focus: each lens
type's terms and focus)."""

import cv2
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.features.micro_image_corners import MicroImageCornerDetector
from lf_mpc_calib.measurement.focused import (FocusedMeasurer, rendered_depth_points,
                                              type_class_map)
from lf_mpc_calib.measurement.focused_depth import MicroImageDepth
from lf_mpc_calib.simulation.focused_raw import (board_depth_truth, board_pose, lens_types_of,
                                                 scene_depth_truth)
from lf_mpc_calib.simulation.optics import IDEAL, Checkerboard, preset
from lf_mpc_calib.simulation.render import less_dark, render_raw, render_scene, render_white
from lf_mpc_calib.simulation.scene import focused_planes_scene
from lf_mpc_calib.simulation.scene_dataset import focused_depth_truth


@pytest.mark.parametrize('name, distance', [('focused-keplerian', 1.25),
                                            ('focused-galilean', 0.8)])
def test_depth_of_the_board_from_micro_image_disparities(name, distance):
    cam = preset(name, scale=0.5)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    rv, tv = board_pose(cam, board, distance * cam.scene_distance, (12.0, -9.0, 4.0))
    # white and frame as calibrate-raw hands them on: the dark frame subtracted
    raw = less_dark(cam, render_raw(cam, board, rv, tv, samples=8, rng=np.random.default_rng(0)))
    measurer = FocusedMeasurer(cam.ground_truth_model(), cam.lenslet_grid(),
                               white=less_dark(cam, render_white(cam, samples=4)))
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
    white = less_dark(cam, render_white(cam, samples=4))
    measurer = FocusedMeasurer(cam.ground_truth_model(), cam.lenslet_grid(), white=white)
    meas = measurer.measure(0.5 * white, points=False, depth=True)
    assert meas.depth is None or not np.any(np.isfinite(meas.depth))


@pytest.fixture(scope='module')
def multifocus_planes():
    """A multi-focus frame of the ``simulate --scene planes`` planes, its true depth in the
    rendered image and a measurer with the calibration calibrate-raw gives (the lattice-centre
    model, the types' 'affine-slope' terms and which micro-image has which type)."""
    return _multifocus_planes()


def _multifocus_planes(**sensor):
    """multifocus_planes on the preset's realistic sensor, or ``**IDEAL``."""
    cam = preset('focused-multifocus', scale=0.5, **sensor)
    white = less_dark(cam, render_white(cam, samples=8))   # as calibrate-raw hands it on
    rng = np.random.default_rng(3)
    scene, w = focused_planes_scene(cam, rng)
    raw = less_dark(cam, render_scene(cam, scene, samples=8, rng=rng))
    grid = cam.lenslet_grid()
    terms = cam.ground_truth_lens_types(centres='lattice')
    rule = type_class_map(grid, lens_types_of(cam, grid.centres()), cam.mla.n_types)
    measurer = FocusedMeasurer(cam.ground_truth_model(grid, centres='lattice'), grid,
                               lens_types={**terms.to_dict(), **rule}, white=white)
    return cam, measurer, raw, w, focused_depth_truth(cam, scene, w), scene


def test_multi_focus_depth_of_planes_uses_each_types_terms_and_focus(multifocus_planes):
    cam, measurer, raw, w, truth, scene = multifocus_planes
    norm = measurer.live.normalise(raw.astype(np.float32))
    size = truth.shape[::-1]
    depth = MicroImageDepth(measurer.detector, terms=measurer.terms)
    assert depth.multi and all(np.all(depth.types[a] == depth.types[b]) for a, b in depth.pairs)
    img = depth.depth_image(norm, measurer.model, w, size)
    assert img.shape == truth.shape and img.dtype == np.float32
    both = np.isfinite(img) & np.isfinite(truth)
    rel = np.abs(img[both] - truth[both]) / truth[both]
    # measured: median 0.58 %, 94 % of the planes' pixels (3.2 % comparing the types
    # with each other as one, as before the lens types were used)
    assert np.median(rel) < 0.01 and both.sum() > 0.85 * np.isfinite(truth).sum()
    assert np.all(np.isnan(img[~np.isfinite(img)]))         # unknown is NaN, never 0 or inf
    assert np.all(img[np.isfinite(img)] > 0)
    # the same frame without the types (every neighbour compared, one scale) is worse, by
    # more than the realistic sensor's noise lets one see (there both 0.19 %): on an ideal
    # sensor 0.16 % against 0.09 % with the types
    _, ideal, ideal_raw, ideal_w, ideal_truth, _ = _multifocus_planes(**IDEAL)
    ideal_norm = ideal.live.normalise(ideal_raw.astype(np.float32))
    blind = MicroImageCornerDetector(ideal.white, ideal.grid)
    errors = []
    for detector, terms in ((ideal.detector, ideal.terms), (blind, None)):
        img_ = MicroImageDepth(detector, terms=terms).depth_image(
            ideal_norm, ideal.model, ideal_w, size)
        ok = np.isfinite(img_) & np.isfinite(ideal_truth)
        errors.append(np.median(np.abs(img_[ok] - ideal_truth[ok]) / ideal_truth[ok]))
    assert errors[1] > 1.5 * errors[0], errors
    assert np.median(rel) < 3 * errors[0]          # the realistic sensor's price: 2 x
    # the decode node's path: the measurer's own w, the truth in its rendered image's pixels
    # (measured: w 0.135, median 0.64 %, 94 %)
    meas = measurer.measure(raw, points=False, depth=True)
    truth = scene_depth_truth(meas.pinhole, scene)
    both = np.isfinite(meas.depth) & np.isfinite(truth)
    rel = np.abs(meas.depth[both] - truth[both]) / truth[both]
    assert np.median(rel) < 0.01 and both.sum() > 0.85 * np.isfinite(truth).sum()


def test_multi_focus_depth_is_absent_where_the_frame_has_no_texture(multifocus_planes):
    cam, measurer, raw, w, truth, _ = multifocus_planes
    flat = raw.copy()
    half = raw.shape[1] // 2
    flat[:, :half] = 0.5 * measurer.white[:, :half]             # left half: uniform grey
    depth = MicroImageDepth(measurer.detector, terms=measurer.terms)
    img = depth.depth_image(measurer.live.normalise(flat.astype(np.float32)), measurer.model,
                            w, truth.shape[::-1])
    tile = measurer.grid.pitch * abs(w)                            # rendered px
    cut = half * abs(w)
    assert not np.any(np.isfinite(img[:, : int(cut - 2.5 * tile)]))
    right = (slice(None), slice(int(cut + 2.5 * tile), None))
    assert np.isfinite(img[right]).sum() > 0.85 * np.isfinite(truth[right]).sum()
    grey = measurer.live.normalise((0.5 * measurer.white).astype(np.float32))
    assert not np.any(np.isfinite(depth.depth_image(grey, measurer.model, w,
                                                    truth.shape[::-1])))


@pytest.mark.parametrize('name', ['focused-keplerian', 'focused-galilean', 'focused-multifocus'])
def test_planes_scene_lies_around_the_scene_distance_where_the_micro_lenses_focus(name):
    """The planes of simulate --scene planes: near the preset's scene distance from the main
    lens (the physical frame, through Camera.mpc_frame) and at least 25 % from the plane
    conjugate to the micro-lenses on the side where they focus; a scene distance near that
    plane is refused with the numbers."""
    from lf_mpc_calib.errors import InvalidInputError
    cam = preset(name)
    z_f = 1.0 / cam.main_lens.inverse_focus
    rm, tm = cam.mpc_frame()
    for seed in range(3):
        scene, w = focused_planes_scene(cam, np.random.default_rng(seed))
        z = []
        for s in scene.surfaces:
            r = Rotation.from_rotvec(s.rvec).as_matrix()
            for corner in ([0, 0, 0], [s.width, 0, 0], [0, s.height, 0], [s.width, s.height, 0]):
                z.append((rm @ (r @ np.array(corner, float) + s.tvec) + tm)[2])
        z = np.array(z)
        assert np.all(np.abs(z / cam.scene_distance - 1.0) < 0.15), z
        if z_f < cam.scene_distance:        # Keplerian: the micro-lenses focus beyond z_f
            assert w > 0 and np.all(z >= 1.25 * z_f), (w, z, z_f)
        else:                               # Galilean: before it
            assert w < 0 and np.all(z <= 0.75 * z_f), (w, z, z_f)
    with pytest.raises(InvalidInputError, match='plane conjugate'):
        focused_planes_scene(preset(name, scene_distance=1.1 * z_f), np.random.default_rng(0))
