"""Per-micro-lens-type terms: Jacobian, joint estimation with the model, table and file I/O."""

from dataclasses import replace

import numpy as np
import pytest

from lf_mpc_calib.calibration import calibrate
from lf_mpc_calib.calibration.closed_form import validate_observations
from lf_mpc_calib.calibration.refine import RefinementProblem
from lf_mpc_calib.calibration.type_terms import LensTypeTerms, TypeParametrisation
from lf_mpc_calib.camera.observations import Observations
from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.io.observation_table import read_observations, write_observations
from lf_mpc_calib.io.raytrix_r12 import lens_type
from lf_mpc_calib.simulation.observations import paper_scene

SCALE = np.array([0.01, -0.006, 0.0])
OFFSET = np.array([[0.3, -0.2], [-0.1, 0.25], [0.0, 0.0]])
# radial terms per type (q1, q2) at rho = |(u, v)| / 10 px: ~0.6 % at 100 px
RADIAL = np.array([[6e-5, -2e-9], [-6e-5, 2e-9], [3e-5, 0.0]])


def _typed_scene(seed, noise_px=0.0, n_poses=4, radial=None):
    """A scene whose (u, v) are seen through per-type terms (types from (i, j) like an MLA)."""
    truth, rv, tr, obs = paper_scene(n_poses=n_poses, n_views=5, noise_px=0.0,
                                     rng=np.random.default_rng(seed))
    types = lens_type(obs.ijuv[:, :2].astype(np.int64) + 2)
    w = np.bincount(types) / len(types)
    a = SCALE - w @ SCALE               # the estimator's gauge: zero ray-weighted mean
    off = OFFSET - w @ OFFSET
    terms = LensTypeTerms('affine' if radial is None else 'affine-radial', a, off, w,
                          radial=radial)
    measured = terms.uncorrect(obs.ijuv[:, 2:], types)
    rng = np.random.default_rng(seed + 100)
    measured = measured + rng.normal(0.0, noise_px, measured.shape)
    typed = Observations(obs.pose, obs.point, obs.board,
                         np.column_stack([obs.ijuv[:, :2], measured]), types)
    return truth, rv, tr, typed, terms


@pytest.mark.parametrize('terms', ['affine', 'offset', 'affine-radial'])
def test_jacobian_with_lens_types_matches_finite_differences(terms):
    truth, rv, tr, obs, _ = _typed_scene(3, n_poses=2)
    obs = obs.select(np.arange(0, len(obs), 7))
    pb = RefinementProblem(obs, validate_observations(obs), terms)
    k = pb.types.size
    assert k == {'affine': 6, 'offset': 4, 'affine-radial': 12}[terms]
    rng = np.random.default_rng(0)
    extra = rng.normal(0.0, 0.02, k)
    if terms == 'affine-radial':
        extra[6:] = RADIAL.T.ravel()
    theta = np.concatenate([truth.replace(k_1=0.02, k_3=0.4).to_vector(), extra])
    poses = np.hstack([rv, tr])
    _, jac = pb.evaluate(theta, poses)
    assert jac.shape == (16 + k, 2, len(obs))
    num = np.zeros_like(jac)
    radial = terms == 'affine-radial'
    for n in range(10 + k):
        # (the radial terms bend 300 px offsets: a step relative to each value keeps the
        # central difference in its linear range)
        h = (1e-6 * abs(theta[n]) or 1e-9) if radial else 1e-5 * max(abs(theta[n]), 0.1)
        tp, tm = theta.copy(), theta.copy()
        tp[n] += h
        tm[n] -= h
        row = n if n < 10 else n + 6
        num[row] = (pb.evaluate(tp, poses, jacobian=False)[0]
                    - pb.evaluate(tm, poses, jacobian=False)[0]) / (2 * h)
    for n in range(6):
        d = np.zeros_like(poses)
        d[:, n] = 1e-7
        diff = (pb.evaluate(theta, poses + d, jacobian=False)[0]
                - pb.evaluate(theta, poses - d, jacobian=False)[0]) / 2e-7
        num[10 + n] = diff            # each ray depends on its own pose only
    scale = np.abs(jac).max(axis=(1, 2))
    assert (np.abs(num - jac).max(axis=(1, 2)) / scale).max() < (1e-3 if radial else 1e-5)


def test_joint_estimation_recovers_terms_noise_free():
    truth, _, _, obs, terms = _typed_scene(7)
    plain = calibrate(obs, lens_type_terms='none', distortion=False)
    fitted = calibrate(obs, distortion=False)          # 'auto': the table has lens types
    assert plain.rms_reprojection_px > 0.2             # the terms matter (~1 % of ~150 px)
    assert fitted.converged and fitted.rms_reprojection_px < 1e-6
    lt = fitted.lens_types
    np.testing.assert_allclose(lt.scale, terms.scale, atol=1e-8)
    np.testing.assert_allclose(lt.offset_px, terms.offset_px, atol=1e-6)
    assert abs(lt.weights @ lt.scale) < 1e-12 and np.abs(lt.weights @ lt.offset_px).max() < 1e-12
    np.testing.assert_allclose(fitted.model.to_vector()[:6], truth.to_vector()[:6], rtol=1e-6)


def test_micro_lens_distortion_recovered_jointly_noise_free():
    # each type bends its micro-images radially ('affine-radial'): without that term the fit
    # is off; with it the terms and the model come back exactly
    truth, _, _, obs, terms = _typed_scene(7, radial=RADIAL)
    affine = calibrate(obs, distortion=False, lens_type_terms='affine')
    fitted = calibrate(obs, distortion=False, lens_type_terms='affine-radial')
    assert affine.rms_reprojection_px > 0.05
    assert fitted.converged and fitted.rms_reprojection_px < 1e-6
    lt = fitted.lens_types
    np.testing.assert_allclose(lt.radial, RADIAL, rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(lt.scale, terms.scale, atol=1e-8)
    # (the start, from a closed form that knows no types, can land on the mirrored solution
    # -k_i, -k_j that explains the rays equally well)
    np.testing.assert_allclose(np.abs(fitted.model.to_vector()[:6]),
                               np.abs(truth.to_vector()[:6]), rtol=1e-6)
    np.testing.assert_allclose(fitted.model.to_vector()[2:6], truth.to_vector()[2:6], rtol=1e-6)
    assert np.all(np.isfinite(lt.radial_std))
    back = LensTypeTerms.from_dict(lt.to_dict())
    np.testing.assert_array_equal(back.radial, lt.radial)
    uv = obs.ijuv[:50, 2:]
    np.testing.assert_allclose(back.uncorrect(back.correct(uv, obs.lens_type[:50]),
                                              obs.lens_type[:50]), uv, atol=1e-9)


def test_lens_type_stddev_matches_errors_over_seeds():
    # the reported sigma of each term predicts the scatter of its error over noise draws
    z = []
    for seed in range(8):
        _, _, _, obs, terms = _typed_scene(11 + seed, noise_px=0.3, n_poses=3)
        lt = calibrate(obs, distortion=False).lens_types
        z.append(np.concatenate([(lt.scale - terms.scale) / lt.scale_std,
                                 ((lt.offset_px - terms.offset_px) / lt.offset_std_px).ravel()]))
    z = np.array(z)
    assert np.all(np.isfinite(z)) and np.abs(z).max() < 4.0
    # RMS of the normalised errors near 1 (72 draws: 0.7..1.3 holds with margin)
    assert 0.7 < np.sqrt(np.mean(z * z)) < 1.3


def test_observation_table_lens_type_roundtrip(tmp_path):
    _, _, _, obs, _ = _typed_scene(1, n_poses=2)
    p = tmp_path / 'obs.csv'
    write_observations(p, obs)
    assert p.read_text().splitlines()[0].endswith(',lens_type')
    back = read_observations(p)
    np.testing.assert_array_equal(back.lens_type, obs.lens_type)
    np.testing.assert_array_equal(back.ijuv, obs.ijuv)
    plain = replace(obs, lens_type=None)
    write_observations(p, plain)                        # old tables: no column, no types
    assert read_observations(p).lens_type is None
    assert obs.select(obs.pose == obs.pose[0]).lens_type.shape == (int(np.sum(
        obs.pose == obs.pose[0])),)
    with pytest.raises(InvalidInputError, match='with and without lens types'):
        Observations.concatenate([obs, plain])


def test_lens_type_bad_input():
    _, _, _, obs, _ = _typed_scene(2, n_poses=2)
    with pytest.raises(InvalidInputError, match='needs observations with a lens_type'):
        calibrate(replace(obs, lens_type=None), lens_type_terms='affine')
    with pytest.raises(InvalidInputError, match='lens_type_terms must be'):
        calibrate(obs, lens_type_terms='cubic')
    gap = np.where(obs.lens_type == 1, 2, obs.lens_type)
    with pytest.raises(InvalidInputError, match=r'lens type\(s\) \[1\] have no ray'):
        TypeParametrisation(gap, 'affine')
    with pytest.raises(InvalidInputError, match='lens_type must hold integers >= 0'):
        replace(obs, lens_type=obs.lens_type - 1)


def test_lens_type_terms_dict_and_inverse():
    terms = LensTypeTerms('affine', [0.01, -0.02], [[0.1, 0.2], [-0.1, 0.0]], [0.5, 0.5])
    back = LensTypeTerms.from_dict(terms.to_dict())
    np.testing.assert_array_equal(back.scale, terms.scale)
    uv = np.array([[3.0, -4.0], [1.0, 2.0]])
    types = np.array([0, 1])
    np.testing.assert_allclose(terms.uncorrect(terms.correct(uv, types), types), uv)
    with pytest.raises(InvalidInputError, match=r'lens types must be in 0\.\.1'):
        terms.correct(uv, np.array([0, 2]))
