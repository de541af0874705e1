"""
Light-field camera calibration with the multi-projection-center (MPC) model.

The core (everything outside ``lf_mpc_calib.ros``) is pure numpy / scipy / opencv and never
imports ROS. Start with :class:`lf_mpc_calib.model.MPCModel` and
:func:`lf_mpc_calib.calibration.calibrate`.
"""

__version__ = '0.1.0'
