"""The rays of a focused camera's raw pixels (lf_mpc_calib.measurement.focused_rays, the decode
node's ~/rays), against the optics' ground truth: the pixel where the optics image a board
corner in a micro-image has a ray through that corner; rays through the middle of a board
square carry its colour."""

import dataclasses

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.measurement.focused import FocusedMeasurer, type_class_map
from lf_mpc_calib.simulation.dataset import ground_truth_file
from lf_mpc_calib.simulation.focused_observations import focused_observations
from lf_mpc_calib.simulation.focused_raw import board_pose, lens_types_of
from lf_mpc_calib.simulation.optics import Checkerboard, LATTICE_LENSES, preset
from lf_mpc_calib.simulation.render import less_dark, quantize, render_raw, render_white


@pytest.fixture(scope='module')
def scene():
    # lattice lenses: the rays' micro-images are the optics' (realistic lenses sit off them)
    cam = preset('focused-keplerian', scale=0.5, sensor__noise=0.0, **LATTICE_LENSES)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    rv, tv = board_pose(cam, board, 1.25 * cam.scene_distance, (12.0, -9.0, 4.0))
    # white and frame with the dark frame subtracted, as calibrate-raw and a node given its
    # dark_image_file hand them on
    white = quantize(less_dark(cam, render_white(cam, samples=4)), 8)
    raw = quantize(less_dark(cam, render_raw(cam, board, rv, tv, samples=4, noise=0.0)), 8)
    truth = ground_truth_file(cam, rv[None], tv[None])
    return dict(camera=cam, board=board, pose=(rv, tv), white=white, raw=raw, truth=truth)


def _measurer(scene, **steps):
    m = FocusedMeasurer.from_calibration(scene['truth'], **steps)
    m.set_white(scene['white'])
    return m


def point_ray_distance(points, origins, directions):
    """(N,) distance of points (N, 3) from the rays (N, 3) origin, (N, 3) unit direction."""
    rel = points - origins
    along = np.einsum('ij,ij->i', rel, directions)
    return np.linalg.norm(rel - along[:, None] * directions, axis=1)


def pixel_footprint(model, ijuv, z):
    """(N,) metres between the rays of (i, j, u, v) and (i, j, u + 1, v) at depth z (N,)."""
    a = model.rays(ijuv)
    b = model.rays(ijuv + [0.0, 0.0, 1.0, 0.0])
    xa = a[:, :2] + a[:, 2:] * z[:, None]
    xb = b[:, :2] + b[:, 2:] * z[:, None]
    return np.linalg.norm(xa - xb, axis=1)


def test_the_pixel_that_sees_a_corner_has_a_ray_through_it(scene):
    cam, board = scene['camera'], scene['board']
    rv, tv = scene['pose']
    m = _measurer(scene, ray_step=1, ray_lens_step=1)
    meas = m.measure(scene['raw'], points=False, rays=True)
    rays = meas.rays
    assert 'rays' in meas.timings and len(rays.origins) == len(m.rays.pixels)
    np.testing.assert_allclose(np.linalg.norm(rays.directions, axis=1), 1.0, atol=1e-12)
    # the optics' own images of the corners (chief rays traced through each micro-lens)
    exact = focused_observations(cam, board, rv[None], tv[None], radius_fraction=0.8)
    corners = board.points() @ Rotation.from_rotvec(rv).as_matrix().T + tv
    q = exact.ijuv[:, :2] + exact.ijuv[:, 2:]
    pix = np.rint(q).astype(np.int64)
    width = scene['raw'].shape[1]
    key = m.rays.pixels[:, 1] * width + m.rays.pixels[:, 0]
    order = np.argsort(key)
    want = pix[:, 1] * width + pix[:, 0]
    pos = order[np.minimum(np.searchsorted(key[order], want), len(key) - 1)]
    have = key[pos] == want
    assert have.mean() > 0.95, have.mean()     # lit pixels of their micro-image
    pos = pos[have]
    x = corners[exact.point[have]]
    # the ray came from the micro-image the optics imaged the corner in
    np.testing.assert_allclose(rays.ijuv[pos, :2], exact.ijuv[have, :2], atol=1e-6)
    dist = point_ray_distance(x, rays.origins[pos], rays.directions[pos])
    # the pixel is within 0.71 px of the corner's image: its ray within 0.71 pixel footprints
    foot = pixel_footprint(m.model, exact.ijuv[have], x[:, 2])
    offset = np.linalg.norm(pix[have] - q[have], axis=1)
    assert np.all(dist <= 1.05 * offset * foot + 1e-4 * x[:, 2]), np.max(dist / foot)
    assert np.median(dist / foot) < 0.45


def test_rays_through_a_square_carry_its_colour(scene):
    """Decimated as the node does by default; rays passing within 0.3 squares of the middle of
    a board square are dark for the black squares and light for the white ones."""
    board, (rv, tv) = scene['board'], scene['pose']
    m = _measurer(scene)
    rays = m.measure(scene['raw'], points=False, rays=True).rays
    lens = m.rays.ijuv[:, :2]
    idx = m.detector.lattice.nearest(lens)
    cols = m.detector.lattice.cols
    assert np.all(idx % cols % 4 == 0) and np.all(idx // cols % 4 == 0)
    off = m.rays.pixels - np.rint(m.detector.centres[idx])
    assert np.all(off % 8 == 0)
    assert 0 < len(rays.origins) < m.detector.lit.sum() / 4 ** 2 / 8 ** 2 * 2
    a, b = np.meshgrid(np.arange(board.cols + 1), np.arange(board.rows + 1))
    mid = np.column_stack([(a.ravel() - 0.5) * board.square, (b.ravel() - 0.5) * board.square])
    shade = board.shade(mid[:, 0], mid[:, 1])
    pts = np.column_stack([mid, np.zeros(len(mid))]) @ Rotation.from_rotvec(rv).as_matrix().T \
        + tv
    dark, light, seen = [], [], 0
    for p, s in zip(pts, shade):
        near = point_ray_distance(p[None], rays.origins, rays.directions) < 0.3 * board.square
        if near.any():
            seen += 1
            (dark if s < 0.5 else light).extend(rays.intensity[near])
    assert seen > 0.5 * len(pts), seen
    assert np.percentile(dark, 90) < 0.3 and np.percentile(light, 10) > 0.6, \
        (np.percentile(dark, 90), np.percentile(light, 10))


def test_rays_only_when_asked_and_the_white_has_intensity_one(scene):
    m = _measurer(scene)
    meas = m.measure(scene['raw'], points=False)
    assert meas.rays is None and m.rays is None and 'rays' not in meas.timings
    # the white as the frame: devignetted, every lit pixel at the white's top level
    rays = m.measure(scene['white'], points=False, rays=True).rays
    # the top level: 1 on an ideal sensor, the exposure's (0.82 of full scale) on the realistic
    top = float(np.percentile(scene['white'], 99.9)) / 255.0
    assert np.median(rays.intensity) > 0.95 * top and rays.intensity.max() <= 1.0


def test_rays_follow_the_lens_type_terms(scene):
    """A multi-focus camera, the calibration's lens-type terms from the file's lens_types: the
    rays of the optics' corner images pass the corners."""
    cam = preset('focused-multifocus', scale=0.5, sensor__noise=0.0)
    board = Checkerboard(8, 5, 0.5 * cam.field_of_view(cam.scene_distance)[1] / 7)
    rv, tv = board_pose(cam, board, 1.25 * cam.scene_distance, (12.0, -9.0, 4.0))
    truth = ground_truth_file(cam, rv[None], tv[None])
    terms = cam.ground_truth_lens_types()
    grid = truth.lenslet_grid
    rule = type_class_map(grid, lens_types_of(cam, grid.centres()), terms.n_types)
    assert rule is not None
    m = FocusedMeasurer.from_calibration(
        dataclasses.replace(truth, lens_types={**terms.to_dict(), **rule}), ray_step=1,
        ray_lens_step=1)
    white = quantize(less_dark(cam, render_white(cam, samples=2)), 8)   # dark subtracted
    m.set_white(white)
    rays = m.measure(white, points=False, rays=True).rays
    exact = focused_observations(cam, board, rv[None], tv[None], radius_fraction=0.8)
    corners = board.points() @ Rotation.from_rotvec(rv).as_matrix().T + tv
    q = exact.ijuv[:, :2] + exact.ijuv[:, 2:]
    pix = np.rint(q).astype(np.int64)
    width = white.shape[1]
    key = m.rays.pixels[:, 1] * width + m.rays.pixels[:, 0]
    lookup = dict(zip(key.tolist(), range(len(key))))
    found = [(n, lookup[k]) for n, k in enumerate((pix[:, 1] * width + pix[:, 0]).tolist())
             if k in lookup]
    assert len(found) > 0.9 * len(q)
    rows, pos = (np.array(v) for v in zip(*found))
    x = corners[exact.point[rows]]
    dist = point_ray_distance(x, rays.origins[pos], rays.directions[pos])
    foot = pixel_footprint(m.model, exact.ijuv[rows], x[:, 2])
    assert np.median(dist / foot) < 0.45 and np.percentile(dist / foot, 95) < 0.75
