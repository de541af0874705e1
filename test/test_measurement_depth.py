"""Tests of lf_mpc_calib.measurement.depth: plane-sweep depth and refocus through the model."""

import cv2
import numpy as np
import pytest

from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError
from lf_mpc_calib.lenslet.decode import Decoder
from lf_mpc_calib.measurement.depth import (
    check_depth_range, default_depth_range, DepthEstimator, refocus, view_shifts)


@pytest.fixture(scope='module')
def strips():
    """A 0.3-crop Lytro camera seeing five textured strips at 0.5-2 x its focus distance."""
    from lf_mpc_calib.simulation.optics import preset
    from lf_mpc_calib.simulation.render import quantize, render_scene, render_white
    from lf_mpc_calib.simulation.scene import depth_truth, strips_scene
    camera = preset('lytro', scale=0.3)
    z_f = camera.main_lens.focus_distance
    depths = z_f * np.array([0.5, 0.7, 1.0, 1.4, 2.0])
    scene = strips_scene(camera, depths, seed=4)
    raw = quantize(render_scene(camera, scene, rng=np.random.default_rng(1), noise=0.002), 8)
    white = quantize(render_white(camera), 8)
    grid = camera.lenslet_grid()
    model = camera.ground_truth_model(grid)
    decoder = Decoder(grid, white=white)
    return dict(camera=camera, depths=depths, truth=depth_truth(camera, scene), model=model,
                decoder=decoder, lf=decoder.decode(raw), z_f=z_f)


def _strip_errors(depth, truth, z):
    """Relative errors of the pixels well inside the strip at depth z (edges eroded, and the
    view's 10 outer rows and columns: the grid holds the lenses the sensor's edge cuts, as an
    estimated grid does (one numbering, docs/file-formats.md), and the sweep at the nearest
    and farthest strips reads them up to 9 views inwards)."""
    mask = (np.abs(truth - z) < 1e-6 * z).astype(np.uint8)
    mask = cv2.erode(mask, np.ones((7, 7), np.uint8)) > 0
    mask[:10] = mask[-10:] = False
    mask[:, :10] = mask[:, -10:] = False
    return (depth[mask] - z) / z


def test_depth_matches_ground_truth_of_textured_strips(strips):
    est = DepthEstimator.for_decoder(strips['model'], strips['decoder'],
                                     depth_range=(0.4 * strips['z_f'], 2.6 * strips['z_f']))
    dm = est.estimate(strips['lf'])
    assert dm.depth.shape == strips['lf'].view_shape and dm.depth.dtype == np.float32
    for z in strips['depths']:
        rel = _strip_errors(dm.depth, strips['truth'], z)
        ok = np.isfinite(rel)
        assert ok.mean() > 0.8, f'only {ok.mean():.0%} of the strip at {z} m has a depth'
        med = float(np.median(np.abs(rel[ok])))
        # measured at 0.3 crop: 0.1 % at the focus distance, 0.2-1.5 % elsewhere; the issue's
        # limit is 1 % at focus; elsewhere the 0.05 px disparity bound (1-4 %) with margin
        limit = 0.01 if z == strips['z_f'] else 1.5 * max(est.relative_error_bound(z), 0.01)
        assert med < limit, f'median relative error {med:.4f} at {z} m > {limit:.4f}'
    # confidence: textured strips are confident
    assert np.median(dm.confidence[np.isfinite(dm.depth)]) > 0.5


def test_depth_points_lie_on_the_central_view_rays(strips):
    est = DepthEstimator.for_decoder(strips['model'], strips['decoder'])
    dm = est.estimate(strips['lf'])
    pts, uv = dm.points(step=3)
    assert len(pts) > 100 and np.all(uv % 3 == 0)
    m = strips['model']
    z = dm.depth[uv[:, 1], uv[:, 0]]
    np.testing.assert_allclose(pts[:, 2], z, rtol=1e-6)
    np.testing.assert_allclose(pts[:, 0] / pts[:, 2], m.k_u * uv[:, 0] + m.u_0, rtol=1e-6)


def test_textureless_scene_has_no_depth(strips):
    lf = strips['lf']
    import dataclasses
    flat = dataclasses.replace(lf, views=np.full_like(lf.views, 0.5))
    dm = DepthEstimator.for_decoder(strips['model'], strips['decoder']).estimate(flat)
    assert dm.valid_fraction < 0.01


def test_view_shifts_follow_the_model_projection(strips):
    m = strips['model']
    rng = np.random.default_rng(0)
    u, v = rng.uniform(10, 80, 2)
    z = 0.3
    point = np.array([(m.k_u * u + m.u_0) * z, (m.k_v * v + m.v_0) * z, z])
    ij = np.array([[3, 0], [-2, 1], [1, -3]])
    uv = m.project(np.repeat(point[None], 3, 0), ij)
    np.testing.assert_allclose(uv - [u, v], view_shifts(m, ij, [1 / z])[0], atol=1e-9)


def test_refocus_is_sharpest_at_the_strip_depth(strips):
    lf = strips['lf']
    truth = strips['truth']
    z_near = strips['depths'][0]
    mask = cv2.erode((np.abs(truth - z_near) < 1e-6).astype(np.uint8),
                     np.ones((9, 9), np.uint8)) > 0

    def sharpness(img):
        return float(np.var(cv2.Laplacian(img, cv2.CV_32F)[mask]))

    at = sharpness(refocus(lf, strips['model'], z_near))
    far = sharpness(refocus(lf, strips['model'], 2 * strips['z_f']))
    assert at > 1.5 * far


def test_bad_ranges_and_layouts_raise(strips):
    m, dec = strips['model'], strips['decoder']
    with pytest.raises(InvalidInputError, match='empty'):
        check_depth_range((0.5, 0.3))
    with pytest.raises(InvalidInputError, match='in front of the camera'):
        check_depth_range((-0.5, 1.0))
    with pytest.raises(InvalidInputError, match='k_3'):
        default_depth_range(m.replace(k_3=0.0, k_4=0.0))
    with pytest.raises(DegenerateConfigurationError, match='px of disparity'):
        DepthEstimator.for_decoder(m, dec, depth_range=(0.399, 0.401))
    with pytest.raises(DegenerateConfigurationError, match='at least 2'):
        DepthEstimator.for_decoder(m, dec, view_step=5)
    with pytest.raises(InvalidInputError, match='refocus distance'):
        refocus(strips['lf'], m, 0.0)
    est = DepthEstimator(m, (10, 12), dec.i_values, dec.j_values, dec.valid)
    with pytest.raises(InvalidInputError, match='built for'):
        est.estimate(strips['lf'])
