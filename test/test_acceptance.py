"""The one acceptance rule (calibration.acceptance) of calibrate-raw, the node and the demo."""

import dataclasses

import numpy as np
import pytest

from lf_mpc_calib.calibration import calibrate
from lf_mpc_calib.calibration.acceptance import acceptance, check_accepted, RULE
from lf_mpc_calib.errors import ConvergenceError, DegenerateConfigurationError, DetectionError
from lf_mpc_calib.simulation.observations import paper_scene


@pytest.fixture(scope='module')
def results():
    """A well determined calibration (8 poses, 0.1 px), a weak one (2 poses, 3 x 3 views, 3 px)."""
    _, _, _, good = paper_scene(n_poses=8, noise_px=0.1, rng=np.random.default_rng(1))
    _, _, _, weak = paper_scene(n_poses=2, n_views=3, noise_px=3.0,
                                rng=np.random.default_rng(2))
    return calibrate(good, distortion=False), calibrate(weak, distortion=False)


def test_acceptance_accepts_a_determined_calibration(results):
    good, _ = results
    verdict = check_accepted(good, corner_noise_px=0.1)
    assert verdict.accepted and verdict.refusals == ()
    assert verdict.fit_ratio == pytest.approx(good.rms_reprojection_px / 0.1)
    assert verdict.summary() == f'accepted ({RULE})'
    assert verdict.to_dict()['accepted'] is True


def test_acceptance_refuses_weak_poses_with_the_figures(results):
    _, weak = results
    verdict = acceptance(weak)
    assert not verdict.accepted
    assert verdict.refusals == verdict.determination.refusals     # the sigmas over the limit
    assert all('(limit ' in r for r in verdict.refusals)
    assert verdict.summary().startswith(f'NOT accepted ({RULE}): sigma of ')
    with pytest.raises(DegenerateConfigurationError, match='do not determine the camera'):
        check_accepted(weak)
    # calibrate-raw --accept-uncertain writes it, and the verdict still says why not
    assert not check_accepted(weak, accept_uncertain=True).accepted


def test_acceptance_refuses_a_model_that_does_not_explain_the_detections(results):
    good, _ = results
    off = dataclasses.replace(good, rms_reprojection_px=0.4)   # 4 x 0.1 px: the limit is 3 x
    verdict = acceptance(off, corner_noise_px=0.1)
    assert not verdict.accepted and verdict.fit_ratio == pytest.approx(4.0)
    assert 'is 4.0 x the corner noise 0.100 px (limit 3 x)' in verdict.refusals[0]
    with pytest.raises(DetectionError, match='does not explain the detections'):
        check_accepted(off, corner_noise_px=0.1, accept_uncertain=True)


def test_acceptance_refuses_a_refinement_that_did_not_converge(results):
    good, _ = results
    stopped = dataclasses.replace(good, converged=False, message='max iterations')
    assert acceptance(stopped).refusals[0] == 'the refinement did not converge (max iterations)'
    with pytest.raises(ConvergenceError, match='did not converge'):
        check_accepted(stopped)
