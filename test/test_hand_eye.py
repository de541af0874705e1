"""Tests of lf_mpc_calib.calibration.hand_eye on simulated arm sessions (simulation.arm)."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from lf_mpc_calib.calibration import calibrate
from lf_mpc_calib.calibration.hand_eye import (
    calibrate_hand_eye, closed_form_hand_eye, hand_eye_guidance, HandEyeProblem, motion_diversity)
from lf_mpc_calib.camera import transforms
from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError
from lf_mpc_calib.simulation.arm import arm_scene, default_arm
from lf_mpc_calib.simulation.observations import board_points, view_grid


def _scene(setup, seed, n=8, noise=0.1, views=5, corners=12):
    square = 3.51e-3 * 11 / (corners - 1)         # the paper board's extent, fewer corners
    return arm_scene(setup, n_captures=n, noise_px=noise, rng=np.random.default_rng(seed),
                     views=view_grid(views), board=board_points(corners, corners, square))


def test_transforms_round_trip():
    rng = np.random.default_rng(0)
    a = (rng.normal(size=(4, 3)), rng.normal(size=(4, 3)))
    b = (rng.normal(size=(4, 3)), rng.normal(size=(4, 3)))
    ab = transforms.compose(a, b)
    np.testing.assert_allclose(transforms.to_matrix(*ab),
                               transforms.to_matrix(*a) @ transforms.to_matrix(*b), atol=1e-12)
    back = transforms.compose(transforms.invert(a), ab)
    np.testing.assert_allclose(transforms.to_matrix(*back), transforms.to_matrix(*b), atol=1e-12)
    w, t = transforms.from_matrix(transforms.to_matrix(*a))
    np.testing.assert_allclose(transforms.to_matrix(w, t), transforms.to_matrix(*a), atol=1e-12)


@pytest.mark.parametrize('setup', ['eye-in-hand', 'eye-to-hand'])
def test_arm_robot_poses_reproduce_board_poses(setup):
    sc = _scene(setup, 1, n=5, noise=0.0)
    w, t = sc.arm.board_poses(sc.robot_rvecs, sc.robot_tvecs)
    err_r, err_t = transforms.difference((w, t), (sc.board_rvecs, sc.board_tvecs))
    assert err_r.max() < 1e-9 and np.abs(err_t).max() < 1e-12


@pytest.mark.parametrize('setup', ['eye-in-hand', 'eye-to-hand'])
def test_closed_form_exact_on_noise_free_poses(setup):
    sc = _scene(setup, 2, n=6, noise=0.0)
    est = closed_form_hand_eye(sc.board_rvecs, sc.board_tvecs, sc.robot_rvecs, sc.robot_tvecs,
                               setup=setup)
    assert set(est) >= {'TSAI', 'PARK', 'HORAUD', 'DANIILIDIS'}
    for e in est.values():
        dr, dt = transforms.difference(e.mount, sc.arm.mount)
        assert dr[0] < 1e-6 and np.abs(dt).max() < 1e-8, e.method     # exact data: exact
        dr, dt = transforms.difference(e.board, sc.arm.board)
        assert dr[0] < 1e-6 and np.abs(dt).max() < 1e-8, e.method


def test_joint_jacobian_matches_finite_differences():
    sc = _scene('eye-in-hand', 3, n=3, noise=0.1, views=3)
    cal = calibrate(sc.obs)
    g = (sc.robot_rvecs, sc.robot_tvecs)
    free = np.ones(10, dtype=bool)
    pb = HandEyeProblem(sc.obs, cal.model.replace(k_1=0.3, k_2=-0.5), g, free)
    x = np.concatenate([sc.arm.mount[0], sc.arm.mount[1], sc.arm.board[0], sc.arm.board[1],
                        pb.theta0])
    _, jac = pb.evaluate(x)
    jac = jac.reshape(-1, pb.n_params)
    for k in range(pb.n_params):
        h = 1e-6 * max(abs(x[k]), 1.0)
        xp, xm = x.copy(), x.copy()
        xp[k] += h
        xm[k] -= h
        fd = (pb.evaluate(xp, jacobian=False)[0] - pb.evaluate(xm, jacobian=False)[0]) / (2 * h)
        scale = np.abs(fd).max() + 1e-12
        assert np.abs(jac[:, k] - fd.reshape(-1)).max() < 1e-5 * scale, k


@pytest.mark.parametrize('setup', ['eye-in-hand', 'eye-to-hand'])
def test_hand_eye_recovers_mount_and_beats_closed_form(setup):
    sc = _scene(setup, 4, views=5, corners=8)
    cal = calibrate(sc.obs)
    he = calibrate_hand_eye(sc.obs, cal, sc.robot_rvecs, sc.robot_tvecs, setup=setup)
    truth = sc.arm.in_calibrated_frame(sc.model, cal.model)
    dr, dt = transforms.difference(he.mount, truth.mount)
    # targets of the issue: 0.5 mm and 0.05 deg (the paper camera at 8 cm does far better)
    assert dr[0] < 0.05 and np.linalg.norm(dt) < 0.5e-3
    # the joint refinement beats the best closed form on the same data
    cf = he.closed_form[he.closed_form_method]
    dr_cf, dt_cf = transforms.difference(cf.mount, truth.mount)
    assert np.linalg.norm(dt) < np.linalg.norm(dt_cf)
    assert he.rms_reprojection_px <= cf.rms_reprojection_px
    # refined RMS: the noise level (0.1 px per axis, sqrt(2) * 0.1 per ray)
    assert abs(he.rms_reprojection_px / (np.sqrt(2) * 0.1) - 1) < 0.05
    # predicted board poses agree with the truth's
    w, t = he.optical_poses()
    assert np.abs(t - truth.board_poses(sc.robot_rvecs, sc.robot_tvecs)[1]).max() < 1e-4
    assert he.to_dict(base_frame='b', tool_frame='t', optical_frame='o')['child_frame'] == 'o'


def test_hand_eye_stddev_matches_errors_over_seeds():
    ratios = []
    for seed in range(10):
        sc = _scene('eye-in-hand', 100 + seed, n=6, views=3, corners=6)
        cal = calibrate(sc.obs)
        he = calibrate_hand_eye(sc.obs, cal, sc.robot_rvecs, sc.robot_tvecs, setup=sc.arm.setup)
        truth = sc.arm.in_calibrated_frame(sc.model, cal.model)
        err = np.concatenate([he.mount[0] - truth.mount[0], he.mount[1] - truth.mount[1],
                              he.board[0] - truth.board[0], he.board[1] - truth.board[1]])
        sd = np.concatenate([*he.mount_stddev, *he.board_stddev])
        ratios.append(np.abs(err) / sd)
    ratios = np.concatenate(ratios)
    # Gaussian errors: 99.7 % within 3 sigma; ask for >= 95 % over 120 components, and that
    # sigma is not grossly pessimistic either (the median |z| of a normal is 0.67)
    assert np.mean(ratios <= 3) >= 0.95
    assert 0.3 < np.median(ratios) < 1.3


@pytest.mark.parametrize('refine_intrinsics', [True, False])
def test_hand_eye_stddev_covers_errors_common_to_the_views_of_a_corner(refine_intrinsics):
    # a corner detector's error is largely common to the views of one corner (raw frames):
    # the classic (J^T J)^-1 s^2 gave |error| / sigma up to 12 here (median 3.8, 39 % within
    # 3 sigma); the cluster-robust sigma must cover it. Intrinsics held at the calibration's:
    # their uncertainty must enter the mount's (without it |error| / sigma up to 40 on raw
    # frames)
    from lf_mpc_calib.camera.observations import Observations
    ratios = []
    for seed in range(6):
        rng = np.random.default_rng(200 + seed)
        sc = arm_scene('eye-in-hand', n_captures=6, noise_px=0.0, rng=rng, views=view_grid(5),
                       board=board_points(6, 6, 3.51e-3 * 11 / 5))
        _, corner = np.unique(sc.obs.pose * 10000 + sc.obs.point, return_inverse=True)
        ijuv = sc.obs.ijuv.copy()
        ijuv[:, 2:] += (rng.normal(0.0, 0.13, (corner.max() + 1, 2))[corner]
                        + rng.normal(0.0, 0.07, (len(ijuv), 2)))
        obs = Observations(sc.obs.pose, sc.obs.point, sc.obs.board, ijuv)
        cal = calibrate(obs)
        he = calibrate_hand_eye(obs, cal, sc.robot_rvecs, sc.robot_tvecs, setup=sc.arm.setup,
                                refine_intrinsics=refine_intrinsics)
        truth = sc.arm.in_calibrated_frame(sc.model, cal.model)
        err = np.concatenate([he.mount[0] - truth.mount[0], he.mount[1] - truth.mount[1],
                              he.board[0] - truth.board[0], he.board[1] - truth.board[1]])
        ratios.append(np.abs(err) / np.concatenate([*he.mount_stddev, *he.board_stddev]))
    ratios = np.concatenate(ratios)
    assert np.mean(ratios <= 3) >= 0.95, np.round(ratios, 1)
    assert 0.3 < np.median(ratios) < 1.3, np.median(ratios)


def _about_one_axis(n, axis=(0, 0, 1)):
    base = Rotation.from_rotvec([0.3, -0.2, 0.1])
    steps = [base * Rotation.from_rotvec(np.radians(20 * k) * np.asarray(axis, float))
             for k in range(n)]
    return np.array([r.as_rotvec() for r in steps])


def test_motion_diversity_figures_and_guidance():
    one = motion_diversity(_about_one_axis(5))
    assert not one.determined and one.axis_spread_deg < 1e-6
    assert abs(one.largest_rotation_deg - 80) < 1e-6
    np.testing.assert_allclose(np.abs(one.main_axis), [0, 0, 1], atol=1e-9)
    assert 'about one axis' in one.message and 'perpendicular' in one.message
    two = np.vstack([_about_one_axis(3), (Rotation.from_rotvec([0.3, -0.2, 0.1])
                                          * Rotation.from_rotvec([0.5, 0, 0])).as_rotvec()])
    g = hand_eye_guidance(two)
    assert g.determined and g.axis_spread_deg > 80
    few = motion_diversity(_about_one_axis(2))
    assert not few.determined and '2 capture(s)' in few.message
    still = motion_diversity(np.tile([0.1, 0.2, 0.3], (4, 1)))
    assert not still.determined and 'at most 0.00 deg' in still.message


def test_hand_eye_refuses_degenerate_motions_and_inconsistent_poses():
    sc = _scene('eye-in-hand', 5, n=4, views=3)
    cal = calibrate(sc.obs)
    with pytest.raises(DegenerateConfigurationError, match=r'2 capture\(s\) with robot poses'):
        calibrate_hand_eye(sc.obs, cal, sc.robot_rvecs[:2], sc.robot_tvecs[:2],
                           robot_pose_ids=[0, 1], setup='eye-in-hand')
    # all captures turned about one axis: build the scene from such robot poses
    arm = default_arm('eye-in-hand')
    rob_w = _about_one_axis(4, axis=(0.0, 1.0, 0.0))
    base = Rotation.from_rotvec(rob_w)
    # keep the camera looking at the board: rotate about the board centre's line of sight
    c0 = (sc.board_rvecs[:1], sc.board_tvecs[:1])
    g0 = arm.robot_poses(*c0)
    rob_w = (Rotation.from_rotvec(g0[0]) * base[0].inv() * base).as_rotvec()
    rob_t = np.repeat(g0[1], 4, axis=0)
    w, t = arm.board_poses(rob_w, rob_t)
    from lf_mpc_calib.simulation.observations import simulate_observations
    obs = simulate_observations(sc.model, w, t, sc.board, sc.views)
    cal1 = calibrate(obs)
    with pytest.raises(DegenerateConfigurationError, match='about one axis'):
        calibrate_hand_eye(obs, cal1, rob_w, rob_t, setup='eye-in-hand')
    # wrong set-up (eye-to-hand poses given to eye-in-hand) or robot poses inverted
    with pytest.raises(InvalidInputError, match='do not describe one rigid'):
        calibrate_hand_eye(sc.obs, cal, *transforms.invert((sc.robot_rvecs, sc.robot_tvecs)),
                           setup='eye-in-hand')
    with pytest.raises(InvalidInputError, match='4 robot poses for 2 pose ids'):
        calibrate_hand_eye(sc.obs, cal, sc.robot_rvecs, sc.robot_tvecs, robot_pose_ids=[0, 1],
                           setup='eye-in-hand')
    with pytest.raises(InvalidInputError, match='setup must be one of'):
        calibrate_hand_eye(sc.obs, cal, sc.robot_rvecs, sc.robot_tvecs, setup='eye-on-hand')


def test_calibration_file_hand_eye_round_trip_and_old_files(tmp_path):
    from lf_mpc_calib.io.calibration_file import (
        CalibrationFile, CalibrationFileError, dumps, hand_eye_transform, loads)
    sc = _scene('eye-to-hand', 6, n=5, views=3, corners=6)
    cal = calibrate(sc.obs)
    he = calibrate_hand_eye(sc.obs, cal, sc.robot_rvecs, sc.robot_tvecs, setup='eye-to-hand')
    d = he.to_dict(base_frame='base_link', tool_frame='tool0', optical_frame='cam_optical_frame')
    f = CalibrationFile.from_result(cal, camera_type='conventional', hand_eye=d)
    back = loads(dumps(f))
    parent, child, w, t = hand_eye_transform(back)
    assert (parent, child) == ('base_link', 'cam_optical_frame')
    np.testing.assert_allclose(w, he.mount[0], rtol=1e-15)
    np.testing.assert_allclose(t, he.mount[1], rtol=1e-15)
    assert back.hand_eye['board_in_tool']['parent_frame'] == 'tool0'
    assert back.hand_eye['stddev']['translation_m'][0] > 0
    # a file without the key (every file written before) loads, and has no mount
    old = CalibrationFile.from_result(cal, camera_type='conventional')
    assert 'hand_eye' not in old.to_dict() and hand_eye_transform(loads(dumps(old))) is None
    bad = dict(d)
    del bad['child_frame']
    with pytest.raises(CalibrationFileError, match='hand_eye.child_frame'):
        CalibrationFile.from_dict(dict(f.to_dict(), hand_eye=bad))


def _principal_point(model):
    return np.array([-model.u_0 / model.k_u, -model.v_0 / model.k_v])


def test_joint_calibration_is_consistent_with_the_mount_and_determines_the_camera_better():
    # the arm ties the 6 board poses to 12 parameters: the joint intrinsics are better
    # determined than the camera-only ones (measured principal point sigma 0.07-0.08 px
    # against 0.08-0.12 px, RMS error over the seeds 0.10 px against 0.14 px), moved from
    # them by <= 2 of their sigmas, and are what a calibration file beside the mount holds
    from lf_mpc_calib.calibration.hand_eye_joint import (
        attach_joint_calibration, intrinsics_shift, published_result)
    from lf_mpc_calib.io.calibration_file import CalibrationFile
    err_cam, err_joint = [], []
    for seed in range(6):
        sc = arm_scene('eye-in-hand', n_captures=6, noise_px=0.1,
                       rng=np.random.default_rng(300 + seed), views=view_grid(3),
                       board=board_points(6, 6, 3.51e-3 * 11 / 5))
        cal = calibrate(sc.obs)
        he = calibrate_hand_eye(sc.obs, cal, sc.robot_rvecs, sc.robot_tvecs, setup='eye-in-hand')
        joint = attach_joint_calibration(he, sc.obs, cal)
        assert published_result(cal, he) is joint and published_result(cal) is cal
        np.testing.assert_array_equal(joint.model.to_vector(), he.model.to_vector())
        assert joint.extras['camera_only'] is cal and joint.free_names() == cal.free_names()
        w, t = he.optical_poses()
        np.testing.assert_array_equal(joint.translations, t)
        assert abs(joint.rms_reprojection_px - he.rms_reprojection_px) < 1e-12
        assert np.all(joint.principal_point_stddev() < cal.principal_point_stddev())
        shift = he.extras['intrinsics_shift']
        assert shift.max_sigmas == intrinsics_shift(joint, cal).max_sigmas < 3.0, shift
        assert 'intrinsics refined jointly with the hand-eye' in shift.summary()
        errors = he.to_dict(base_frame='b', tool_frame='t', optical_frame='o')['errors']
        assert errors['intrinsics'] == 'joint'
        assert errors['intrinsics_shift_max_sigmas'] == shift.max_sigmas
        f = CalibrationFile.from_result(published_result(cal, he), camera_type='conventional')
        np.testing.assert_array_equal(f.model.to_vector(), he.model.to_vector())
        err_cam.append(_principal_point(cal.model) - _principal_point(sc.model))
        err_joint.append(_principal_point(joint.model) - _principal_point(sc.model))
    assert np.sqrt(np.mean(np.square(err_joint))) < np.sqrt(np.mean(np.square(err_cam)))


def test_joint_calibration_leaves_out_captures_without_robot_pose_and_held_intrinsics():
    from lf_mpc_calib.calibration.hand_eye_joint import attach_joint_calibration, \
        joint_calibration
    sc = _scene('eye-to-hand', 7, n=6, views=3, corners=6)
    cal = calibrate(sc.obs)
    keep = [0, 1, 2, 4, 5]
    he = calibrate_hand_eye(sc.obs, cal, sc.robot_rvecs[keep], sc.robot_tvecs[keep],
                            robot_pose_ids=keep, setup='eye-to-hand')
    joint = attach_joint_calibration(he, sc.obs, cal)
    assert joint.pose_ids.tolist() == keep and len(joint.residuals_px) == np.isin(
        sc.obs.pose, keep).sum()
    assert np.all(np.isfinite(joint.residuals_px))
    held = calibrate_hand_eye(sc.obs, cal, sc.robot_rvecs, sc.robot_tvecs, setup='eye-to-hand',
                              refine_intrinsics=False)
    assert attach_joint_calibration(held, sc.obs, cal) is None
    assert held.error_figures()['intrinsics'] == 'held'
    with pytest.raises(InvalidInputError, match='held the intrinsics'):
        joint_calibration(held, sc.obs, cal)


def test_calibrations_with_lens_type_terms_keep_their_intrinsics():
    # the hand-eye problem has no per-lens-type terms: such a calibration is held, not
    # replaced by a joint one fitted without them
    import dataclasses
    from lf_mpc_calib.calibration.hand_eye_joint import published_result, refines_intrinsics
    from lf_mpc_calib.pipeline.hand_eye import hand_eye_for_frames
    from lf_mpc_calib.io.robot_poses import RobotPoses
    sc = _scene('eye-in-hand', 8, n=4, views=3, corners=6)
    cal = calibrate(sc.obs)
    assert refines_intrinsics(cal)
    typed = dataclasses.replace(cal, lens_types=object())
    assert not refines_intrinsics(typed)
    frames = [str(p) for p in cal.pose_ids]
    robot = RobotPoses(tuple(frames), sc.robot_rvecs, sc.robot_tvecs, setup='eye-in-hand')
    he = hand_eye_for_frames(sc.obs, typed, robot, frames)
    assert he.model_covariance is None and published_result(typed, he) is typed
    assert 'joint_calibration' in hand_eye_for_frames(sc.obs, cal, robot, frames).extras
