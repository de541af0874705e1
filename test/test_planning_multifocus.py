"""Pose planning for a multi-focus (focused, 3 micro-lens types) camera: each type's focus
band, the type terms held fixed in the prediction, checked against the optics' truth."""

import numpy as np
import pytest

from lf_mpc_calib.calibration import calibrate
from lf_mpc_calib.calibration.closed_form import aligned_truth
from lf_mpc_calib.calibration.focused import orient_focused
from lf_mpc_calib.calibration.planning import MIN_TYPE_RAYS, SCALES, PoseConstraints
from lf_mpc_calib.camera.rotations import rotation_matrix
from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError
from lf_mpc_calib.pipeline.capture_planning import reported_sigmas
from lf_mpc_calib.simulation.focused_observations import focused_observations
from lf_mpc_calib.simulation.optics import default_board, preset
from lf_mpc_calib.simulation.planning_scene import (
    MAX_BLUR_PX, follow_suggestions, simulated_planner)

NOISE = 0.1


def test_multifocus_plan_sees_each_type_in_its_band_and_predicts_the_reported_sigmas():
    camera = preset('focused-multifocus', scale=0.7)
    board = default_board(camera)
    planner = simulated_planner(camera, board, noise_px=NOISE, target_k_pct=0.3,
                                target_pp_px=0.3, rng=np.random.default_rng(1))
    rv, tv = follow_suggestions(planner, 10, n_candidates=15)
    # the camera's own rays, kept where the ray's micro-lens images the corner sharply (from
    # the corner's physical depth and the lens's gap and focal length)
    obs = focused_observations(camera, board, rv, tv, noise_px=NOISE,
                               rng=np.random.default_rng(2), max_blur_px=MAX_BLUR_PX)
    # the planner predicted the same rays (its bands in the MPC frame, from the same optics)
    predicted = sum(len(planner.rows(r, t)) for r, t in zip(rv, tv))
    assert predicted == pytest.approx(len(obs), rel=0.03)
    # every type asked for (its terms need rays), though type 0's band is narrow here
    assert np.bincount(obs.lens_type, minlength=3).min() >= MIN_TYPE_RAYS
    res = orient_focused(calibrate(obs, camera_type='focused'))
    assert res.lens_types is not None and res.lens_types.n_types == 3
    reported = reported_sigmas(res)
    for q, sig in planner.predicted().items():     # the type terms held fixed in it
        assert sig == pytest.approx(reported[q], rel=0.25), q
    weights = np.bincount(obs.lens_type) / len(obs)
    aligned, _, _ = aligned_truth(camera.ground_truth_model(weights=weights), res.model,
                                  rotation_matrix(rv), tv)
    for n in SCALES:
        err = 100 * abs(getattr(res.model, n) / getattr(aligned, n) - 1)
        assert err <= 3 * reported[n], n
    pp_err = np.abs(np.asarray(res.model.principal_point) - aligned.principal_point)
    assert np.all(pp_err <= 3 * np.asarray(res.principal_point_stddev()))


def test_multifocus_bands_no_type_sees_are_refused_with_them():
    views = np.zeros((3, 2))
    common = dict(views=views, depth_range_m=(0.1, 0.3), micro_image_radius=5.0,
                  view_types=np.array([0, 1, 2]))
    with pytest.raises(DegenerateConfigurationError,
                       match='no lens type images the depth range 0.100-0.300 m.*type 2: '):
        PoseConstraints(**common, type_depths_m=((0.0, 0.05), (0.01, 0.09), (0.4, 0.5)))
    with pytest.raises(InvalidInputError, match='for each of the 3 lens types'):
        PoseConstraints(**common, type_depths_m=((0.0, 0.2), (0.1, 0.3)))
    with pytest.raises(InvalidInputError, match='go together'):
        PoseConstraints(views=views, depth_range_m=(0.1, 0.3), micro_image_radius=5.0,
                        view_types=np.array([0, 1, 2]))
