"""Tests of the MPC model: projection, the inverse of Eq. 18, triangulation, distances."""

import numpy as np
import pytest

from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError
from lf_mpc_calib.camera.model import MPCModel, point_ray_distance, triangulate, triangulate_point
from lf_mpc_calib.camera.rotations import rotation_matrix, rotation_matrix_jacobian, \
    rotation_vector


def _camera(**changes):
    model = MPCModel(k_i=2.4e-4, k_j=2.5e-4, k_u=2.0e-3, k_v=1.9e-3, u_0=-0.32, v_0=-0.33,
                     k_1=0.3, k_2=-0.5, k_3=-4.0, k_4=-3.5)
    return model.replace(**changes)


def _points(rng, n):
    return rng.uniform([-0.03, -0.03, 0.05], [0.03, 0.03, 0.12], size=(n, 3))


def test_distort_inverts_eq18():
    rng = np.random.default_rng(0)
    model = _camera()
    stxy_u = np.column_stack([rng.uniform(-1e-3, 1e-3, (500, 2)),
                              rng.uniform(-0.4, 0.4, (500, 2))])
    back = model.undistort(model.distort(stxy_u))
    # the Newton solve is asked for 1e-10 of Eq. 18; it reaches machine precision
    assert np.abs(back - stxy_u).max() < 1e-10


def test_distort_round_trip_from_measured_side():
    rng = np.random.default_rng(1)
    model = _camera()
    stxy = np.column_stack([rng.uniform(-1e-3, 1e-3, (500, 2)), rng.uniform(-0.4, 0.4, (500, 2))])
    np.testing.assert_allclose(model.distort(model.undistort(stxy)), stxy, rtol=0, atol=1e-12)


def test_distort_unsolvable_rows_are_nan():
    # k_1 < 0: r (1 + k_1 r^2) has its maximum 2/(3 sqrt(3)) / sqrt(-k_1) ~ 0.385 at k_1 = -1
    model = _camera(k_1=-1.0, k_2=0.0, k_3=0.0, k_4=0.0)
    out = model.distort([[0, 0, 0.1, 0.0], [0, 0, 0.9, 0.0]])
    assert np.isfinite(out[0]).all() and np.isnan(out[1, 2:]).all()


def test_project_rays_pass_through_points():
    rng = np.random.default_rng(2)
    model = _camera()
    pts = _points(rng, 400)
    ij = rng.integers(-3, 4, size=(400, 2)).astype(float)
    uv = model.project(pts, ij)
    rays = model.rays(np.column_stack([ij, uv]))
    # round trip project -> decode -> undistort: 1e-15 m at 0.1 m (machine precision)
    assert point_ray_distance(pts, rays).max() < 1e-14


def test_project_matches_pinhole_without_distortion():
    model = _camera(k_1=0.0, k_2=0.0, k_3=0.0, k_4=0.0)
    pts = np.array([[0.01, -0.02, 0.08]])
    uv = model.project(pts, [[2.0, -1.0]])
    s, t = 2 * model.k_i, -model.k_j
    expected = [((0.01 - s) / 0.08 - model.u_0) / model.k_u,
                ((-0.02 - t) / 0.08 - model.v_0) / model.k_v]
    np.testing.assert_allclose(uv[0], expected, rtol=1e-13)


def test_triangulate_recovers_points():
    rng = np.random.default_rng(3)
    model = _camera()
    pts = _points(rng, 50)
    views = np.array([[i, j] for i in range(-2, 3) for j in range(-2, 3)], dtype=float)
    groups = np.repeat(np.arange(50) * 7 + 3, len(views))     # arbitrary group labels
    ij = np.tile(views, (50, 1))
    uv = model.project(np.repeat(pts, len(views), axis=0), ij)
    est = triangulate(model.rays(np.column_stack([ij, uv])), groups)
    # noise-free rays meet exactly: 1e-12 m at 0.1 m range
    np.testing.assert_allclose(est, pts, rtol=0, atol=1e-12)
    single = triangulate_point(model.rays(np.column_stack([ij[:25], uv[:25]])))
    np.testing.assert_allclose(single, pts[0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.triangulate(model.rays(np.column_stack([ij, uv])), groups),
                               est, rtol=0, atol=0)


def test_triangulate_noisy_least_squares():
    rng = np.random.default_rng(4)
    model = _camera(k_1=0.0, k_2=0.0)
    p = np.array([0.005, -0.004, 0.08])
    views = np.array([[i, j] for i in range(-3, 4) for j in range(-3, 4)], dtype=float)
    uv = model.project(np.tile(p, (len(views), 1)), views) + rng.normal(0, 0.3, (49, 2))
    est = triangulate_point(model.rays(np.column_stack([views, uv])))
    # 0.3 px noise: lateral ~ 0.3 * k_u * Z ~ 5e-5 m per ray, depth ~ 20x worse (baseline
    # 1.4 mm at 80 mm); the mean over 49 rays is well within 2e-4 m / 2e-3 m
    assert np.abs(est[:2] - p[:2]).max() < 2e-4 and abs(est[2] - p[2]) < 2e-3


def test_point_ray_distance_known_value():
    # ray along z through (1, 0, 0); point (1, 2, 5) is 2 m away
    d = point_ray_distance([[1.0, 2.0, 5.0]], [[1.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(d, [2.0], rtol=1e-15)


def test_triangulate_parallel_rays_raise():
    rays = np.array([[0, 0, 0.1, 0.1], [1e-3, 0, 0.1, 0.1]])
    with pytest.raises(DegenerateConfigurationError, match='distinct direction'):
        triangulate(rays, [0, 0])


def test_project_bad_input():
    model = _camera()
    with pytest.raises(InvalidInputError, match=r'points_cam must have shape \(N, 3\)'):
        model.project(np.zeros((3, 2)), np.zeros((3, 2)))
    with pytest.raises(InvalidInputError, match='ij must have 2 rows'):
        model.project(np.ones((2, 3)), np.zeros((3, 2)))
    with pytest.raises(InvalidInputError, match='NaN or inf'):
        model.project([[0.0, 0.0, np.nan]], [[0.0, 0.0]])
    with pytest.raises(InvalidInputError, match='Z != 0'):
        model.project([[0.0, 0.0, 0.0]], [[0.0, 0.0]])
    with pytest.raises(InvalidInputError, match='differ'):
        point_ray_distance(np.ones((2, 3)), np.ones((3, 4)))


def test_rotation_round_trip_and_jacobian():
    rng = np.random.default_rng(5)
    w = np.vstack([rng.normal(0, 1, (5, 3)), np.zeros((1, 3)), [[1e-9, 0, 0]]])
    np.testing.assert_allclose(rotation_vector(rotation_matrix(w)), w, rtol=0, atol=1e-12)
    r, d = rotation_matrix_jacobian(w)
    h = 1e-6
    for k in range(3):
        e = np.zeros(3)
        e[k] = h
        num = (rotation_matrix(w + e) - rotation_matrix(w - e)) / (2 * h)
        # central differences: truncation ~h^2, rounding ~1e-16/h
        np.testing.assert_allclose(d[:, k], num, rtol=0, atol=1e-8)


def test_rotations_match_scipy_up_to_pi():
    """The numpy rotations (no scipy import) agree with scipy's Rotation, an independent
    implementation, from tiny angles to angles next to pi (where the log map is delicate)."""
    from scipy.spatial.transform import Rotation
    rng = np.random.default_rng(8)
    axes = rng.normal(size=(400, 3))
    axes /= np.linalg.norm(axes, axis=1)[:, None]
    angles = np.concatenate([rng.uniform(0, np.pi, 390), [0, 1e-12, 1e-6, 1e-3, 0.5,
                                                          np.pi - 1e-3, np.pi - 1e-7,
                                                          np.pi - 1e-12, 3.0, 2.0]])
    w = axes * angles[:, None]
    r = rotation_matrix(w)
    np.testing.assert_allclose(r, Rotation.from_rotvec(w).as_matrix(), rtol=0, atol=2e-15)
    back = rotation_vector(r)
    # near pi, w and -w are the same rotation: compare the rotations they give
    np.testing.assert_allclose(rotation_matrix(back), r, rtol=0, atol=4e-15)
    far = angles < np.pi - 1e-6
    np.testing.assert_allclose(back[far], w[far], rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(back, axis=1), angles, rtol=0, atol=1e-12)
