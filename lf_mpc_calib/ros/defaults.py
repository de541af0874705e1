"""
Shared defaults of the nodes, so that the three started plainly in one namespace agree.

The simulated camera renders the ``SIM_PRESET`` camera cropped by ``SIM_SCALE`` and shows the
board of :func:`lf_mpc_calib.simulation.optics.default_board` for it; the calibration node
looks for that board (``BOARD_COLS`` x ``BOARD_ROWS`` inner corners, ``SQUARE_SIZE`` metres)
by default. test/ros/test_defaults checks the constants against the simulator. Topics are
relative (the nodes connect within one namespace); frame ids follow
:func:`lf_mpc_calib.calibration_file.default_frames` for ``CAMERA_NAME``.
"""

SIM_PRESET = 'lytro'
"""Simulated camera preset (renders a frame in about 1 s at ``SIM_SCALE``)."""

SIM_SCALE = 0.5
"""Sensor crop of the simulated camera (1640 x 1640 px, about 166 x 191 micro-images)."""

CAMERA_TYPE = 'conventional'
BOARD_COLS = 9
BOARD_ROWS = 6
SQUARE_SIZE = 0.006394373862701905
"""default_board(preset(SIM_PRESET, scale=SIM_SCALE)): 9 x 6 inner corners, 6.39 mm squares."""

VIEWS = (9, 9)
"""Sub-aperture views decoded (n_i, n_j); corners come from the clean ones among them."""

MIN_POSES = 3
CAMERA_NAME = 'lf_camera'
IMAGE_TOPIC = 'image_raw'
WHITE_TOPIC = 'white_image'
MAX_IMAGE_PIXELS = 100_000_000


def optical_frame(camera_name=CAMERA_NAME):
    """The optical frame id of ``camera_name``: <camera>_optical_frame."""
    return f'{camera_name}_optical_frame'


def board_frame(camera_name, index):
    """The frame id of captured board pose ``index``: <camera>_board_<index>."""
    return f'{camera_name}_board_{int(index)}'


def default_output_dir():
    """``$ROS_HOME/lf_mpc_calib``, else ``~/.ros/lf_mpc_calib``."""
    import os
    from pathlib import Path
    home = os.environ.get('ROS_HOME')
    base = Path(home) if home else Path.home() / '.ros'
    return str(base / 'lf_mpc_calib')
