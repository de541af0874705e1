"""lf-mpc-calib demo with a focused preset: the focused pipeline end to end, honest about what
a half-size sensor leaves undetermined."""

import pytest

from lf_mpc_calib.cli import main
from lf_mpc_calib.io.calibration_file import load_calibration

pytestmark = pytest.mark.cost(25)   # s on the CI machine: scheduled early (conftest)


def test_demo_focused_multifocus(tmp_path, capsys):
    rc = main(['demo', '--preset', 'focused-multifocus', '--scale', '0.5', '--poses', '6',
               '-o', str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.count('micro-images (median)') >= 5       # poses away from the conjugate plane
    assert 'corners measured in 3-D' in out
    cal = load_calibration(tmp_path / 'calibration.yaml')
    assert cal.camera_type == 'focused' and len(cal.lens_types['type_of_class']) == 6
    # the types are told from the frames (not the simulator's): measured 100 % right
    assert 'lens types (inferred): 100.0 % of' in out
