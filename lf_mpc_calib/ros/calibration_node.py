"""
``lf_calibration``: calibrate a light-field camera from its raw frames, pose by pose.

A thin adapter over :class:`lf_mpc_calib.pipeline.session.CalibrationSession`.

Subscribes ``image_raw`` (sensor data QoS, or reliable with ``image_reliability``; depth 1;
mono8/16, bayer_*8/16, rgb8, bgr8 with any ``step`` padding) and ``white_image`` (latched; unless
``white_image_file`` is set). Services (std_srvs/Trigger; answers carry counts and reasons):

- ``~/capture``: takes the next frame arriving after the call (waits up to
  ``capture_timeout`` s without blocking the other callbacks), decodes it and detects the
  board; answers corners found per view or why the frame was rejected, and what the poses
  so far determine and which pose to add (capture guidance, also on ``~/status``).
- ``~/calibrate``: calibrates the captured poses (its own callback group); answers the RMS
  errors and publishes the latched outputs. With ``lens_types`` T > 1 (a multi-focus focused
  camera) it first tells the type of every micro-image from all captures (refused with the
  figures when the types cannot be told apart: capture more poses over the depth range, or
  calibrate with 1) and estimates the per-type terms jointly; the answer gives them with their
  sigmas, the calibration file the terms and the type rule the decode node applies.
- ``~/save``: writes a new folder ``output_dir/<camera_name>_<date-time>`` (linked as
  ``output_dir/latest``) with ``<camera_name>.yaml``, the observation table, the captured
  frames and their pictures (``detections_NNN.png``), the white image and a manifest with
  their checksums, atomically (``lf-mpc-calib calibrate-raw output_dir`` re-calibrates the
  latest offline).
- ``~/reset``: forgets the captures and the calibration, and moves the stored captures to
  ``<session folder>_before_reset_<date-time>`` (never deletes them).
- ``~/verify``: after a calibration, holds the next captures out of it (they never join the
  poses); called again, measures them with it (:mod:`lf_mpc_calib.pipeline.held_out`) and
  answers the figures and the verdict (success: it passes), also under ``verification`` on
  ``~/status``; ``~/save`` then writes ``verification.yaml`` in the saved folder.

The board: ``board_cols`` x ``board_rows`` inner corners ``square_size`` m apart, and
``board_type`` checkerboard (seen whole) or charuco (``dictionary``, ``marker_size``,
``charuco_layout``, ``min_corners``: calibrate-raw's --board-type, --dictionary, --marker,
--charuco-layout, --min-corners). A ChArUco board's corners are named by its markers, so a
pose partly out of view counts with the ``min_corners`` (default 6) or more it shows on two
rows and two columns. A frame with markers of another board (another dictionary, size or
layout, a mirrored board, two boards in view), or a ChArUco board shown to a checkerboard
configuration, is refused with the reason (ids seen, dictionary expected) and changes nothing.

Each accepted capture is written to the session folder (``session_dir``, default
``output_dir/<camera_name>_session``) as it is taken (frame, rays, robot pose;
:mod:`lf_mpc_calib.pipeline.session_recorder`); a node started again on that folder detects the
stored captures again and goes on with them (``session`` on ``~/status``: ``captures found: N
(resumed)``, skipped captures named); hidden ``.partial`` leftovers of captures and saves cut
off are removed at start, one log line each. A write that fails keeps the capture in memory and
says so in the answer and on ``~/status`` (``write_error``).

``~/suggest`` (Trigger) and the latched ``~/suggested_pose`` (geometry_msgs/PoseStamped in the
optical frame): the next board pose that most reduces the predicted uncertainty of k_i..k_v
and the principal point, planned with the calibration or, before one, ``nominal_model_file``
(:mod:`lf_mpc_calib.ros.suggestions`; conventional and focused cameras).

``~/detections`` (sensor_msgs/Image rgb8, only while subscribed, ``detections_rate`` Hz): the
central view (focused: the rendered image) with the board's corners coloured by quality, the
captured poses' outlines and the guidance in words; each capture's picture is kept and saved
(:mod:`lf_mpc_calib.ros.detections_publisher`).

``~/status`` (std_msgs/String, latched): after each accepted capture and each calibration,
JSON of :meth:`lf_mpc_calib.calibration.guidance.CaptureGuidance.to_dict` plus ``summary``
(one line) and, after a calibration, ``flags`` (figures whose 3 sigma exceed the 1 % / 0.5 px
aimed at, or whose sigma does: :mod:`lf_mpc_calib.calibration.determination`), ``accepted``
and ``acceptance`` (the verdict of :mod:`lf_mpc_calib.calibration.acceptance`, the rule
calibrate-raw refuses by: accepted, refusals, warnings). A calibration the rule does not accept
is still published and kept; the ``~/calibrate`` reply says "NOT accepted" with the reasons,
and ``~/save`` writes the verdict into the folder's manifest (key ``acceptance``).

Latched outputs after a calibration: ``~/camera_info`` (CameraInfo of the rectified central
view), ``~/calibration`` (std_msgs/String, the calibration file) and ``/tf_static`` (every
captured board pose as ``<camera_name>_board_<n>`` in ``optical_frame``, all in each message).
On a robot arm (``base_frame`` and ``tool_frame`` set; ``hand_eye_setup`` eye-in-hand or
eye-to-hand): each ``~/capture`` looks up base -> tool at the frame's stamp through TF
(:mod:`lf_mpc_calib.ros.robot_pose`: tf2_ros, else the package's own listener) and refuses the
frame with the reason when the transform is missing, ``tf_max_age`` s from the frame or changes
within ``tf_motion_window`` s of it (the arm moving); the reply and ``~/status`` (key
``hand_eye``) say whether the arm motions so far determine the mount and what to add.
``~/calibrate`` then solves the hand-eye calibration too
(:mod:`lf_mpc_calib.calibration.hand_eye`), refining the intrinsics jointly with the mount: the
published ``~/camera_info``, ``~/calibration`` and board poses are that joint calibration's (the
mount refers to its optical frame; the reply says how far it moved from the camera-only one),
the calibration file gets the mount (``hand_eye``) and ``/tf_static`` the mount (tool ->
optical eye-in-hand, base -> optical eye-to-hand); when the hand-eye cannot be solved the
camera-only calibration is published and the reply says why;
``~/save`` writes the robot poses into the manifest (``calibrate-raw`` solves them again).

Malformed images are logged (WARN) and ignored; an exception in any service or callback is
answered (success false, with the reason) or logged, and never ends the node or its session
(:mod:`lf_mpc_calib.ros.guard`). A parameter out of range stops the node at startup with its
name.
"""

import threading
import time

import numpy as np

from lf_mpc_calib.errors import LFCalibError
from lf_mpc_calib.ros import defaults as D
from lf_mpc_calib.ros.guard import guarded_callback, guarded_service

try:
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from rclpy.node import Node
except ImportError:  # pragma: no cover - importable without ROS for docs
    Node = object


class CalibrationNode(Node):
    """The calibration node (module docstring); kwargs go to ``rclpy.node.Node``."""

    NODE_NAME = 'lf_calibration'

    def __init__(self, **kwargs):
        self._stopping = False                  # stop_waiting() was called: no more waits
        super().__init__(self.NODE_NAME, **kwargs)
        try:
            self._setup()
        except Exception:
            self.destroy_node()
            raise

    # ---- setup --------------------------------------------------------------------------
    def _setup(self):
        """Parameters, session, publishers, inputs and services; then resume the session
        folder's captures."""
        from lf_mpc_calib.pipeline.held_out import HeldOutCaptures
        self.held_out = HeldOutCaptures()       # ~/verify's captures, never the session's
        p = self._declare_parameters()
        self._start_session(p)
        self._connect_arm(p)
        self._init_frames()
        self._create_publishers()
        self._watch_input(p)
        self._subscribe_inputs(p)
        self._create_services()
        self.get_logger().info(
            f'board {D.describe_board(self.session.board)}, views '
            f'{self.session.views}, white from '
            f'{p["white_image_file"] or D.WHITE_TOPIC}, output {p["output_dir"]}')
        self._start_recorder()
        if self.parameter_problems or self.recorder.found:  # on ~/status before a capture
            self._publish_status(self._status)

    def _declare_parameters(self):
        """Declare and check the node's parameters; returns {name: value} (also ``params``)."""
        from lf_mpc_calib.ros.suggestions import PARAMETERS as SUGGESTION_PARAMETERS
        p = D.declare_parameters(self, [
            ('camera_type', D.CAMERA_TYPE, 'camera type (conventional: micro-lenses focused '
             'at infinity, decoded into sub-aperture views; focused: plenoptic 2.0, corners '
             'found in the micro-images)', D.one_of('conventional', 'focused')),
            ('lens_types', 1, 'micro-lens types of a focused camera (1: one type; T > 1: a '
             'multi-focus camera, e.g. 3 for Raytrix; the type of each micro-image is told '
             'from all captures at ~/calibrate, refused with the figures when they cannot be)',
             D.at_least(1)),
            ('grid_file', '', 'lenslet grid YAML (lf-mpc-calib grid, or a calibration file); '
             'empty: estimated from the white image', None),
            ('min_poses', D.MIN_POSES, 'captured poses needed to calibrate', D.at_least(2)),
            ('output_dir', D.default_output_dir(), "where ~/save writes; '': "
             '$ROS_HOME/lf_mpc_calib (~/.ros/lf_mpc_calib)', None),
            ('session_dir', '', 'where each capture is written as it is taken, and resumed '
             "from at start; '': <output_dir>/<camera_name>_session", None),
            ('camera_name', '', "camera name: file name and frame ids; '': from the "
             f'namespace (cam1 in /cam1), {D.CAMERA_NAME} at the root',
             lambda v: None if '/' not in v else 'expected a name without /'),
            ('optical_frame', '', 'optical frame id; empty: <camera_name>_optical_frame',
             None),
            ('capture_timeout', 10.0, 'seconds ~/capture waits for the next frame',
             D.positive_at_most(D.MAX_WAIT_S)),
            ('base_frame', '', "robot base frame ('' with tool_frame '': no robot arm)", None),
            ('tool_frame', '', "robot tool (flange) frame ('': no robot arm)", None),
            ('hand_eye_setup', 'eye-in-hand', 'eye-in-hand (camera on the arm) or eye-to-hand '
             '(camera fixed, board in the gripper)', D.one_of('eye-in-hand', 'eye-to-hand')),
            ('tf_max_age', 0.1, 'seconds the base -> tool transform may be from the frame',
             D.positive_at_most(D.MAX_WAIT_S)),
            ('tf_motion_window', 0.2, 'seconds around the frame the arm must be at rest',
             D.between(0.0, D.MAX_WAIT_S)),
            ('tf_timeout', 0.5, 'seconds ~/capture waits for the transform at the frame',
             D.between(0.0, D.MAX_WAIT_S)),
            ('detections_rate', 3.0, 'Hz of the live picture on ~/detections while subscribed',
             D.positive_at_most(100.0)),
        ] + D.BOARD_PARAMETERS + D.CHARUCO_PARAMETERS + [D.MIN_CORNERS_PARAMETER]
            + D.RAW_INPUT_PARAMETERS + SUGGESTION_PARAMETERS)
        p['output_dir'] = p['output_dir'] or D.default_output_dir()
        self.params = p
        return p

    def _start_session(self, p):
        """The camera's names and the calibration session of the board, views and grid."""
        from lf_mpc_calib.features.corners import CornerOptions
        from lf_mpc_calib.pipeline.session import CalibrationSession
        self.camera_name = D.camera_name_of(self, p['camera_name'])
        self.optical_frame = p['optical_frame'] or D.optical_frame(self.camera_name)
        board = D.board_of(p)
        grid = self._load_grid(p['grid_file']) if p['grid_file'] else None
        self.session = CalibrationSession(board, camera_type=p['camera_type'], grid=grid,
                                          views=tuple(int(v) for v in p['views']),
                                          min_poses=p['min_poses'],
                                          lens_types=p['lens_types'],
                                          corner_options=CornerOptions(
                                              min_corners=p['min_corners']))

    def _connect_arm(self, p):
        """On a robot arm (base_frame and tool_frame), the session's arm and the robot pose
        source (``robot``, None off an arm)."""
        self.robot = None                       # robot pose source on an arm
        if bool(p['base_frame']) != bool(p['tool_frame']):
            from lf_mpc_calib.errors import InvalidInputError
            raise InvalidInputError(
                f"parameters 'base_frame' = {p['base_frame']!r} and 'tool_frame' = "
                f"{p['tool_frame']!r}: expected both (a robot arm) or neither")
        if p['base_frame']:
            from lf_mpc_calib.ros.robot_pose import make_robot_pose_source
            self.session.set_arm(p['hand_eye_setup'], p['base_frame'], p['tool_frame'])
            self.robot = make_robot_pose_source(
                self, p['base_frame'], p['tool_frame'], max_age_s=p['tf_max_age'],
                window_s=p['tf_motion_window'], timeout_s=p['tf_timeout'])

    def _init_frames(self):
        """The locks, the latest frame, the ~/capture waits and the image counters."""
        self._lock = threading.Lock()           # serialises the session
        self._frame_lock = threading.Lock()
        self._latest = None                     # latest valid frame (H, W) array
        self._waiters = []      # [threading.Event, slot list, monotonic time asked] per capture
        self.frames_received = 0
        self.bad_images = 0
        self.last_rejection = ''                # why the last malformed image was ignored

    def _create_publishers(self):
        """The latched outputs: ~/camera_info, ~/calibration, /tf_static and ~/status."""
        from sensor_msgs.msg import CameraInfo
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage
        self._String, self._TFMessage = String, TFMessage
        latched = D.latched_qos()
        self.info_pub = self.create_publisher(CameraInfo, '~/camera_info', latched)
        self.calibration_pub = self.create_publisher(String, '~/calibration', latched)
        self.tf_pub = self.create_publisher(TFMessage, '/tf_static', latched)
        self.status_pub = self.create_publisher(String, '~/status', latched)
        self._status = {'summary': 'no captures yet'}     # the last ~/status

    def _watch_input(self, p):
        """The cause log, the input monitor with its 1 s check and the ~/detections picture."""
        from lf_mpc_calib.report.detections_overlay import guidance_lines
        from lf_mpc_calib.ros.detections_publisher import DetectionsPublisher
        from lf_mpc_calib.ros.guard import CauseLog
        from lf_mpc_calib.ros.input_monitor import InputMonitor
        self.causes = CauseLog(self.get_logger())
        self.input = InputMonitor(self, D.IMAGE_TOPIC, self.causes, p['image_reliability'])
        check_input = guarded_callback(self, 'input check', self._check_input)
        self.create_timer(1.0, lambda: check_input(None))
        self.detections_topic = DetectionsPublisher(
            self, self._lock, lambda: self._latest, lambda: guidance_lines(self._status),
            p['detections_rate'], self.causes, suggested=lambda: self.suggestions.target_uv)

    def _subscribe_inputs(self, p):
        """The dark frame, the white image (file, or the latched topic) and image_raw."""
        from sensor_msgs.msg import Image

        from lf_mpc_calib.ros.image_conversion import less_dark, load_dark
        self._dark = load_dark(p['dark_image_file'])
        if p['white_image_file']:
            from lf_mpc_calib.io.images import read_image
            white = less_dark(read_image(p['white_image_file']), self._dark, 'white_image_file')
            self.session.set_white(white if white.ndim == 2 else white.mean(axis=2))
        else:
            self.create_subscription(Image, D.WHITE_TOPIC,
                                     guarded_callback(self, D.WHITE_TOPIC, self._on_white),
                                     D.latched_qos(),
                                     callback_group=MutuallyExclusiveCallbackGroup())
        self.create_subscription(Image, D.IMAGE_TOPIC,
                                 guarded_callback(self, D.IMAGE_TOPIC, self._on_image),
                                 D.image_qos(p['image_reliability']),
                                 callback_group=MutuallyExclusiveCallbackGroup())

    def _create_services(self):
        """~/capture and ~/calibrate (a callback group each), ~/save, ~/reset and ~/verify
        (one group) and ~/suggest."""
        from std_srvs.srv import Trigger

        from lf_mpc_calib.ros.suggestions import SuggestionService
        queued = D.service_qos()
        self.create_service(Trigger, '~/capture',
                            guarded_service(self, 'capture',
                                            self.detections_topic.while_capturing(
                                                self._on_capture)),
                            qos_profile=queued, callback_group=MutuallyExclusiveCallbackGroup())
        self.create_service(Trigger, '~/calibrate',
                            guarded_service(self, 'calibration', self._on_calibrate),
                            qos_profile=queued, callback_group=MutuallyExclusiveCallbackGroup())
        other = MutuallyExclusiveCallbackGroup()
        self.create_service(Trigger, '~/save', guarded_service(self, 'save', self._on_save),
                            qos_profile=queued, callback_group=other)
        self.create_service(Trigger, '~/reset', guarded_service(self, 'reset', self._on_reset),
                            qos_profile=queued, callback_group=other)
        self.create_service(Trigger, '~/verify',
                            guarded_service(self, 'verify', self._on_verify),
                            qos_profile=queued, callback_group=other)
        self.suggestions = SuggestionService(self, self._lock,
                                             callback_group=MutuallyExclusiveCallbackGroup())

    def _start_recorder(self):
        """Resume the captures stored in the session folder (and clean what killed saves and
        captures left); each capture is written there from now on."""
        from pathlib import Path

        from lf_mpc_calib.io.atomic import remove_partials
        from lf_mpc_calib.pipeline.session_recorder import SessionRecorder
        out = Path(self.params['output_dir'])
        folder = self.params['session_dir'] or out / f'{self.camera_name}_session'
        log = self.get_logger()
        try:
            for leftover in remove_partials(out, prefix=f'.{self.camera_name}_'):
                log.info(f'removed {leftover}: a ~/save cut off when the node stopped')
        except OSError as exc:
            log.warning(f'could not remove what a ~/save cut off left in {out}: {exc}')
        self.recorder = SessionRecorder(self.session, folder)
        for line in self.recorder.start():
            (log.warning if 'skipped' in line or 'not resumed' in line else log.info)(line)
        if self.recorder.found:
            self._status = {'summary': self.recorder.summary()}

    @staticmethod
    def _load_grid(path):
        from lf_mpc_calib.errors import InvalidInputError
        from lf_mpc_calib.io.raw_dataset import load_grid
        try:
            return load_grid(path)
        except LFCalibError as exc:
            raise InvalidInputError(
                f"parameter 'grid_file' = {path!r}: expected a YAML file with a lenslet_grid "
                f'(lf-mpc-calib grid or a calibration file): {exc}') from None

    # ---- images -------------------------------------------------------------------------
    def _to_mono(self, msg, what):
        from lf_mpc_calib.ros.image_conversion import image_to_array, less_dark, to_mono
        try:
            pixels = to_mono(image_to_array(msg, max_pixels=self.params['max_image_pixels']),
                             msg.encoding)
            return less_dark(pixels, self._dark, what)
        except LFCalibError as exc:
            self.bad_images += 1
            self.last_rejection = str(exc)
            self.get_logger().warning(f'ignoring malformed {what} image: {exc}')
            return None

    def _check_input(self, _=None):
        """Timer: a stall of the camera's frames goes on ~/status at once."""
        if self.input.check() is not None:
            self._publish_status(self._status)

    def _publish_status(self, status):
        """Publish ``status`` (the guidance) on ~/status with the input's rate and age, the
        problems now and the parameters file's problems."""
        import json
        status = dict(status, input=self.input.as_dict())
        status.pop('problems', None)
        if self.causes.active:
            status['problems'] = dict(self.causes.active)
        if self.parameter_problems:
            status['parameter_problems'] = list(self.parameter_problems)
        status['session'] = self.recorder.status()
        if self.held_out.holding:
            status['verification'] = self.held_out.status()
        self._status = status
        self.status_pub.publish(self._String(data=json.dumps(status)))

    def _on_image(self, msg):
        arrived = time.monotonic()
        self.input.frame(len(msg.data))
        pixels = self._to_mono(msg, D.IMAGE_TOPIC)
        if pixels is None:
            return
        stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        with self._frame_lock:
            self.frames_received += 1
            self._latest = pixels
            # a capture asked for while this frame was being converted waits for the next:
            # this one arrived before it (the previous pose's, after ~/next_pose)
            waiters = [w for w in self._waiters if w[2] <= arrived]
            self._waiters = [w for w in self._waiters if w[2] > arrived]
        for event, slot, _ in waiters:
            slot.append((pixels, stamp_ns))
            event.set()

    def _on_white(self, msg):
        pixels = self._to_mono(msg, D.WHITE_TOPIC)
        if pixels is None:
            return
        with self._lock:
            if self.session.white is not None and np.array_equal(self.session.white, pixels):
                return
            try:
                grid = self.session.set_white(pixels)
            except LFCalibError as exc:
                self.get_logger().error(f'white image rejected: {exc}')
                return
            for line in self.recorder.white_set():
                self.get_logger().info(line)
        self.get_logger().info(f'white image {pixels.shape[1]}x{pixels.shape[0]}: lenslet '
                               f'grid {grid.shape[0]}x{grid.shape[1]} lenses')

    def next_frame(self, timeout):
        """(frame, stamp in ns) of the next valid frame arriving on image_raw within
        ``timeout`` s, or None; a frame that arrived before the call (still being converted)
        is not it."""
        event, slot = threading.Event(), []
        with self._frame_lock:
            if self._stopping:
                return None
            waiter = (event, slot, time.monotonic())
            self._waiters.append(waiter)
        if not event.wait(timeout):
            with self._frame_lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        return slot[0] if slot else None

    def stop_waiting(self):
        """End every wait for a frame now and refuse new ones (the node is stopping: a
        ~/capture waiting answers at once instead of after ``capture_timeout``)."""
        with self._frame_lock:
            self._stopping = True
            waiters, self._waiters = self._waiters, []
        for event, _, _ in waiters:
            event.set()

    # ---- services -----------------------------------------------------------------------
    def _on_capture(self, request, response):
        response.success = False
        if not self.session.ready:
            response.message = (f'no white image yet (topic {D.WHITE_TOPIC} or parameter '
                                'white_image_file); 0 frames captured')
            return response
        bad_before = self.bad_images
        frame = self.next_frame(self.params['capture_timeout'])
        if frame is None and self._stopping:
            response.message = 'the node is stopping: no frame captured'
            return response
        if frame is None:
            bad = self.bad_images - bad_before
            response.message = (f'no valid image on {D.IMAGE_TOPIC} within '
                                f'{self.params["capture_timeout"]:g} s ('
                                + (f'{bad} malformed images ignored during this capture, the '
                                   f'last: {self.last_rejection}' if bad else
                                   'no image arrived')
                                + f'; {self.bad_images} malformed images since the start)')
            return response
        frame, stamp_ns = frame
        robot_pose = None
        if self.robot is not None:
            try:
                robot_pose = self.robot.lookup(stamp_ns)
            except LFCalibError as exc:
                response.message = (f'frame refused: no robot pose: {exc} '
                                    f'({self.session.num_poses} poses kept)')
                self.get_logger().warning(response.message)
                return response
        with self._lock:
            if self.held_out.holding:
                return self._hold_out(frame, robot_pose, response)
            try:
                report = self.session.capture(frame, robot_pose=robot_pose)
            except LFCalibError as exc:
                response.message = f'frame rejected: {exc}'
                return response
            stored = self.recorder.captured() if report.accepted else ''
        response.success = bool(report.accepted)
        response.message = report.summary() + (f'; {stored}' if stored else '')
        (self.get_logger().warning if stored else self.get_logger().info)(response.message)
        if report.accepted:
            per = np.asarray(report.corners_per_view)
            response.message += '; corners per view (rows j, columns i): ' + \
                ' / '.join(' '.join(str(int(c)) for c in row) for row in per)
            response.message += '; pose set: ' + self._guide()
            self.detections_topic.captured(self.session, report.pose)
        return response

    def _hold_out(self, frame, robot_pose, response):
        """~/capture while ~/verify holds captures out (under the lock): kept apart from the
        session's poses (pipeline.held_out)."""
        response.success, response.message = self.held_out.capture(self.session, frame,
                                                                   robot_pose)
        self.get_logger().info(response.message)
        self._publish_status(self._status)
        return response

    def _on_verify(self, request, response):
        with self._lock:
            response.success, response.message = self.held_out.verify(self.session)
        if response.success:        # one severity per call site (rclpy)
            self.get_logger().info(response.message)
        else:
            self.get_logger().warning(response.message)
        self._publish_status(self._status)
        return response

    def _hand_eye_status(self):
        """The hand-eye part of ~/status (None off an arm)."""
        if self.robot is None:
            return None
        with self._lock:
            d = self.session.hand_eye_guidance()
            he = self.session.hand_eye
            if he is not None:                 # the mount parent -> optical frame
                from lf_mpc_calib.camera.optical_frame import OpticalFrame
                mount = OpticalFrame.of(self.session.published_result.model,
                                        self.session.camera_type).mount(*he.mount)
        status = {'setup': self.session.arm['setup'], 'captures': d.n_captures,
                  'determined': bool(d.determined),
                  'largest_rotation_deg': round(d.largest_rotation_deg, 3),
                  'axis_spread_deg': round(d.axis_spread_deg, 3), 'advice': d.message}
        if he is not None:
            shift = he.extras.get('intrinsics_shift')
            status['mount'] = {'rotation_vector': [float(v) for v in mount[0]],
                               'translation_m': [float(v) for v in mount[1]],
                               'rms_reprojection_px': he.rms_reprojection_px,
                               'intrinsics': he.error_figures()['intrinsics'],
                               'intrinsics_shift': None if shift is None else shift.to_dict()}
        return status

    def _guide(self, result=None):
        """Publish the capture guidance on ~/status; returns its one-line summary."""
        from lf_mpc_calib.calibration.determination import determination
        from lf_mpc_calib.calibration.guidance import capture_guidance, guidance_so_far
        from lf_mpc_calib.pipeline.live_view import uncovered_names
        with self._lock:
            obs, s = self.session.observations, self.session
            partial = getattr(s.board, 'board_type', 'checkerboard') == 'charuco'
            where = dict(partial_views=partial,     # a ChArUco board counts in part
                         uncovered=uncovered_names(s) if partial else ())
        points = s.board.points()
        if result is None:
            guide, result = guidance_so_far(obs, board_points=points, min_poses=s.min_poses,
                                            calibrate_options=s.calibrate_options,
                                            camera_type=s.camera_type, **where)
        else:
            guide = capture_guidance(result, board_points=points, camera_type=s.camera_type,
                                     **where)
        status = dict(guide.to_dict(), summary=guide.summary())
        hand_eye = self._hand_eye_status()
        if hand_eye is not None:
            status['hand_eye'] = hand_eye
        if result is not None:
            d = determination(result)
            status['flags'] = list(d.refusals + d.warnings)
            status['held'] = dict(result.held)
            with self._lock:
                verdict = self.session.acceptance
            if verdict is not None:     # the one rule, calibrate-raw's (calibration.acceptance)
                status['acceptance'] = verdict.to_dict()
                status['accepted'] = bool(verdict.accepted)
        self._publish_status(status)
        return status['summary'] + ''.join(f'; {f}' for f in status.get('flags', ())) + (
            f'; hand-eye: {hand_eye["advice"]}' if hand_eye is not None else '')

    def _on_calibrate(self, request, response):
        """~/calibrate: calibrate the captured poses (and the hand-eye mount on an arm),
        publish the latched outputs and answer the figures, the verdict and the guidance."""
        response.success = False
        with self._lock:
            try:
                self.session.calibrate()
            except LFCalibError as exc:
                response.message = f'calibration failed: {exc}'
                self.get_logger().error(response.message)
                return response
            hand_eye_error = self._solve_hand_eye()
            result = self.session.published_result     # joint with the mount when solved
            cal = self.session.calibration_file(self.camera_name, self.optical_frame)
            he = self.session.hand_eye
            view_size = self.session.view_size
            types = self.session.type_estimate
            jackknife = self.session.jackknife
        self._publish_calibration(result, view_size, cal, he)
        response.success = hand_eye_error is None
        response.message = (self._calibration_text(result, cal, types, jackknife)
                            + self._hand_eye_text(cal, he, hand_eye_error))
        with self._lock:
            verdict = self.session.acceptance
        response.message += '; ' + acceptance_text(verdict)
        response.message += '; pose set: ' + self._guide(result)
        if verdict.accepted:
            self.get_logger().info(response.message)
        else:
            self.get_logger().warning(response.message)
        return response

    def _solve_hand_eye(self):
        """On an arm, solve the hand-eye mount after a calibration (under the lock); returns
        why it could not be solved, or None."""
        if self.robot is not None:
            try:
                self.session.solve_hand_eye()
            except LFCalibError as exc:
                return str(exc)
        return None

    def _publish_calibration(self, result, view_size, cal, he):
        """The latched ~/camera_info, ~/calibration and /tf_static (the board poses and, on an
        arm, the mount) of a calibration."""
        from lf_mpc_calib.io.calibration_file import dumps
        from lf_mpc_calib.ros.messages import board_transforms, camera_info, transform_stamped
        stamp = self.get_clock().now().to_msg()
        self.info_pub.publish(camera_info(result.model, view_size, frame_id=self.optical_frame,
                                          stamp=stamp))
        self.calibration_pub.publish(self._String(data=dumps(cal)))
        tf = board_transforms(                  # poses and mount in the optical frame
            *cal.optical_poses(), parent=self.optical_frame,
            child_prefix=f'{self.camera_name}_board_', stamp=stamp)
        if he is not None:                      # the mount in the same (full state) message
            m = cal.optical_hand_eye()
            tf.transforms.append(transform_stamped(
                m['rotation_vector'], m['translation_m'], parent=m['parent_frame'],
                child=m['child_frame'], stamp=stamp))
        self.tf_pub.publish(tf)

    @staticmethod
    def _calibration_text(result, cal, types, jackknife):
        """The ~/calibrate reply's errors, the per-type terms of a multi-focus camera and the
        jackknife's line."""
        text = (f'calibrated {cal.num_poses} poses: RMS reprojection '
                f'{result.rms_reprojection_px:.4f} px, ray reprojection '
                f'{result.rms_ray_reprojection_mm:.5f} mm, '
                f'{"converged" if result.converged else "not converged"} ({result.message})')
        if types is not None and result.lens_types is not None:
            lt = result.lens_types
            text += '; ' + types.describe() + '; per-type terms: ' + ', '.join(
                f'type {t}: scale {100 * lt.scale[t]:+.3f} +- {100 * lt.scale_std[t]:.3f} %, '
                f'offset ({lt.offset_px[t, 0]:+.3f}, {lt.offset_px[t, 1]:+.3f}) px'
                + lt.view_text(t) for t in range(lt.n_types))
        if jackknife is not None:
            text += '; ' + jackknife.one_line()
        return text

    @staticmethod
    def _hand_eye_text(cal, he, hand_eye_error):
        """The ~/calibrate reply's hand-eye part: the mount with its sigmas and how far it
        pulled the intrinsics, or why it was not solved ('' off an arm)."""
        if he is None:
            return ('' if hand_eye_error is None else
                    f'; hand-eye NOT solved (camera calibration published, '
                    f'captures kept): {hand_eye_error}')
        from lf_mpc_calib.calibration.hand_eye_joint import SHIFT_WARNING_SIGMAS
        m = cal.optical_hand_eye()
        sd_t = 1e3 * np.linalg.norm(he.mount_stddev[1])
        sd_r = np.degrees(np.linalg.norm(he.mount_stddev[0]))
        text = (f'; hand-eye {he.setup}: {m["parent_frame"]} -> {m["child_frame"]} t = ['
                + ', '.join(f'{1e3 * v:.2f}' for v in m['translation_m'])
                + f'] mm (sigma {sd_t:.3f} mm, {sd_r:.4f} deg), RMS '
                f'{he.rms_reprojection_px:.4f} px ({he.closed_form_method} closed form then '
                'joint refinement)')
        shift = he.extras.get('intrinsics_shift')
        if shift is not None:
            text += (f'; published: the {shift.summary()} (camera-only RMS '
                     f'{he.calibration_rms_px:.4f} px)')
            if shift.large:
                text += (f'; WARNING: the robot poses pull the intrinsics by '
                         f'{shift.max_sigmas:.1f} sigma from the camera-only calibration (> '
                         f'{SHIFT_WARNING_SIGMAS:g}): check that the robot poses are accurate '
                         'and in metres, and add board poses at other distances')
        return text

    def _on_save(self, request, response):
        response.success = False
        with self._lock:
            try:
                paths = self.session.save(self.params['output_dir'], self.camera_name,
                                          extra_files=self.held_out.files())
            except (LFCalibError, OSError) as exc:
                response.message = f'nothing saved: {exc}'
                return response
            calibrated = self.session.result is not None
            poses = self.session.num_poses
            verdict = self.session.acceptance
        response.success = True
        response.message = (
            f'saved {len(paths)} files ({poses} captured frames, '
            f'{"calibration file" if calibrated else "no calibration yet"}) to '
            f'{paths[-1].parent} (also {self.params["output_dir"]}/latest)')
        if verdict is not None and not verdict.accepted:
            response.message += (f'; the calibration saved is {verdict.summary()} (manifest '
                                 'key acceptance)')
        self.get_logger().info(response.message)
        return response

    def _on_reset(self, request, response):
        with self._lock:
            poses = self.session.num_poses
            try:
                moved = self.recorder.reset()
            except OSError as exc:
                response.success = False
                response.message = f'nothing reset: the stored captures cannot be moved: {exc}'
                return response
            self.held_out.reset()
        self.tf_pub.publish(self._TFMessage(transforms=[]))
        self._publish_status({'summary': 'reset: no captures yet'})
        response.success = True
        response.message = (f'reset: {poses} captured poses and the calibration dropped; '
                            f'{moved}')
        self.get_logger().info(response.message)
        return response


def acceptance_text(verdict):
    """The ~/calibrate reply's verdict of the acceptance rule (calibration.acceptance): the
    node keeps and publishes a calibration the rule refuses, and says that calibrate-raw on
    the saved session would refuse it too."""
    if verdict.accepted:
        return f'calibration {verdict.summary()}'
    return (f'calibration {verdict.summary()}: published and kept with the captures, but '
            'calibrate-raw refuses it by the same rule; add captures and call ~/calibrate '
            'again')


def main(args=None):
    """Run the node until shut down; returns the exit code."""
    return D.run_node(CalibrationNode, args)


if __name__ == '__main__':
    import sys
    sys.exit(main())
