"""The command and the nodes default to one BLAS thread (lf_mpc_calib.blas_threads), before
NumPy loads, and leave a thread count the environment gives alone."""

import os
import subprocess
import sys

import pytest

from lf_mpc_calib.blas_threads import VARIABLES

PROBE = ('import os, sys, {module}; '
         'print(",".join(os.environ.get(v, "-") for v in {variables!r})); '
         'import numpy; print("numpy" in sys.modules)')


def _probe(module, **env):
    clean = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    clean.update(env)
    out = subprocess.run([sys.executable, '-c', PROBE.format(module=module, variables=VARIABLES)],
                         env=clean, capture_output=True, text=True, check=True).stdout.split()
    return out[0].split(',')


@pytest.mark.parametrize('module', ['lf_mpc_calib.cli', 'lf_mpc_calib.ros.decode_node'])
def test_one_blas_thread_by_default(module):
    if module.startswith('lf_mpc_calib.ros'):
        pytest.importorskip('rclpy')
    assert _probe(module) == ['1', '1', '1']


def test_the_environment_keeps_its_thread_count():
    assert _probe('lf_mpc_calib.cli', OPENBLAS_NUM_THREADS='3') == ['3', '1', '1']


def test_the_rest_of_the_library_leaves_the_environment_alone():
    assert _probe('lf_mpc_calib.calibration') == ['-', '-', '-']
