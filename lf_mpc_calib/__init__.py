"""
Light-field camera calibration with the multi-projection-center (MPC) model.

The package reads as the data flow (see README, "Layout"): ``io`` (images, rosbag2, observation
tables, the R12 table, calibration files) -> ``lenslet`` (white image -> grid -> views) ->
``features`` (corners) -> ``calibration`` (closed form + refinement) -> ``measurement`` (live
3-D); ``pipeline`` orchestrates them offline and in a capture session; ``camera`` holds the
model and the board every stage shares; ``simulation`` renders cameras with ground truth;
``report`` writes summaries and plots. Everything outside ``lf_mpc_calib.ros`` is pure numpy /
scipy / opencv and never imports ROS.

The names most users need are importable from here (loaded on first use, so that importing
the package stays cheap)::

    from lf_mpc_calib import MPCModel, calibrate, read_observations, save_calibration
"""

import importlib

__version__ = '0.1.0'

_PUBLIC = {
    'MPCModel': 'lf_mpc_calib.camera.model',
    'Checkerboard': 'lf_mpc_calib.camera.board',
    'Observations': 'lf_mpc_calib.camera.observations',
    'calibrate': 'lf_mpc_calib.calibration',
    'closed_form': 'lf_mpc_calib.calibration',
    'refine': 'lf_mpc_calib.calibration',
    'CalibrationResult': 'lf_mpc_calib.calibration',
    'read_observations': 'lf_mpc_calib.io.observation_table',
    'write_observations': 'lf_mpc_calib.io.observation_table',
    'CalibrationFile': 'lf_mpc_calib.io.calibration_file',
    'load_calibration': 'lf_mpc_calib.io.calibration_file',
    'save_calibration': 'lf_mpc_calib.io.calibration_file',
    'read_image': 'lf_mpc_calib.io.images',
    'LensletGrid': 'lf_mpc_calib.lenslet.grid',
    'estimate_grid': 'lf_mpc_calib.lenslet.estimate',
    'Decoder': 'lf_mpc_calib.lenslet.decode',
    'detect_corners': 'lf_mpc_calib.features.corners',
    'detect_board_corners': 'lf_mpc_calib.features.board_detection',
    'load_raw_dataset': 'lf_mpc_calib.pipeline.offline',
    'calibrate_raw': 'lf_mpc_calib.pipeline.offline',
    'CalibrationSession': 'lf_mpc_calib.pipeline.session',
    'LiveMeasurer': 'lf_mpc_calib.measurement.live',
}

__all__ = ['__version__', *_PUBLIC]


def __getattr__(name):
    """Import a public name's module on first use (PEP 562)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))
