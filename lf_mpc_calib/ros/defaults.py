"""
Shared defaults of the nodes, so that the three started plainly in one namespace agree.

The simulated camera renders the ``SIM_PRESET`` camera cropped by ``SIM_SCALE`` and shows the
board of :func:`lf_mpc_calib.simulation.optics.default_board` for it; the calibration node
looks for that board (``BOARD_COLS`` x ``BOARD_ROWS`` inner corners, ``SQUARE_SIZE`` metres)
by default. test/ros/test_defaults checks the constants against the simulator. Topics are
relative (the nodes connect within one namespace); frame ids follow
:func:`lf_mpc_calib.io.calibration_file.default_frames` for ``CAMERA_NAME``.
"""

import sys

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


def camera_name_of(node, given):
    """
    The camera name of ``node``: ``given``, or for '' one from the node's namespace.

    The namespace with '_' for '/' (``cam1`` for /cam1, ``robot_cam1`` for /robot/cam1), and
    CAMERA_NAME at the root: two cameras in two namespaces left at the default get distinct
    frame ids (/tf_static is global), calibration files and session folders.
    """
    if given:
        return given
    namespace = node.get_namespace().strip('/')
    return namespace.replace('/', '_') if namespace else CAMERA_NAME


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


SERVICE_QUEUE = 1000
"""Requests a service holds while it answers one (the default 10 dropped the rest unanswered:
989 of 1000 ~/capture calls sent at once)."""


def service_qos():
    """The services' QoS: the ROS default with SERVICE_QUEUE requests kept, not 10."""
    from rclpy.qos import qos_profile_services_default, QoSProfile
    return QoSProfile(depth=SERVICE_QUEUE, history=qos_profile_services_default.history,
                      reliability=qos_profile_services_default.reliability,
                      durability=qos_profile_services_default.durability)


def image_qos(reliability='best_effort'):
    """
    QoS of the nodes' image_raw subscriptions: the sensor-data profile with depth 1.

    Only the newest frame waits. 'best_effort' matches any publisher; 'reliable' only reliable
    ones, but gets large frames across processes where the publisher runs with Fast DDS's
    default 512 KB shared-memory segment (it loses most best-effort samples of a few MB
    there: measured 4 of 60 one-megapixel frames); with the nodes' large-frame profile on
    the publisher both get them all (:mod:`lf_mpc_calib.ros.transport`).
    """
    from rclpy.qos import qos_profile_sensor_data, QoSProfile, ReliabilityPolicy
    qos = QoSProfile(depth=1, history=qos_profile_sensor_data.history,
                     durability=qos_profile_sensor_data.durability,
                     reliability=ReliabilityPolicy.RELIABLE if reliability == 'reliable'
                     else qos_profile_sensor_data.reliability)
    return qos


def declare_parameters(node, specs):
    """
    Declare ``specs`` on ``node`` with descriptors and check their values; returns {name: value}.

    specs: iterable of (name, default, description, check) where check(value) returns an
    error text for a bad value (or None / '' when fine), or is None. Checks made by
    :func:`positive`, :func:`at_least` and :func:`between` also put their range into the
    descriptor (integer or floating-point range, as the default's type), where ``ros2 param
    describe`` and rqt show it. Parameters are read once at startup, so they are declared
    read-only. A value of the wrong type is replaced by the default (the node stays up); a bad
    value of the right type (out of range, not a choice) raises InvalidInputError naming the
    parameter, its value and what was expected. ``node.parameter_problems`` then lists, one
    text each, the wrong types, the parameters given that the node does not declare and the
    parameters file sections that do not apply to it (logged as warnings here).
    """
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
    from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
    from lf_mpc_calib.errors import InvalidInputError
    values, wrong_types = {}, []
    for name, default, description, check in specs:
        descriptor = ParameterDescriptor(description=description, read_only=True)
        bounds = getattr(check, 'bounds', None)
        if bounds is not None and isinstance(default, bool):
            bounds = None
        if bounds is not None and isinstance(default, int):
            low, high = bounds
            descriptor.integer_range = [IntegerRange(
                from_value=int(low) if low is not None else -2 ** 63,
                to_value=int(high) if high is not None else 2 ** 63 - 1, step=0)]
        elif bounds is not None and isinstance(default, float):
            low, high = bounds
            descriptor.floating_point_range = [FloatingPointRange(
                from_value=float(low) if low is not None else -sys.float_info.max,
                to_value=float(high) if high is not None else sys.float_info.max, step=0.0)]
        try:
            value = node.declare_parameter(name, default, descriptor).value
        except InvalidParameterTypeException as exc:    # the node stays up and says so
            value = node.declare_parameter(name, default, descriptor,
                                           ignore_override=True).value
            given = getattr((getattr(node, '_parameter_overrides', {}) or {}).get(name),
                            'value', exc)
            wrong_types.append(
                f'parameter {name!r}: expected a {type(default).__name__} like the default '
                f'{default!r}, got {given!r} ({type(given).__name__}); running with the '
                'default')
        except InvalidParameterValueException as exc:
            low, high = bounds if bounds is not None else (None, None)
            low = '-inf' if low is None else low
            high = 'inf' if high is None else high
            raise InvalidInputError(
                f'parameter {name!r} out of its range [{low}, {high}]: {exc}') from exc
        problem = check(value) if check is not None else None
        if problem:
            raise InvalidInputError(f'parameter {name!r} = {value!r}: {problem}')
        values[name] = value
    node.parameter_problems = (wrong_types + undeclared_parameters(node, values)
                               + unmatched_params_file_sections(node, sys.argv))
    for problem in node.parameter_problems:
        node.get_logger().warning(problem)
    return values


ROS_PARAMETERS = ('use_sim_time', 'start_type_description_service', 'qos_overrides')
"""Parameters rclpy declares (or reads) itself: never reported as unknown."""


def undeclared_parameters(node, declared):
    """
    Parameters given to ``node`` (a parameters file, ``-p``, parameter_overrides) that it does
    not declare, as one problem text each: rclpy ignores them silently, and a misspelt or
    misplaced name would leave the node on its defaults without a word. ``declared``: the
    names the node declares.
    """
    given = getattr(node, '_parameter_overrides', {}) or {}
    unknown = sorted(n for n in given if n not in declared
                     and not any(n == r or n.startswith(r + '.') for r in ROS_PARAMETERS))
    return [f'parameter {n!r} was given but {node.get_fully_qualified_name()} has no such '
            f'parameter (ignored); its parameters: {", ".join(sorted(declared))}'
            for n in unknown]


def _section_matches(key, fqn):
    """Whether a parameters file's top-level ``key`` applies to the node named ``fqn`` (rcl's
    rules: a bare name is in the root namespace; ``/**`` any namespaces, ``*`` one token)."""
    import re
    key = key if key.startswith('/') else '/' + key
    pattern = ''.join('(/[^/]+)*' if tok == '/**' else re.escape(tok).replace(r'\*', '[^/]+')
                      for tok in re.split(r'(/\*\*)', key) if tok)
    return re.fullmatch(pattern, fqn) is not None


def unmatched_params_file_sections(node, argv):
    """
    Sections of the ``--params-file`` files in ``argv`` that name this node but do not apply
    to it, one problem text each: rcl drops them silently, e.g. a bare ``lf_calibration:``
    key (only ``/lf_calibration``) for a node started in a namespace.
    """
    import yaml
    files, ros_args = [], False
    for k, arg in enumerate(argv):
        ros_args = ros_args or arg == '--ros-args'
        if ros_args and arg == '--params-file' and k + 1 < len(argv):
            files.append(argv[k + 1])
    fqn, name = node.get_fully_qualified_name(), node.get_name()
    problems = []
    for path in files:
        try:
            with open(path) as f:
                doc = yaml.safe_load(f)
        except (OSError, yaml.YAMLError):
            continue                    # rcl itself refuses an unreadable file
        for key in (doc if isinstance(doc, dict) else {}):
            if str(key).rstrip('/').split('/')[-1] == name and not _section_matches(
                    str(key), fqn):
                problems.append(
                    f'parameters file {path}: section {key!r} does not apply to {fqn} (its '
                    f'values are ignored); key it "/**/{name}" for any namespace')
    return problems


def _with_bounds(check, low, high):
    check.bounds = (low, high)
    return check


def positive(value):
    """Check for :func:`declare_parameters`: a number > 0."""
    return None if value > 0 else 'expected a value > 0'


positive.bounds = (0, None)


def at_least(low):
    """Check for :func:`declare_parameters`: a number >= ``low``."""
    return _with_bounds(lambda value: None if value >= low else f'expected a value >= {low}',
                        low, None)


def between(low, high):
    """Check for :func:`declare_parameters`: a number in [``low``, ``high``]."""
    return _with_bounds(
        lambda value: None if low <= value <= high else f'expected {low} <= value <= {high}',
        low, high)


def positive_at_most(high):
    """Check for :func:`declare_parameters`: a number in (0, ``high``] (a timeout, a rate:
    1e308 s would overflow the waits that take it)."""
    return _with_bounds(
        lambda value: None if 0 < value <= high else f'expected 0 < value <= {high}',
        0, high)


MAX_WAIT_S = 3600.0
"""Longest timeout a node parameter may set (seconds)."""


def one_of(*choices):
    """Check for :func:`declare_parameters`: one of ``choices``."""
    return lambda value: None if value in choices else f'expected one of {choices}'


SHUTDOWN_GRACE_S = 1.0
"""Seconds a node's callbacks still running at SIGINT / SIGTERM (a calibration, a save) get
before the process exits without them; a save writes into a hidden ``.partial`` folder that
becomes final only once complete, so an interrupted one leaves no half-written result."""


class _StopRequested(KeyboardInterrupt):
    """Raised in the main thread by SIGINT / SIGTERM while a node is being built."""


def run_node(node_factory, args=None):
    """
    ``main()`` of a node: init, spin under a MultiThreadedExecutor, clean up.

    Fast DDS gets the large-frame profile first, unless the user chose transports
    (:func:`lf_mpc_calib.ros.transport.use_large_frame_transport`).

    SIGINT and SIGTERM (``docker stop``, systemd) end the node the same way, in any state: while
    it is built (rendering, loading) the construction is interrupted; while it spins, the spin
    loop ends within 0.1 s, the node's ``stop_waiting()`` (when it has one) ends the waits of
    its callbacks (a ~/capture waiting for a frame answers at once), and callbacks still running
    get SHUTDOWN_GRACE_S, then the process exits without waiting for them. Exit code 0, and no
    error from the ROS context going away under a callback. A node whose construction raises
    (bad parameter ...) logs the error at FATAL under the node's name and exits with 1. Returns
    the exit code (or leaves the process with it when callbacks are still running).
    """
    import signal
    import threading

    import rclpy
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    stop = threading.Event()
    building = [True]

    def on_signal(signum, frame):
        stop.set()
        if building[0]:
            raise _StopRequested()

    def quiet_stop(unraisable):
        # a stop raised inside a finaliser (e.g. importlib's module-lock callback) cannot leave
        # it and Python prints it as ignored; the stop flag ends the node after its build
        if not isinstance(unraisable.exc_value, _StopRequested):
            unraisable_before(unraisable)

    from lf_mpc_calib.ros.transport import use_large_frame_transport
    use_large_frame_transport()     # camera-size frames between processes (transport.py)
    # (before the handlers: a stop raised during that import was left uncaught, exit code 1)
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    unraisable_before, sys.unraisablehook = sys.unraisablehook, quiet_stop
    node, executor, code = None, None, 0
    try:
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
        node = node_factory()
        building[0] = False
        executor = MultiThreadedExecutor()
        executor.add_node(node)
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception as exc:  # noqa: B902 - startup errors end the process with a message
        if not stop.is_set():
            _log_fatal(node_factory, exc)
            code = 1
    finally:
        building[0] = False
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sys.unraisablehook = unraisable_before
    return _stop_node(node, executor, code)


def _log_fatal(node_factory, exc):
    """Log a node's startup error at FATAL under the name the node would have had (its
    ``NODE_NAME`` with the process's remappings, e.g. ``cam1.lf_calibration`` under launch)."""
    import rclpy
    text = f'{type(exc).__name__}: {exc}'
    name = getattr(node_factory, 'NODE_NAME', None)
    if name and rclpy.ok():
        try:
            stand_in = rclpy.create_node(name, enable_rosout=True)
        except Exception:  # noqa: B902 - the node's own setup failed; say it anyway
            stand_in = None
        if stand_in is not None:
            stand_in.get_logger().fatal(text)
            stand_in.destroy_node()
            return
    rclpy.logging.get_logger(name or 'lf_mpc_calib').fatal(text)


def _stop_node(node, executor, code):
    """
    End a node after its spin loop; returns ``code`` (or exits with it).

    Its waits ended, the callbacks in flight given SHUTDOWN_GRACE_S, then executor, node and
    context shut down, in that order.

    The callbacks must be over before ``executor.shutdown`` (it destroys the executor's guard
    condition a callback triggers when it ends) and before ``destroy_node`` (a callback answering
    then raises "cannot use Destroyable because destruction was requested", which rclpy prints
    as an exception never retrieved). When some are still running after the grace (a
    calibration), the process exits at once with ``code`` instead.
    """
    import os

    import rclpy
    if node is not None and callable(getattr(node, 'stop_waiting', None)):
        node.stop_waiting()
    if executor is not None and not _callbacks_ended(executor, SHUTDOWN_GRACE_S):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)      # a callback still running (a calibration): do not wait for it
    if executor is not None:
        executor.shutdown(timeout_sec=0.0)
    if node is not None:
        try:
            node.destroy_node()
        except Exception:  # noqa: B902 - the context may already be gone
            pass
    rclpy.try_shutdown()
    if not _threads_ended(SHUTDOWN_GRACE_S):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)      # a thread of the node's own still running: do not wait for it
    return code


def _threads_ended(timeout_s):
    """Join the process's other non-daemon threads for up to ``timeout_s``; whether they
    ended."""
    import threading
    import time
    deadline = time.monotonic() + timeout_s
    others = [t for t in threading.enumerate()
              if t is not threading.main_thread() and not t.daemon]
    for thread in others:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in others)


def _callbacks_ended(executor, timeout_s):
    """Wait up to ``timeout_s`` for the callbacks ``executor`` (a MultiThreadedExecutor)
    started to end; whether they did. Their exceptions are marked as seen (the guards already
    logged what a callback raised)."""
    import time
    deadline = time.monotonic() + timeout_s
    tasks = list(getattr(executor, '_futures', ()))    # the callbacks handed to its threads
    while any(not t.done() for t in tasks) and time.monotonic() < deadline:
        time.sleep(0.01)
    for task in tasks:
        if task.done():
            task.exception()
    return all(t.done() for t in tasks)


def odd_views(value):
    """Check of a (n_i, n_j) view count: two odd counts >= 1."""
    v = list(value)
    if len(v) != 2 or any(int(x) < 1 or int(x) % 2 == 0 for x in v):
        return 'expected two odd counts >= 1 (n_i, n_j)'
    return None


BOARD_PARAMETERS = [
    ('board_cols', BOARD_COLS, 'inner corners along the board rows', at_least(2)),
    ('board_rows', BOARD_ROWS, 'inner corners along the board columns', at_least(2)),
    ('square_size', SQUARE_SIZE, 'board square side in metres', positive),
]
"""Parameter specs (:func:`declare_parameters`) of the checkerboard, shared by the nodes."""

MIN_CORNERS = 6
"""Fewest ChArUco corners a partial view counts with (calibrate-raw --min-corners)."""

CHARUCO_PARAMETERS = [
    ('board_type', 'checkerboard', 'checkerboard (seen whole), or charuco: ArUco markers in '
     'the white squares name every corner, so a board partly out of view counts '
     '(calibrate-raw --board-type)', one_of('checkerboard', 'charuco')),
    ('dictionary', 'DICT_4X4_250', "charuco: the markers' predefined ArUco dictionary "
     '(--dictionary)', lambda v: None if v.startswith('DICT_') else
     'expected a predefined ArUco dictionary name such as DICT_4X4_250'),
    ('marker_size', 0.0, 'charuco: marker side in metres; 0: 0.75 square_size (--marker)',
     at_least(0.0)),
    ('charuco_layout', 'opencv', 'charuco: opencv (the squares of OpenCV >= 4.7) or legacy '
     '(boards made before 4.6, CharucoBoard.setLegacyPattern) (--charuco-layout)',
     one_of('opencv', 'legacy')),
]
"""Parameter specs of the board type (ChArUco's dictionary, marker, layout), shared by the
nodes under the CLI options' names and meanings."""

MIN_CORNERS_PARAMETER = (
    'min_corners', MIN_CORNERS, 'charuco: fewest corners a partial view counts with, on two '
    'rows and two columns (--min-corners)', at_least(4))


def board_of(p, board_class=None, charuco_class=None):
    """
    The board of the parameters ``p`` (board_cols, board_rows, square_size and the
    CHARUCO_PARAMETERS): a ``board_class`` (default camera.board.Checkerboard), or with
    ``board_type`` charuco a ``charuco_class`` (default camera.board.CharucoBoard). Raises
    InvalidInputError naming the parameters for a checkerboard OpenCV cannot find (fewer than
    3 inner corners a side) and for a dictionary or marker that does not fit.
    """
    from lf_mpc_calib.camera import board as B
    from lf_mpc_calib.errors import InvalidInputError
    from lf_mpc_calib.features.corners import check_detectable
    board = (board_class or B.Checkerboard)(p['board_cols'], p['board_rows'], p['square_size'])
    if p['board_type'] != 'charuco':
        check_detectable(board, "parameters 'board_cols' x 'board_rows'")
        return board
    try:
        return (charuco_class or B.CharucoBoard)(
            board.cols, board.rows, board.square, dictionary=p['dictionary'],
            marker=p['marker_size'] or None, layout=p['charuco_layout'])
    except InvalidInputError as exc:
        raise InvalidInputError(f"parameters 'dictionary' = {p['dictionary']!r}, "
                                f"'marker_size' = {p['marker_size']!r}: {exc}") from None


def describe_board(board):
    """'9x6 x 6.39 mm checkerboard' or '9x6 x 6.39 mm ChArUco DICT_4X4_250 (marker 4.80
    mm, opencv layout)': the board in a log line."""
    text = f'{board.cols}x{board.rows} x {board.square * 1e3:.2f} mm'
    if getattr(board, 'board_type', 'checkerboard') != 'charuco':
        return text + ' checkerboard'
    return (f'{text} ChArUco {board.dictionary} (marker {board.marker * 1e3:.2f} mm, '
            f'{board.layout} layout)')


RAW_INPUT_PARAMETERS = [
    ('white_image_file', '', 'white image file (PNG/TIFF); empty: the white_image topic', None),
    ('dark_image_file', '', 'dark frame file (PNG/TIFF, same size and bit depth, no light), '
     'subtracted from the white and every frame first; empty: none', None),
    ('views', list(VIEWS), 'sub-aperture views decoded (n_i, n_j), odd', odd_views),
    ('max_image_pixels', MAX_IMAGE_PIXELS, 'largest accepted width * height', at_least(1)),
    ('image_reliability', 'best_effort', 'QoS of image_raw: best_effort (sensor data, matches '
     'any publisher) or reliable (large frames between processes: best-effort samples lose '
     'fragments)', one_of('best_effort', 'reliable')),
]
"""Parameter specs of the raw-frame input (white image, views, image QoS) of both nodes."""
