"""
One BLAS thread per process for the ``lf-mpc-calib`` command and the nodes.

Their matrix work is small (normal equations of 16-100 unknowns, fits of a few thousand rows),
where OpenBLAS's threads cost more than they give: on a 2-core machine a 6000 x 21 lstsq took
7.7 ms with its default threads against 0.97 ms on one, and calibrate-raw of a full-size
Lytro data set 10.1 s against 7.8 s wall. OpenCV keeps its own threads (remaps, resizes).

:func:`prefer_one_blas_thread` sets OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS
to 1 where the environment does not set them, before NumPy is loaded (it has no effect after);
set them yourself to choose otherwise. The command's and the nodes' packages
(``lf_mpc_calib.cli``, ``lf_mpc_calib.ros``) call it when imported; the rest of the library
does not.
"""

import os
import sys

VARIABLES = ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS')


def prefer_one_blas_thread():
    """Default the BLAS thread counts to 1 (unset variables only); True when NumPy was not
    loaded yet, so that the setting takes effect."""
    for name in VARIABLES:
        os.environ.setdefault(name, '1')
    return 'numpy' not in sys.modules
