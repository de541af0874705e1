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
