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


# ---- helpers shared by the nodes (rclpy imported only when called) ------------------------
def latched_qos(depth=1):
    """Reliable, transient-local QoS: late subscribers get the last message(s)."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    return QoSProfile(depth=depth, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                      reliability=ReliabilityPolicy.RELIABLE)


def declare_parameters(node, specs):
    """
    Declare ``specs`` on ``node`` with descriptors and check their values; returns {name: value}.

    specs: iterable of (name, default, description, check) where check(value) returns an
    error text for a bad value (or None / '' when fine), or is None. A bad value raises
    InvalidInputError naming the parameter, its value and what was expected.
    """
    from rcl_interfaces.msg import ParameterDescriptor
    from lf_mpc_calib.errors import InvalidInputError
    values = {}
    for name, default, description, check in specs:
        value = node.declare_parameter(
            name, default, ParameterDescriptor(description=description)).value
        problem = check(value) if check is not None else None
        if problem:
            raise InvalidInputError(f'parameter {name!r} = {value!r}: {problem}')
        values[name] = value
    return values


def positive(value):
    """Check for :func:`declare_parameters`: a number > 0."""
    return None if value > 0 else 'expected a value > 0'


def at_least(low):
    """Check for :func:`declare_parameters`: a number >= ``low``."""
    return lambda value: None if value >= low else f'expected a value >= {low}'


def one_of(*choices):
    """Check for :func:`declare_parameters`: one of ``choices``."""
    return lambda value: None if value in choices else f'expected one of {choices}'


def run_node(node_factory, args=None):
    """
    ``main()`` of a node: init, spin under a MultiThreadedExecutor, clean up.

    A node whose construction raises (bad parameter ...) logs the error and exits with 1.
    Returns the exit code.
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
    rclpy.init(args=args)
    node = None
    code = 0
    try:
        node = node_factory()
        executor = MultiThreadedExecutor()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception as exc:  # noqa: B902 - startup errors end the process with a message
        rclpy.logging.get_logger('lf_mpc_calib').fatal(f'{type(exc).__name__}: {exc}')
        code = 1
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return code
