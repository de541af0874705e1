"""The demo command: a whole simulated session must run and recover the focus shear."""

import re

import pytest

from lf_mpc_calib.io.calibration_file import load_calibration
from lf_mpc_calib.cli import main

pytestmark = pytest.mark.cost(31)   # s on the CI machine: scheduled early (conftest)


def test_demo_small_session_writes_calibration_and_recovers_focus(tmp_path, capsys):
    assert main(['demo', '-o', str(tmp_path)]) == 0
    out = capsys.readouterr().out
    cal = load_calibration(tmp_path / 'calibration.yaml')
    # the simulated camera is focused at 0.4 m: k_3 = k_4 = -1/0.4 from its optics
    assert abs(cal.model.k_3 + 2.5) < 0.125 and abs(cal.model.k_4 + 2.5) < 0.125, 'within 5 %'
    assert cal.errors['rms_reprojection_px'] < 0.5, 'sub-pixel fit on noise-free renders'
    # the 3-D measurement of a new frame is printed with its error against the truth
    mean_mm = float(re.search(r'3-D error: mean ([0-9.]+) mm', out).group(1))
    assert mean_mm < 20.0, 'corners at ~0.4 m measured to a few mm (Lytro-like baseline)'
    assert (tmp_path / 'report' / 'summary.txt').is_file()


@pytest.mark.parametrize('argv, expected', [
    (['demo', '--live'], '--live needs --ros'),
    (['demo', '--ros', '--live', '0'], '--live: expected a number above 0 and at most 3600'),
    (['demo', '--ros', '--live', 'nan'], '--live: expected a number above 0'),
    (['demo', '--ros', '--live', '1e9'], 'at most 3600'),
])
def test_demo_live_refuses_without_ros_or_seconds(argv, expected, capsys):
    try:
        rc = main(argv)
    except SystemExit as exc:       # refused where it enters, by argparse
        rc = exc.code
    assert rc == 2
    assert expected in capsys.readouterr().err


@pytest.mark.parametrize('ros', [[], ['--ros']])
def test_demo_refuses_lens_types_on_a_conventional_preset(ros, tmp_path, capsys):
    rc = main(['demo', '--preset', 'lytro', '--lens-types', '3', '-o', str(tmp_path / 'd')]
              + ros)
    assert rc == 1
    assert ('--lens-types 3: a conventional camera (preset lytro) has one micro-lens type'
            in capsys.readouterr().err)
    assert not (tmp_path / 'd').exists()


def _rows(text, pattern):
    """{parameter: (truth, error %)} of the table lines matching ``pattern``."""
    return {m.group('name'): (float(m.group('truth')), float(m.group('err')))
            for m in re.finditer(pattern, text, flags=re.MULTILINE)}


def test_demo_report_compares_with_the_truth_in_the_demos_frame(tmp_path, capsys):
    # the smallest demo that calibrates (a 0.3 crop, 5 poses: 5 s); its report's summary.txt
    # and its printed table compare the same calibration with the same truth. Before, the
    # report's truth stayed in the simulator's frame (sensor read out turned by 180 degrees):
    # k_i, k_u, u_0 ... 199-202 % off where the demo said 0.2-1.9 %
    assert main(['demo', '--scale', '0.3', '--poses', '5', '-o', str(tmp_path)]) == 0
    printed = _rows(capsys.readouterr().out,
                    r'^\s+(?P<name>k_[ijuv1-4]|[uv]_0)\s+\S+\s+\S+\s+(?P<truth>\S+)\s+'
                    r'(?P<err>[0-9.]+) %$')
    report = _rows((tmp_path / 'report' / 'summary.txt').read_text(),
                   r'^(?P<name>k_[ijuv1-4]|[uv]_0)\s+\S+\s+\S+(?:\s+at 0)?\s+(?P<truth>\S+)\s+'
                   r'(?P<err>[0-9.]+)%$')
    names = ('k_i', 'k_j', 'k_u', 'k_v', 'u_0', 'v_0', 'k_3', 'k_4')
    assert set(names) <= set(printed) and set(names) <= set(report), (printed, report)
    for name in names:
        (t_demo, e_demo), (t_report, e_report) = printed[name], report[name]
        assert t_report == pytest.approx(t_demo, rel=1e-6), name       # same sign, same value
        assert e_report == pytest.approx(e_demo, abs=6e-4), name       # 3 and 4 decimals
        assert e_report < 5.0, f'{name} {e_report} %: the truth in another frame'
