"""The closed loop in simulation: lf-mpc-calib demo --ros --plan on the small Lytro, the
calibration node suggesting, the simulated camera following, until the target or the cap."""

import io
import re
from types import SimpleNamespace

import pytest

pytest.importorskip('rclpy')

from lf_mpc_calib.ros import demo  # noqa: E402

pytestmark = pytest.mark.cost(25)   # s on the CI machine: scheduled early (conftest)

TARGET_K, TARGET_PP, CAP = 1.5, 1.5, 6


def test_demo_plan_closed_loop_reaches_the_target_or_says_so(tmp_path):
    out = io.StringIO()
    args = SimpleNamespace(poses=3, output_dir=str(tmp_path), seed=1, scale=0.3, timeout=60.0,
                           plan=True, target_k_sigma=TARGET_K, target_pp_sigma=TARGET_PP,
                           max_captures=CAP)
    assert demo.run(args, out=out) == 0
    text = out.getvalue()
    used = int(re.search(r'^captures used: (\d+);', text, re.M).group(1))
    assert 3 <= used <= CAP
    assert text.count(' corners in ') >= used
    rows = {m.group(1): [float(v) if v != '-' else None for v in m.groups()[1:]]
            for m in re.finditer(r'^(k_[ijuv]|principal_point_[uv]) +(\S+) +(\S+) +(\S+) +(\S+)$',
                                 text, re.M)}
    assert len(rows) == 6
    reported = {q: r[1] for q, r in rows.items()}
    met = all(reported[q] <= (TARGET_K if q.startswith('k_') else TARGET_PP) for q in rows)
    # the verdict printed is the one the reported sigmas give
    assert f'met by the sigmas the calibration reports: {"yes" if met else "no"}' in text
    if used < CAP:                              # stopped early: the target was predicted
        assert 'target predicted: yes' in text
    for q, (pred, rep, err, z) in rows.items():
        # the calibration's true errors within 3 sigma (what it reports)
        assert z <= 3.0, (q, rep, err)
    # the prediction before the last capture against what the calibration then reports
    # (issue 28: within 25 %). Measured 0-14 % (seeds 1, 2): the captures so far count with
    # the covariance the calibration reported for them, the new one with its residual noise.
    # (Before: 37 % with the suggestions after the first calibration shown by the simulator
    # in the optics' frame, a 180 deg turn about the optical axis from the calibrated one.)
    for q, (pred, rep, _, _) in rows.items():
        assert abs(pred / rep - 1) <= 0.25, (q, pred, rep)


def test_demo_plan_on_the_simulated_arm_suggests_tool_poses_that_show_the_board(tmp_path):
    out = io.StringIO()
    args = SimpleNamespace(poses=3, output_dir=str(tmp_path), seed=1, scale=0.3, timeout=60.0,
                           plan=True, target_k_sigma=TARGET_K, target_pp_sigma=TARGET_PP,
                           max_captures=4, hand_eye='eye-in-hand')
    assert demo.run(args, out=out) == 0
    text = out.getvalue()
    # the mount against the arm's truth, within 3 of its sigmas (translation and rotation)
    m = re.search(r'mount error ([0-9.]+) mm, ([0-9.]+) deg \(sigma ([0-9.]+) mm, ([0-9.]+) '
                  r'deg\)', text)
    err_mm, err_deg, sd_mm, sd_deg = (float(v) for v in m.groups())
    assert err_mm <= 3 * sd_mm and err_deg <= 3 * sd_deg, m.group(0)
    # the mount is part of the target on an arm: judged on its reported sigmas, 1.614 x each
    # (the 95 % bound of the error) within the node's default targets 0.1 mm, 0.02 deg (not
    # met at this crop in 4 captures, which it says)
    met = 1.614 * sd_mm <= 0.1 and 1.614 * sd_deg <= 0.02
    assert f'mount target 0.1 mm, 0.02 deg: {"met" if met else "NOT met"}' in text
    if not met:
        assert 'met by the sigmas the calibration reports: no' in text
    # the suggested tool pose, through the arm's true chain, puts the board where suggested
    gap = float(re.search(r'true chain shows the board there within ([0-9.]+) mm', text)
                .group(1))
    assert gap < 5.0


def test_demo_plan_closes_the_loop_for_a_focused_camera(tmp_path):
    """demo --ros --plan --preset focused-keplerian at a small crop: the node plans in the
    micro-images (clear of the band around the plane conjugate to the micro-lenses), the
    simulated camera shows each suggestion where it was suggested, in the optical frame at the
    main lens, in which the calibration reports its poses too, and the loop stops once the
    target is predicted; the calibration's true errors within 3 of its sigmas. (The default
    crop, 0.7, targets 0.3 % / 0.3 px: 4 captures, about 2 minutes: docs/planning.md.)"""
    out = io.StringIO()
    args = SimpleNamespace(preset='focused-keplerian', poses=None, output_dir=str(tmp_path),
                           seed=1, scale=0.35, timeout=60.0, plan=True, target_k_sigma=1.5,
                           target_pp_sigma=3.0, max_captures=8)
    assert demo.run(args, out=out) == 0
    text = out.getvalue()
    # every suggestion shown where suggested (the true board's centre, optical frame, to the
    # 0.1 mm printed), in front of the main lens
    pairs = [(float(a), float(b)) for a, b in
             re.findall(r'centre ([-0-9.]+) m, shown at ([-0-9.]+) m', text)]
    assert pairs and all(0 < a == pytest.approx(b, abs=1.5e-4) for a, b in pairs), pairs
    # and the calibration's poses of those captures at the depths suggested: one frame (the
    # MPC frame's origin is 1/k_3 = 0.34 m away). Measured: 0.98 mm (seed 1), 3.48 mm (seed
    # 2); 1.71 mm (seed 1, lenses on their lattice): 10 mm, 2 % of the boards' distance
    gap = float(re.search(r'poses \(optical frame\): within ([0-9.]+) mm', text).group(1))
    assert gap < 10.0, gap
    used = int(re.search(r'^captures used: (\d+);', text, re.M).group(1))
    assert 3 <= used < 8 and 'target predicted: yes' in text, text
    # the realistic sensor's dark frame, saved as a user captures one, given to the nodes
    assert f'dark frame of the simulated sensor (lens capped): {tmp_path / "dark.png"}' in text
    # every capture found the board where the node suggested it: all its corners or nearly
    found = [int(a) / int(b) for a, b in re.findall(r': (\d+)/(\d+) corners in ', text)]
    assert len(found) == used and min(found) >= 0.8, found
    rows = {m.group(1): [float(v) for v in m.groups()[1:]]
            for m in re.finditer(r'^(k_[ijuv]|principal_point_[uv]) +(\S+) +(\S+) +(\S+) +(\S+)$',
                                 text, re.M)}
    assert len(rows) == 6
    met = all(rep <= (1.5 if q.startswith('k_') else 3.0) for q, (_, rep, _, _) in rows.items())
    assert f'met by the sigmas the calibration reports: {"yes" if met else "no"}' in text
    for q, (_, rep, err, z) in rows.items():
        assert z <= 3.0, (q, rep, err)
