"""Multi-focus focused camera: optics ground truth with per-type terms, optics-projected
observations, the focused orientation convention, and calibration against the truth."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.calibration import calibrate
from lf_mpc_calib.calibration.focused import orient_focused
from lf_mpc_calib.camera.board import Checkerboard
from lf_mpc_calib.camera.model import point_ray_distance
from lf_mpc_calib.simulation.focused_observations import focused_observations
from lf_mpc_calib.simulation.optics import Camera, LATTICE_LENSES, preset
from lf_mpc_calib.simulation.render import render_white


def _scene(name, seed, scale=0.5):
    cam = preset(name, scale=scale, **LATTICE_LENSES)    # the truth exact: lattice lenses
    board = Checkerboard(6, 4, 0.5 * cam.field_of_view(cam.scene_distance)[0] / 7)
    rng = np.random.default_rng(seed)
    rv, tv = [], []
    z_f = 1.0 / cam.main_lens.inverse_focus / cam.scene_distance
    cand = np.linspace(0.6, 1.5, 100)
    cand = cand[np.abs(cand - z_f) > 0.25 * z_f]     # not near the plane conjugate to the MLA
    for z in cand[[0, len(cand) // 3, 2 * len(cand) // 3, -1]]:
        ang = np.deg2rad(rng.uniform(-20, 20, 3)) * np.array([1.0, 1.0, 0.3])
        rot = Rotation.from_euler('xyz', ang).as_matrix()
        c = board.points().mean(0)
        r, t = cam.pose_from_physical(rot, [0, 0, z * cam.scene_distance] - rot @ c)
        rv.append(r)
        tv.append(t)
    return cam, board, np.array(rv), np.array(tv)


def test_multifocus_preset_types_and_roundtrip():
    cam = preset('focused-multifocus', scale=0.2)
    assert cam.mla.n_types == 3 and len(set(cam.mla.type_focal_lengths)) == 3
    kl = np.array([[0, 0], [1, 0], [2, 0], [0, 1]])
    np.testing.assert_array_equal(cam.mla.lens_type(kl), [0, 1, 2, 1])
    back = Camera.from_dict(cam.to_dict())
    assert back.mla.type_gap_offsets == cam.mla.type_gap_offsets
    # one type: the per-type truth is None and micro-image centres are the lattice's
    single = preset('focused-keplerian', scale=0.2, **LATTICE_LENSES)
    assert single.ground_truth_lens_types() is None
    kl = single.micro_image_of(single.lenslet_grid().centres())[0]
    np.testing.assert_allclose(single.micro_image_centres(kl), single.lattice_centres(kl),
                               atol=1e-9)


def test_focused_observations_lie_on_ground_truth_rays():
    cam, board, rv, tv = _scene('focused-multifocus', 1)
    obs = focused_observations(cam, board, rv, tv)
    w = np.bincount(obs.lens_type) / len(obs)
    model, terms = cam.ground_truth_model(weights=w), cam.ground_truth_lens_types(w)
    rot = Rotation.from_rotvec(rv[obs.pose]).as_matrix()
    pc = np.einsum('nij,nj->ni', rot, obs.board) + tv[obs.pose]
    rays = model.rays(terms.corrected_ijuv(obs.ijuv, obs.lens_type))
    # only the unmodelled per-type view-plane scale (1e-4 relative of s ~ 3 cm) separates
    # them: measured 4.6 um at most (0 for the reference type)
    assert point_ray_distance(pc, rays).max() < 1e-5
    assert np.abs(terms.scale).max() > 0.008       # the types differ by about 1 %


def test_white_image_of_a_multifocus_camera_renders():
    cam = preset('focused-multifocus', scale=0.08)
    white = render_white(cam, samples=2)
    assert white.shape == (cam.sensor.height, cam.sensor.width) and white.max() > 0.5


@pytest.mark.parametrize('name', ['focused-keplerian', 'focused-galilean', 'focused-multifocus'])
def test_focused_calibration_recovers_optics_truth(name):
    cam, board, rv, tv = _scene(name, 2)
    obs = focused_observations(cam, board, rv, tv)
    res = orient_focused(calibrate(obs))
    w = None if obs.lens_type is None else np.bincount(obs.lens_type) / len(obs)
    gt = cam.ground_truth_model(weights=w)
    assert res.model.k_3 > 0                        # 1/k_3 = the distance conjugate to the MLA
    # multi-focus: the unmodelled per-type view-plane scale biases k_u by 0.25 % here (a
    # half-size sensor; 0.016 % at full size, benchmarks/bench_focused.py); others exact
    rtol = 3e-3 if name == 'focused-multifocus' else 1e-8
    np.testing.assert_allclose(res.model.to_vector()[:4], gt.to_vector()[:4], rtol=rtol)
    np.testing.assert_allclose(res.translations, tv, atol=1e-3)
    assert res.rms_reprojection_px < 0.02
    if name == 'focused-multifocus':
        tt = cam.ground_truth_lens_types(w)
        np.testing.assert_allclose(res.lens_types.scale, tt.scale, atol=5e-4)
        np.testing.assert_allclose(res.lens_types.offset_px, tt.offset_px, atol=0.02)
    else:
        assert res.lens_types is None
        np.testing.assert_allclose(res.model.to_vector()[:6], gt.to_vector()[:6], rtol=1e-8)
