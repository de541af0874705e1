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


def test_multifocus_focus_bands_from_the_captures_lie_within_the_optics_bands():
    """Each type's focus band told from where its micro-images detected corners in simulate's
    captures (capture_planning.type_bands) against the optics' bands (blur <= MAX_BLUR_PX):
    never wider than the truth (a band wider than the type sees would over-count its rays),
    the well-captured type's band covering the truth within the captured depths; a type with
    too few rows falls back to the parameter with the reason."""
    from scipy.spatial.transform import Rotation

    from lf_mpc_calib.pipeline.capture_planning import type_bands
    from lf_mpc_calib.simulation.dataset import capture_poses
    from lf_mpc_calib.simulation.planning_scene import type_focus_depths
    cam = preset('focused-multifocus', scale=0.5)
    board = default_board(cam)
    rv, tv = capture_poses(cam, board, 10, rng=np.random.default_rng(1))
    obs = focused_observations(cam, board, rv, tv, noise_px=NOISE,
                               rng=np.random.default_rng(2), max_blur_px=MAX_BLUR_PX)
    pts = board.points()
    z = np.array([Rotation.from_rotvec(rv[p]).apply(pts[i])[2] + tv[p][2]
                  for p, i in zip(obs.pose, obs.point)])
    given = ((0.05, 0.09), (0.08, 0.2), (0.1, 0.5))
    bands, notes = type_bands(z, obs.lens_type, given, 'plan_type_focus_bands')
    truth = type_focus_depths(cam)
    counts = np.bincount(obs.lens_type, minlength=3)
    for t in range(3):
        if counts[t] < MIN_TYPE_RAYS:      # type 0 focuses nearer than most captures
            assert bands[t] == given[t] and 'plan_type_focus_bands' in notes[t], notes[t]
            continue
        assert 'corner rows of the captures' in notes[t]
        lo, hi = bands[t]
        assert truth[t][0] - 1e-3 <= lo < hi <= truth[t][1] + 1e-3, (t, bands[t], truth[t])
    assert counts[0] < MIN_TYPE_RAYS <= min(counts[1:])
    # type 2 (sharp far out): its band over the captured depths, to within 5 %
    seen = (max(truth[2][0], z.min()), min(truth[2][1], z.max()))
    assert bands[2][1] - bands[2][0] >= 0.95 * (seen[1] - seen[0]), (bands[2], seen)
    # the same through a session's captures (the rows' micro-images' told types, the poses)
    from types import SimpleNamespace

    from lf_mpc_calib.pipeline.capture_planning import PlanSettings, session_constraints
    grid = cam.lenslet_grid()
    session = SimpleNamespace(
        ready=True, camera_type='focused', grid=grid, lens_types=3, board=board,
        micro_image_types=cam.mla.lens_type(cam.micro_image_of(grid.centres())[0]),
        detections=[SimpleNamespace(observations=obs.select(obs.pose == k))
                    for k in range(len(rv))])
    told = []
    c = session_constraints(session, (0.085, 0.336), PlanSettings(type_depths_m=given),
                            (rv, tv), told)
    assert told == notes
    np.testing.assert_allclose(c.type_depths_m, bands)
