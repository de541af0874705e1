"""The ROS demo with a focused camera: the simulated Keplerian camera's frames through the
calibration node (camera_type focused, corners in the micro-images) and the decode node
(corners triangulated from the micro-images), against the optics' truth at the demo's
defaults (simulate's capture, a larger board) but at the nodes' half-size crop: the demo's
own crop (FOCUSED_DEMO_SCALE, 0.7) costs twice as much, and its principal point within the
1 px target is measured by benchmarks/bench_ros_demo.py."""

import io
import math
import re
from types import SimpleNamespace

import pytest
import yaml

pytest.importorskip('rclpy')

from lf_mpc_calib.cli import main  # noqa: E402
from lf_mpc_calib.ros import demo  # noqa: E402
from lf_mpc_calib.ros.defaults import SIM_SCALE  # noqa: E402
from lf_mpc_calib.simulation.dataset import FOCUSED_CAPTURE_POSES  # noqa: E402

pytestmark = pytest.mark.cost(110)   # s on the CI machine: scheduled early (conftest)


def _errors(text):
    """{parameter: relative error in %} of the demo's parameter table."""
    rows = (line.split() for line in text.splitlines())
    return {r[0]: float(r[-2]) for r in rows if len(r) == 6 and r[-1] == '%'}


def test_demo_ros_focused_keplerian_at_half_size_against_the_trust_targets(tmp_path):
    out = io.StringIO()
    # the demo's defaults but the half-size crop (module docstring) and 16 rays a pixel (64
    # took 63 s in CI and 32 took 62 s in the whole suite, over the 60 s a test may take; 16:
    # 48 s alone, every check below passing); the renders go to the sim node's render
    # worker on the other core (render_ahead). The demo's defaults meet the trust targets
    # (0.7 crop, 64 rays): benchmarks/bench_ros_demo.py
    args = SimpleNamespace(preset='focused-keplerian', poses=None, output_dir=str(tmp_path),
                           seed=1, scale=SIM_SCALE, timeout=300.0, samples=16)
    assert demo.run(args, out=out) == 0, out.getvalue()
    text = out.getvalue()
    # simulate's capture: FOCUSED_CAPTURE_POSES poses, every one calibrated
    n = FOCUSED_CAPTURE_POSES
    assert text.count('micro-images (') == n and f'calibrate: calibrated {n} poses' in text
    assert f'leave-one-pose-out over {n} poses: principal point sd' in text   # the node's
    cal = tmp_path / 'latest' / 'lf_camera.yaml'
    assert 'camera_type: focused' in cal.read_text()
    # against the simulator's truth (aligned to the calibration's lens numbering): every k
    # within 1 % (measured 0.34 % at 32 rays, 0.01-0.19 % at 64; was 2-9 % with 6 poses at 4 rays)
    err = _errors(text)
    assert all(err[k] <= demo.TRUST_K_PERCENT for k in ('k_i', 'k_j', 'k_u', 'k_v')), err
    # the principal point: measured (1.23, 1.04) px off (seed 1, 32 rays), within the 3 sigma
    # the node reports (0.74, 1.15) px; the 1 px target is not met at this half-size crop (the
    # verdict says so)
    pp = re.search(r'principal point \((\S+), (\S+)\) px, truth \((\S+), (\S+)\) px', text)
    est, true = [float(v) for v in pp.groups()[:2]], [float(v) for v in pp.groups()[2:]]
    # its sigma as the file keeps it (the guidance prints it only when nothing else is asked)
    from lf_mpc_calib.io.calibration_file import load_calibration
    saved = load_calibration(cal)
    sigma = [saved.stddev[a] / abs(getattr(saved.model, k))
             for a, k in (('u_0', 'k_u'), ('v_0', 'k_v'))]
    assert all(abs(e - t) <= 3 * s for e, t, s in zip(est, true, sigma)), (pp.group(0), sigma)
    verdict = re.search(r'against the truth: k within ([0-9.]+) %, principal point ([0-9.]+) px, '
                        r'3-D corners ([0-9.]+) x the floor', text)
    assert float(verdict.group(2)) == pytest.approx(math.hypot(est[0] - true[0],
                                                               est[1] - true[1]), abs=0.01)
    # "to trust" also needs the acceptance rule (calibrate-raw's) to accept the session
    assert ('NOT to trust' in text) == (float(verdict.group(2)) > demo.TRUST_PP_PX
                                        or 'NOT accepted' in text)
    # the decode node's corners of a new pose against the floor: the same frame measured
    # with the true model
    m = re.search(r'measured by lf_decoder \(/lf_decoder/points\): (\d+) corners', text)
    assert m and int(m.group(1)) >= 20, text
    node_mm = float(re.search(r'3-D error: mean ([0-9.]+) mm', text).group(1))
    floor = re.search(r'3-D error mean ([0-9.]+) mm .* with the calibrated model, ([0-9.]+) mm '
                      r'.* the floor', text)
    calibrated, true_model = (float(v) for v in floor.groups())
    assert node_mm <= demo.TRUST_FLOOR_RATIO * true_model, floor.group(0)
    assert calibrated <= demo.TRUST_FLOOR_RATIO * true_model, floor.group(0)
    assert node_mm == pytest.approx(calibrated, abs=0.5)    # the node measures as the core does
    # measured 1.03 mm, 1.14 x the floor (seed 1, 32 rays)
    assert float(verdict.group(3)) == pytest.approx(node_mm / true_model, abs=0.02)
    # in front of the camera: the corners ~/points carry at z > 0 in the optical frame, the
    # distance from the main lens the optics give (within the 2 % of the decode node's test),
    # not 1/k_3 (0.34 m) nearer; every board pose of the saved calibration file too
    where = re.search(r'board at z = (-?\d+) mm in the optical frame \(as on ~/points\).*the '
                      r'main lens; the optics put it at z = (-?\d+) mm', text)
    z, optics_z = (float(v) for v in where.groups())
    assert 0 < z == pytest.approx(optics_z, rel=0.02), where.group(0)
    table = re.findall(r'^ *\d+ \( *\S+ +\S+ +(\S+)\) \( *\S+ +\S+ +(\S+)\) +\S+ mm$', text,
                       re.M)
    assert table and all(float(a) > 0 and float(b) > 0 for a, b in table), table
    poses = yaml.safe_load(cal.read_text())['poses']
    assert len(poses) == n and all(p['translation_m'][2] > 0 for p in poses)


def test_demo_ros_multifocus_tells_the_lens_types_and_decodes_with_them(tmp_path):
    out = io.StringIO()
    # 4 rays per pixel, not the focused default 64: 49 s instead of 89 s (the lens types and
    # the decode path are what this test checks; the Keplerian test above checks the
    # calibration at the defaults)
    args = SimpleNamespace(preset='focused-multifocus', poses=6, output_dir=str(tmp_path),
                           seed=1, scale=SIM_SCALE, timeout=300.0, samples=4)   # 3 types
    assert demo.run(args, out=out) == 0, out.getvalue()
    text = out.getvalue()
    # the node is told 3 types and tells each micro-image's from the 6 captures (measured:
    # 100 % of 1794 micro-images; the sharpness alone refused at this half-size scale)
    assert '3 micro-lens types told apart by sharpness and detections' in text
    m = re.search(r'lens types told from the captures: ([0-9.]+) % of (\d+) micro-images', text)
    assert m and float(m.group(1)) >= 99.0, text
    cal = (tmp_path / 'latest' / 'lf_camera.yaml').read_text()
    assert 'type_of_class' in cal
    # 6 poses, not the demo's 10 (the Keplerian test above checks the trust targets at the
    # defaults); bounds from the old 6-pose capture (7 x 4 board, 4 rays: k_u, k_v 8.9 / 8.4 %,
    # sigma 6 %) that catch a sign or axis mix-up (100 %+)
    err = _errors(text)
    assert all(err[k] < 20.0 for k in ('k_u', 'k_v')) and err['k_i'] < 2.0, err
    m = re.search(r'measured by lf_decoder \(/lf_decoder/points\): (\d+) corners', text)
    assert m and int(m.group(1)) >= 20, text


def test_demo_cli_ros_names_the_presets_for_an_unknown_one(capsys):
    assert main(['demo', '--ros', '--preset', 'raytrix']) == 2
    err = capsys.readouterr().err
    assert "unknown --preset 'raytrix'" in err and 'focused-galilean' in err
