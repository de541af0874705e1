"""
Calibration of the MPC model: the closed form and the sparse least-squares refinement.

:func:`calibrate` runs both; :func:`closed_form` and :func:`refine` are the two steps and
:class:`CalibrationResult` holds the outcome.
"""

from lf_mpc_calib.calibration.closed_form import closed_form, InitialSolution
from lf_mpc_calib.calibration.refine import calibrate, refine
from lf_mpc_calib.calibration.result import CalibrationResult

__all__ = ['calibrate', 'CalibrationResult', 'closed_form', 'InitialSolution', 'refine']
