"""The ROS demo with a focused camera: the simulated Keplerian camera's frames through the
calibration node (camera_type focused, corners in the micro-images) and the decode node
(corners triangulated from the micro-images), against the optics' truth."""

import io
import re
from types import SimpleNamespace

import pytest

pytest.importorskip('rclpy')

from lf_mpc_calib.cli import main  # noqa: E402
from lf_mpc_calib.ros import demo  # noqa: E402

pytestmark = pytest.mark.cost(33)   # s on the CI machine: scheduled early (conftest)


def _errors(text):
    """{parameter: relative error in %} of the demo's parameter table."""
    rows = (line.split() for line in text.splitlines())
    return {r[0]: float(r[-2]) for r in rows if len(r) == 6 and r[-1] == '%'}


def test_demo_ros_focused_keplerian_recovers_truth_and_measures_corners(tmp_path):
    out = io.StringIO()
    args = SimpleNamespace(preset='focused-keplerian', poses=6, output_dir=str(tmp_path),
                           seed=1, scale=None, timeout=60.0)
    assert demo.run(args, out=out) == 0, out.getvalue()
    text = out.getvalue()
    assert text.count('micro-images (') == 6 and 'calibrate: calibrated 6 poses' in text
    assert 'leave-one-pose-out over 6 poses: principal point sd' in text   # the node's answer
    err = _errors(text)
    # half-size sensor (1024 x 768, 6 poses of a 7 x 4 board): measured k_i 1.9 %, k_j 4.6 %,
    # k_u 1.2 %, k_v 3.5 %, k_3 7.5 %, k_4 8.7 % (the offline demo's figures: same poses),
    # limited by the micro-image corners (RMS 0.21 px); a sign or axis mix-up is 100 %+
    assert all(err[k] < 8.0 for k in ('k_i', 'k_j', 'k_u', 'k_v')), err
    assert all(err[k] < 15.0 for k in ('k_3', 'k_4')), err
    pp = re.search(r'principal point \((\S+), (\S+)\) px, truth \((\S+), (\S+)\) px', text)
    est, true = [float(v) for v in pp.groups()[:2]], [float(v) for v in pp.groups()[2:]]
    # measured (-40.3, -53.3) vs (-40.6, -30.4) px: v within its 14.8 px sigma x 2
    assert abs(est[0] - true[0]) < 10 and abs(est[1] - true[1]) < 40, pp.group(0)
    cal = tmp_path / 'latest' / 'lf_camera.yaml'
    assert 'camera_type: focused' in cal.read_text()
    # the decode node's corners of a new pose (174 mm): measured 27 corners, mean 11.7 mm
    # against the true model's 7.6 mm on the same detections (1.54 x the floor)
    m = re.search(r'measured by lf_decoder \(/lf_decoder/points\): (\d+) corners', text)
    assert m and int(m.group(1)) >= 20, text
    floor = re.search(r'3-D error mean ([0-9.]+) mm .* with the calibrated model, ([0-9.]+) mm '
                      r'.* the floor', text)
    calibrated, true_model = (float(v) for v in floor.groups())
    assert calibrated < 3.0 * true_model, floor.group(0)
    assert float(re.search(r'3-D error: mean ([0-9.]+) mm', text).group(1)) == \
        pytest.approx(calibrated, abs=0.5)    # the node measures as the core does


def test_demo_ros_multifocus_tells_the_lens_types_and_decodes_with_them(tmp_path):
    out = io.StringIO()
    args = SimpleNamespace(preset='focused-multifocus', poses=6, output_dir=str(tmp_path),
                           seed=1, scale=None, timeout=60.0)   # lens_types: the preset's 3
    assert demo.run(args, out=out) == 0, out.getvalue()
    text = out.getvalue()
    # the node is told 3 types and tells each micro-image's from the 6 captures (measured:
    # 100 % of 1794 micro-images; the sharpness alone refused at this half-size scale)
    assert '3 micro-lens types told apart by sharpness and detections' in text
    m = re.search(r'lens types told from the captures: ([0-9.]+) % of (\d+) micro-images', text)
    assert m and float(m.group(1)) >= 99.0, text
    cal = (tmp_path / 'latest' / 'lf_camera.yaml').read_text()
    assert 'type_of_class' in cal
    # k_u, k_v: measured 8.9 / 8.4 % (one type 9.1 / 8.6 %): the poses determine them to 6 %
    # (sigma, the node's guidance says so); the types change them by 0.4 sigma
    err = _errors(text)
    assert all(err[k] < 20.0 for k in ('k_u', 'k_v')) and err['k_i'] < 2.0, err
    m = re.search(r'measured by lf_decoder \(/lf_decoder/points\): (\d+) corners', text)
    assert m and int(m.group(1)) >= 20, text


def test_demo_cli_ros_names_the_presets_for_an_unknown_one(capsys):
    assert main(['demo', '--ros', '--preset', 'raytrix']) == 2
    err = capsys.readouterr().err
    assert "unknown --preset 'raytrix'" in err and 'focused-galilean' in err
