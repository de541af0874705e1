"""The calibration-drift watch: the window's test, and residuals from the real model code."""

import numpy as np
import pytest

from lf_mpc_calib.errors import DegenerateConfigurationError, InvalidInputError
from lf_mpc_calib.measurement.drift import DriftWatch, frame_residuals, MODEL_DOF, POSE_DOF
from lf_mpc_calib.simulation.drift_scene import DriftScene, perturbed


def _frames_to_flag(scene, model, rng, frames):
    """Frames fed until the watch names a drift (None: not within ``frames``), last summary."""
    cal = scene.calibration
    dof = 2 * len(cal.residuals_px) - POSE_DOF * len(cal.pose_ids) - MODEL_DOF
    watch = DriftWatch(cal.rms_reprojection_px, calibration_dof=dof)
    summary = None
    for n in range(1, frames + 1):
        try:
            summary = watch.add(frame_residuals(scene.frame(rng), model))
        except DegenerateConfigurationError:
            continue
        if summary.drifting:
            return n, summary
    return None, summary


def test_gaussian_window_matches_its_noise():
    rng = np.random.default_rng(3)
    right = DriftWatch(0.1 * np.sqrt(2), calibration_dof=1e5)
    worse = DriftWatch(0.1 * np.sqrt(2), calibration_dof=1e5)
    for _ in range(60):
        ok = right.add(rng.normal(0.0, 0.1, (400, 2)))
        bad = worse.add(rng.normal(0.0, 0.11, (400, 2)))
        assert not ok.drifting
    assert bad.drifting and bad.beyond_frames > 40
    assert ok.expected_px < ok.limit_px < bad.residual_px
    assert abs(ok.residual_px - ok.expected_px) < 0.01 * ok.expected_px


def test_a_glitch_names_no_drift():
    rng = np.random.default_rng(4)
    clipped = DriftWatch(0.1 * np.sqrt(2), calibration_dof=1e5)
    for n in range(30):
        r = rng.normal(0.0, 0.1, (2000, 2))
        if n == 15:
            r[:37] += 8.0      # one frame: a mislabelled corner in 37 views
            glitch = r
        summary = clipped.add(r)
        assert not summary.beyond
        assert (summary.clipped >= 37) == (n >= 15) and summary.clipped < 40
    assert np.sum(glitch[:37] ** 2) / np.sum(glitch ** 2) > 0.5   # unclipped: most of it


def test_news_only_at_onset_and_doublings():
    watch = DriftWatch(0.1, window=5, min_frames=2)
    rng = np.random.default_rng(0)
    news = [watch.add(rng.normal(0.0, 1.0, (50, 2))).news for _ in range(20)]
    assert np.flatnonzero(news).tolist() == [1, 3, 7, 15]   # beyond_frames 2, 4, 8, 16
    assert 'calibration drift: residual' in watch.summary.message()


def test_bad_arguments_are_named():
    with pytest.raises(InvalidInputError, match='calibration RMS'):
        DriftWatch(0.0)
    with pytest.raises(InvalidInputError, match=r'shape \(N, 2\)'):
        DriftWatch(0.1).add(np.zeros((5, 3)))


def test_focused_k_i_off_is_flagged_and_the_right_one_is_not():
    rng = np.random.default_rng(5)
    scene = DriftScene.make('focused-galilean', noise_px=0.1, rng=rng)
    right = scene.calibration.model
    n, summary = _frames_to_flag(scene, perturbed(right, 'k_i'), rng, 30)
    assert n is not None and n <= 30 and summary.residual_px > summary.limit_px
    n, summary = _frames_to_flag(scene, right, rng, 60)
    assert n is None and summary.residual_px < summary.limit_px


def test_conventional_residuals_are_the_corner_noise():
    rng = np.random.default_rng(8)
    scene = DriftScene.make('lytro', noise_px=0.1, rng=rng)
    r = frame_residuals(scene.frame(rng), scene.calibration.model)
    rms = np.sqrt(np.mean(np.sum(r * r, axis=1)))
    assert r.shape[1] == 2 and abs(rms - 0.1 * np.sqrt(2)) < 0.01


def _targeted_run(scene, model, rng, frames):
    """(frames until the targeted test names a drift or None, the largest T over the run,
    the last ScoreSummary)."""
    from lf_mpc_calib.measurement.drift_score import ScoreWatch, frame_score
    cal = scene.calibration
    names = cal.free_names()
    watch = ScoreWatch(names, cal.covariance, cal.rms_reprojection_px)
    first, top, s = None, 0.0, None
    for n in range(1, frames + 1):
        try:
            s = watch.add(frame_score(scene.frame(rng), model, names))
        except DegenerateConfigurationError:
            continue
        top = max(top, s.statistic)
        if s.drifting and first is None:
            first = n
    return first, top, s


def test_targeted_test_names_a_principal_point_the_rms_test_cannot():
    """Lytro, principal point 1 px off (4 sigma of its own calibration here): the RMS test
    stays within its limit (the change leaves 0.007 px on 0.1 px corners), the targeted test
    names u_0 within 30 frames; with the right calibration it stays under its limit
    (measured over 3 x 300 frames: largest T 15 against 31.8, benchmarks/bench_drift.py)."""
    rng = np.random.default_rng(0)
    scene = DriftScene.make('lytro', noise_px=0.1, rng=rng)
    wrong = perturbed(scene.calibration.model, 'principal point')
    first, _, s = _targeted_run(scene, wrong, rng, 30)
    assert first is not None and first <= 30 and s.largest == 'u_0' and s.largest_sigmas > 2
    assert 'u_0 moved' in s.message()
    assert _frames_to_flag(scene, wrong, rng, 30)[0] is None      # what the RMS test misses
    first, top, s = _targeted_run(scene, scene.calibration.model, rng, 60)
    assert first is None and top < s.limit, (top, s.limit)
    assert s.dof == len(scene.calibration.free_names())


def test_the_node_watch_runs_the_targeted_test_where_it_holds():
    """CalibrationWatch: the targeted test for a conventional calibration file with its
    covariance, not for one without, nor for a focused camera (false alarms there)."""
    from lf_mpc_calib.io.calibration_file import CalibrationFile
    from lf_mpc_calib.measurement.calibration_watch import CalibrationWatch
    rng = np.random.default_rng(1)
    scene = DriftScene.make('lytro', noise_px=0.1, rng=rng)
    cal = CalibrationFile.from_result(scene.calibration, camera_type='conventional')
    assert cal.covariance is not None
    watch = CalibrationWatch(cal)
    s = watch.add(scene.frame(rng), cal.model)
    assert s.score is not None and 'intrinsics' in s.as_dict() and not s.beyond
    import dataclasses
    for other in (dataclasses.replace(cal, covariance=None),
                  dataclasses.replace(cal, camera_type='focused')):
        assert CalibrationWatch(other).score is None


def test_targeted_test_refuses_what_does_not_fit():
    from lf_mpc_calib.measurement.drift_score import ScoreWatch
    with pytest.raises(InvalidInputError, match='covariance must be 2 x 2'):
        ScoreWatch(('k_i', 'k_j'), np.eye(3), 0.1)
    with pytest.raises(InvalidInputError, match='RMS'):
        ScoreWatch(('k_i',), np.eye(1), 0.0)
    watch = ScoreWatch(('k_i', 'k_j'), np.eye(2), 0.1)
    with pytest.raises(InvalidInputError, match=r'score must be g \(2,\)'):
        watch.add((np.zeros(3), np.eye(2)))
    with pytest.raises(InvalidInputError, match='finite'):
        watch.add((np.array([np.nan, 0.0]), np.eye(2)))
