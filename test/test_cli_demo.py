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
    (['demo', '--ros', '--live', '0'], '--live expects seconds > 0'),
    (['demo', '--ros', '--live', 'nan'], '--live expects seconds > 0'),
    (['demo', '--ros', '--live', '1e9'], 'at most 3600'),
])
def test_demo_live_refuses_without_ros_or_seconds(argv, expected, capsys):
    assert main(argv) == 2
    assert expected in capsys.readouterr().err
