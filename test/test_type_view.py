"""The per-type view-plane scale of multi-focus cameras ('affine-view' lens-type terms, rows at
each micro-image's own centre) and its form for rows at a regular lattice's centres
('affine-slope', the raw pipeline's grid): the optics' exact truths, their joint estimation
against them on exact optics rows, the calibration file, and the consumers that decode rays."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.calibration import calibrate
from lf_mpc_calib.calibration.closed_form import validate_observations
from lf_mpc_calib.calibration.focused import orient_focused
from lf_mpc_calib.calibration.refine import RefinementProblem
from lf_mpc_calib.calibration.type_terms import LensTypeTerms
from lf_mpc_calib.camera.model import point_ray_distance
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.calibration_file import (CalibrationFile, load_calibration,
                                              save_calibration)
from lf_mpc_calib.lenslet.nearest import MicroImageLattice
from lf_mpc_calib.measurement.focused import raw_pixel_rays, triangulate_rows
from lf_mpc_calib.simulation.focused_observations import focused_observations
from test_multifocus import _scene as multifocus_scene


def _scene(seed=2, scale=1.0):
    """The multi-focus preset, a 7 x 5 board at 4 poses 0.6-1.5 x the scene distance."""
    return multifocus_scene('focused-multifocus', seed, scale)


def _points(obs, rv, tv):
    rot = Rotation.from_rotvec(rv[obs.pose]).as_matrix()
    return np.einsum('nij,nj->ni', rot, obs.board) + tv[obs.pose]


def test_view_truth_is_exact_and_the_old_truth_is_not():
    cam, board, rv, tv = _scene()
    obs = focused_observations(cam, board, rv, tv)
    w = np.bincount(obs.lens_type) / len(obs)
    model, terms = cam.ground_truth_model(weights=w, view=True), \
        cam.ground_truth_lens_types(w, view=True)
    # each type's view plane scale ~ 1 / (D + b_T): +-1e-4 about the sensor centre, offsets 0
    assert 0.9e-4 < np.abs(terms.view_scale).max() < 1.1e-4
    np.testing.assert_array_equal(terms.offset_px, 0.0)
    np.testing.assert_allclose(w @ terms.view_scale, 0.0, atol=1e-15)
    pc = _points(obs, rv, tv) + cam.view_frame_shift(w)
    rays = model.rays(terms.corrected_ijuv(obs.ijuv, obs.lens_type))
    assert point_ray_distance(pc, rays).max() < 1e-12          # metres: exact
    old_model, old = cam.ground_truth_model(weights=w), cam.ground_truth_lens_types(w)
    old_rays = old_model.rays(old.corrected_ijuv(obs.ijuv, obs.lens_type))
    assert point_ray_distance(_points(obs, rv, tv), old_rays).max() > 1e-6
    np.testing.assert_allclose(terms.scale, old.scale, rtol=1e-12)


def _assert_jacobian_matches_finite_differences(pb, theta, poses):
    """pb.evaluate's analytic Jacobian rows of the 10 model parameters and the type terms in
    theta (its rows 16.. after the 6 pose ones) against central differences, relative to each
    row's largest entry (measured <= 3e-6: the radial terms' Newton solve and the rounding)."""
    _, jac = pb.evaluate(theta, poses)
    for n in range(len(theta)):
        h = 1e-6 * abs(theta[n]) or 1e-6
        tp, tm = theta.copy(), theta.copy()
        tp[n] += h
        tm[n] -= h
        num = (pb.evaluate(tp, poses, jacobian=False)[0]
               - pb.evaluate(tm, poses, jacobian=False)[0]) / (2 * h)
        row = n if n < 10 else n + 6
        scale = max(np.abs(jac[row]).max(), 1e-12)
        assert np.abs(num - jac[row]).max() / scale < 1e-5, \
            pb.types.names[n - 10] if n >= 10 else n


def test_view_jacobian_matches_finite_differences():
    cam, board, rv, tv = _scene(scale=0.5)
    obs = focused_observations(cam, board, rv[:2], tv[:2])
    obs = obs.select(np.arange(0, len(obs), 5))
    pb = RefinementProblem(obs, validate_observations(obs), 'affine-radial-view')
    k = pb.types.size
    assert k == 6 + 6 + 2 and pb.types.names[-2:] == ('g_0', 'g_2')
    w = pb.types.weights
    truth = cam.ground_truth_model(weights=w, view=True).replace(k_1=0.02)
    x = np.concatenate([np.random.default_rng(0).normal(0.0, 0.01, 6),
                        [1e-3, -1e-3, 5e-4, 0.0, 0.0, 0.0], [3e-4, -2e-4]])
    theta = np.concatenate([truth.to_vector(), x])
    poses = np.hstack([rv[:2], tv[:2] + cam.view_frame_shift(w)])
    _, jac = pb.evaluate(theta, poses)
    assert jac.shape == (16 + k, 2, len(obs))
    _assert_jacobian_matches_finite_differences(pb, theta, poses)


@pytest.mark.parametrize('noise_px', [0.0, 0.05])
def test_view_terms_within_3_sigma_of_the_optics_on_exact_rows(noise_px):
    cam, board, rv, tv = _scene()
    obs = focused_observations(cam, board, rv, tv, noise_px=noise_px,
                               rng=np.random.default_rng(3))
    w = np.bincount(obs.lens_type) / len(obs)
    res = orient_focused(calibrate(obs, lens_type_terms='affine-view'))
    lt, tt = res.lens_types, cam.ground_truth_lens_types(w, view=True)
    # noise 0: the rows are exact, the sigmas ~1e-16 (atol: the solver's rounding)
    for got, want, sd, atol in ((lt.scale, tt.scale, lt.scale_std, 1e-11),
                                (lt.offset_px, tt.offset_px, lt.offset_std_px, 1e-8),
                                (lt.view_scale, tt.view_scale, lt.view_scale_std, 1e-11)):
        assert np.all(np.isfinite(sd))
        assert np.all(np.abs(got - want) <= 3.0 * sd + atol), (got, want, sd)
    gt = cam.ground_truth_model(weights=w, view=True)
    np.testing.assert_allclose(res.model.to_vector()[:4], gt.to_vector()[:4],
                               rtol=1e-8 if noise_px == 0 else 2e-2)
    if noise_px == 0:
        assert res.rms_reprojection_px < 1e-9
        np.testing.assert_allclose(lt.view_centre_px, cam.sensor.centre, atol=1e-6)
        # without the view scale the offsets absorb it and miss the (approximate) truth
        old = orient_focused(calibrate(obs, lens_type_terms='affine')).lens_types
        told = cam.ground_truth_lens_types(w)
        assert np.max(np.abs(old.offset_px - told.offset_px) / old.offset_std_px) > 3.0


def test_view_terms_round_trip_through_the_calibration_file(tmp_path):
    cam, board, rv, tv = _scene(scale=0.5)
    obs = focused_observations(cam, board, rv, tv, noise_px=0.05,
                               rng=np.random.default_rng(4))
    res = orient_focused(calibrate(obs, lens_type_terms='affine-view'))
    lt = res.lens_types
    path = tmp_path / 'cal.yaml'
    save_calibration(path, CalibrationFile.from_result(res, camera_type='focused',
                                                       lens_types=lt.to_dict()))
    back = LensTypeTerms.from_dict(load_calibration(path).lens_types)
    assert back.terms == 'affine-view'
    for name in ('scale', 'offset_px', 'view_scale', 'view_scale_std', 'view_centre_px'):
        np.testing.assert_allclose(getattr(back, name), getattr(lt, name), rtol=1e-12)
    np.testing.assert_allclose(back.corrected_ijuv(obs.ijuv, obs.lens_type),
                               lt.corrected_ijuv(obs.ijuv, obs.lens_type), rtol=1e-12)
    # a file written before the view scales (no view_* keys) loads: they are zero
    old = {k: v for k, v in lt.to_dict().items() if not k.startswith('view_')}
    old['terms'] = 'affine'
    plain = LensTypeTerms.from_dict(old)
    np.testing.assert_array_equal(plain.view_scale, 0.0)
    np.testing.assert_array_equal(plain.corrected_ijuv(obs.ijuv, obs.lens_type)[:, :2],
                                  obs.ijuv[:, :2])
    with pytest.raises(InvalidInputError, match='view scales'):
        LensTypeTerms('affine-view', [0.0, 0.0], [[0, 0], [0, 0]], [0.5, 0.5],
                      view_scale=[np.nan, 0.0])


def test_consumers_decode_with_the_view_scale():
    cam, board, rv, tv = _scene(scale=0.5)
    obs = focused_observations(cam, board, rv[:1], tv[:1])
    w = np.bincount(obs.lens_type) / len(obs)
    model, terms = cam.ground_truth_model(weights=w, view=True), \
        cam.ground_truth_lens_types(w, view=True)
    # corners triangulated from all micro-images that see them: at the optics' points
    pts, keys = triangulate_rows(model, obs, terms=terms)
    truth = board.points() @ Rotation.from_rotvec(rv[0]).as_matrix().T + tv[0] \
        + cam.view_frame_shift(w)
    assert len(pts) == board.n_points
    assert np.abs(pts - truth[keys[:, 1]]).max() < 1e-9
    plain = without_view(terms)
    pts0, keys0 = triangulate_rows(model, obs, terms=plain)
    assert np.abs(pts0 - truth[keys0[:, 1]]).max() > 1e-6
    # rays of raw pixels through the grid's micro-images: the same correction of (i, j)
    grid = cam.lenslet_grid()
    q = obs.ijuv[:, :2] + obs.ijuv[:, 2:]
    types = cam.mla.lens_type(cam.micro_image_of(grid.centres())[0])
    rays = raw_pixel_rays(model, grid, q, types=types, terms=terms)
    idx = MicroImageLattice(grid).nearest(q)
    ijuv = np.column_stack([grid.centres()[idx], q - grid.centres()[idx]])
    np.testing.assert_allclose(rays, model.rays(terms.corrected_ijuv(ijuv, types[idx])),
                               rtol=0, atol=1e-15)
    assert np.abs(rays - raw_pixel_rays(model, grid, q, types=types,
                                        terms=plain)).max() > 1e-9


def without_view(terms):
    """``terms`` without the view scales."""
    return LensTypeTerms('affine', terms.scale, terms.offset_px, terms.weights)


R12 = Path(__file__).resolve().parents[1].parent / 'shared' / 'data' / 'raytrix-r12a' / \
    'r12a_observations.csv'


@pytest.mark.skipif(not R12.exists(), reason='needs ../shared/data/raytrix-r12a')
def test_r12_with_view_scales():
    from lf_mpc_calib.calibration.lens_types import calibrate_r12
    from lf_mpc_calib.io.raytrix_r12 import read_r12
    d = read_r12(R12)
    radial = calibrate_r12(d)
    view = calibrate_r12(d, lens_type_terms='affine-radial-view')
    # nested: never worse; measured 0.9478 -> 0.9474 px, the view scales within 1-3.3 sigma
    # of zero (+202 +- 114, -283 +- 86, +141 +- 98 ppm); the slopes: 0.9475 px, within 2
    # sigma of zero (+2 +- 16, -24 +- 12, +24 +- 14 ppm): the R12 default stays 'affine-radial'
    assert view.result.converged and view.rms_raw_px <= radial.rms_raw_px + 1e-9
    lt = view.result.lens_types
    assert np.all(np.isfinite(lt.view_scale_std)) and np.all(np.abs(lt.view_scale) < 1e-3)
    slope = calibrate_r12(d, lens_type_terms='affine-radial-slope')
    assert slope.result.converged and slope.rms_raw_px <= radial.rms_raw_px + 1e-9
    assert np.all(np.abs(slope.result.lens_types.slope) < 1e-4)


def _lattice_rows(cam, obs):
    """``obs`` with (i, j) the regular lattice's centres (the raw pipeline's grid)."""
    kl = cam.micro_image_of(obs.ijuv[:, :2])[0]
    lat = cam.lattice_centres(kl)
    q = obs.ijuv[:, :2] + obs.ijuv[:, 2:]
    return replace(obs, ijuv=np.column_stack([lat, q - lat]))


def test_slope_truth_is_exact_for_lattice_centres():
    cam, board, rv, tv = _scene()
    obs = _lattice_rows(cam, focused_observations(cam, board, rv, tv))
    w = np.bincount(obs.lens_type) / len(obs)
    model = cam.ground_truth_model(weights=w, centres='lattice')
    terms = cam.ground_truth_lens_types(w, centres='lattice')
    assert terms.terms == 'affine-slope' and 0.9e-4 < np.abs(terms.slope).max() < 1.1e-4
    rays = model.rays(terms.corrected_ijuv(obs.ijuv, obs.lens_type))
    pc = _points(obs, rv, tv) + cam.view_frame_shift(w, centres='lattice')
    assert point_ray_distance(pc, rays).max() < 1e-12
    with pytest.raises(InvalidInputError, match='micro-image centres'):
        terms.correct(obs.ijuv[:, 2:], obs.lens_type)


def test_slope_jacobian_matches_finite_differences():
    cam, board, rv, tv = _scene(scale=0.5)
    obs = _lattice_rows(cam, focused_observations(cam, board, rv[:2], tv[:2]))
    obs = obs.select(np.arange(0, len(obs), 5))
    pb = RefinementProblem(obs, validate_observations(obs), 'affine-radial-slope')
    k = pb.types.size
    assert k == 6 + 6 + 2 and pb.types.names[-2:] == ('kappa_0', 'kappa_2')
    truth = cam.ground_truth_model(weights=pb.types.weights, centres='lattice')
    x = np.concatenate([np.random.default_rng(1).normal(0.0, 0.01, 6),
                        [1e-3, -1e-3, 5e-4, 0.0, 0.0, 0.0], [3e-4, -2e-4]])
    theta = np.concatenate([truth.replace(k_1=0.02).to_vector(), x])
    poses = np.hstack([rv[:2], tv[:2]])
    _assert_jacobian_matches_finite_differences(pb, theta, poses)


@pytest.mark.parametrize('noise_px', [0.0, 0.05])
def test_slope_terms_within_3_sigma_on_lattice_centre_rows(noise_px):
    cam, board, rv, tv = _scene()
    obs = _lattice_rows(cam, focused_observations(cam, board, rv, tv, noise_px=noise_px,
                                                  rng=np.random.default_rng(5)))
    w = np.bincount(obs.lens_type) / len(obs)
    res = orient_focused(calibrate(obs, lens_type_terms='affine-slope'))
    lt, tt = res.lens_types, cam.ground_truth_lens_types(w, centres='lattice')
    for got, want, sd, atol in ((lt.scale, tt.scale, lt.scale_std, 1e-11),
                                (lt.offset_px, tt.offset_px, lt.offset_std_px, 1e-8),
                                (lt.slope, tt.slope, lt.slope_std, 1e-13)):
        assert np.all(np.isfinite(sd))
        assert np.all(np.abs(got - want) <= 3.0 * sd + atol), (got, want, sd)
    gt = cam.ground_truth_model(weights=w, centres='lattice')
    np.testing.assert_allclose(res.model.to_vector()[[0, 1, 2, 3, 8, 9]],
                               gt.to_vector()[[0, 1, 2, 3, 8, 9]],
                               rtol=1e-8 if noise_px == 0 else 2e-2)
    if noise_px == 0:
        # the old terms on these rows: offsets of +-0.1 px folded in, tens of sigma off
        old = orient_focused(calibrate(obs, lens_type_terms='affine')).lens_types
        assert np.max(np.abs(old.offset_px - tt.offset_px) / old.offset_std_px) > 10.0
    back = LensTypeTerms.from_dict(lt.to_dict())
    np.testing.assert_allclose(back.slope, lt.slope, rtol=1e-12)
    np.testing.assert_allclose(back.corrected_ijuv(obs.ijuv, obs.lens_type),
                               lt.corrected_ijuv(obs.ijuv, obs.lens_type), rtol=1e-12)
    pts, keys = triangulate_rows(res.model, obs, terms=lt)
    assert len(pts) > 0
