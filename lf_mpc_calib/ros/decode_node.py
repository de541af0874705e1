"""
``lf_decoder``: decode every raw frame of a calibrated light-field camera and measure in 3-D.

A thin adapter over :class:`lf_mpc_calib.measurement.live.LiveMeasurer`.

Calibration: ``calibration_file`` (a calibration file with its lenslet grid), or, when that is
empty, the latched calibration topic ``calibration_topic`` (default
``lf_calibration/calibration``, the calibration node of the same namespace: a new calibration
there is used from the next frame on). White image: ``white_image_file`` or the latched
``white_image`` topic (devignetting and the views corners are taken from; frames decode
without it until it arrives).

Subscribes ``image_raw`` (depth 1, best effort, or reliable with ``image_reliability``; mono8/16,
bayer_*8/16, rgb8, bgr8 with any ``step`` padding). Frames are processed on a worker thread,
newest first: a frame arriving while one is processed replaces the waiting one (counted as
dropped), so the node keeps up with its input or drops frames and never queues without bound.
With a focused calibration and a board the corners of a frame are found in a second thread
(``lf_decoder_points``) while the next frame is rendered, so ``~/center`` (and depth) keep
their own rate beside ``~/points`` on a 2-core machine; that thread also takes the newest
rendered frame (one it did not reach is counted ``points_skipped``). Run as a process
(``main()``), the node gives Fast DDS the large-frame profile of
:mod:`lf_mpc_calib.ros.transport` (raw frames of several MB between processes; the camera
driver needs it too).

Publishes per processed frame (header stamp of the raw frame, frame id the optical frame):

- ``~/center`` (sensor_msgs/Image, mono8/mono16 as the input) and ``~/camera_info``: the
  rectified central view and its pinhole CameraInfo. A focused camera's calibration
  (:class:`lf_mpc_calib.measurement.focused.FocusedMeasurer`): the image rendered from the
  micro-images at the frame's inverse virtual depth w, in the frame ``<optical
  frame>_rendered`` (on ``/tf_static``: the main lens, turned by 180 deg about z when the
  rendered image is upside down in the optical frame), and a CameraInfo whose K is the
  pinhole of that image in that frame
  (:func:`lf_mpc_calib.measurement.focused.rendered_pinhole`): exact for the scene at the
  rendered depth, elsewhere up to the tiling of the micro-image patches; its focal length
  follows w (the rendered pixel is 1 / |w| raw pixels), so it changes from frame to frame;
  ``~/depth`` (while subscribed) in the same pixels and frame, from the disparities between
  neighbouring micro-images (:mod:`lf_mpc_calib.measurement.focused_depth`, searched within
  0.12 of the rendered image's w: NaN where a micro-image has no texture near its centre or
  no clear match in that window; edges spread by up to two micro-image tiles; about 70 ms CPU
  per 2048 x 1536 frame), with ``~/depth/camera_info`` = the rendered image's, and ``~/cloud``
  (while subscribed: those depths as points in the optical frame, every ``cloud_step``-th
  pixel, confidence 1: pixels without a confident depth are left out); ``~/rays`` (while
  subscribed) of the raw pixels under the micro-images
  (:class:`lf_mpc_calib.measurement.focused_rays.FocusedRays`: every ``ray_step``-th pixel
  each way from a micro-image's centre, in the micro-images whose lattice indices k, l are
  multiples of ``ray_view_step``; intensity devignetted by the white); no views or refocus
  outputs. The rendered image takes about
  9 ms CPU per 2048 x 1536 frame (cached index maps, w walked from the last frame's) and the
  corners about 35 ms more, tracked from frame to frame in the micro-images
  (:class:`lf_mpc_calib.features.micro_image_tracking.MicroImageCornerTracker`: from the
  last processed frame, whatever was dropped, re-acquired from the board's last place in the
  rendered image when that fails; the full search, seconds, on the first frame and when
  re-acquisition failed on 2 frames, in a thread of its own beside the stream:
  docs/focused-live.md, ``benchmarks/bench_focused_live.py``);
- ``~/views``: the mosaic of all decoded views (only while someone subscribes);
- ``~/rays`` (PointCloud2: x y z origin on the view plane (focused: on the plane conjugate
  to the micro-lenses), normal_x normal_y normal_z unit direction, intensity), decimated by
  ``ray_step`` pixels in views that are multiples of ``ray_view_step`` (only while someone
  subscribes);
- ``~/points`` (PointCloud2: x y z, id, rays, residual): the board corners found,
  triangulated from all the views (Eq. 2-5), in the optical frame (empty when no board);
  the board of ``board_cols``, ``board_rows``, ``square_size`` and ``board_type`` (with
  ``board_type`` charuco, ``dictionary``, ``marker_size``, ``charuco_layout``,
  ``min_corners``: the calibration node's parameters): a ChArUco board's ids are its
  corners' (named by the markers around them, found afresh in every frame), so a board
  partly out of view gives the corners it shows, ``min_corners`` or more, and markers of
  another board give no points and the reason on ``~/stats``;
- ``~/depth`` (sensor_msgs/Image 32FC1, metres along the optical axis, NaN where unknown,
  REP 118) with ``~/depth/camera_info`` (the rectified central view's, whose pixels the depth
  has), ``~/cloud`` (PointCloud2 x y z intensity confidence in the optical frame, every
  ``cloud_step``-th pixel) and ``~/refocus`` (Image as ``~/center``, refocused at
  ``refocus_distance`` m): computed only while someone subscribes
  (:mod:`lf_mpc_calib.measurement.depth`; range ``depth_near``..``depth_far``, 0: 0.5-2 x
  the distance where the views agree). A depth set-up the calibration cannot serve (empty
  range, range behind the camera, too little disparity) is logged once per cause and the
  other outputs go on;
- ``~/rate`` (std_msgs/Float32): frames processed per second (last 2 s or 10 frames; focused
  with a board: frames whose ``~/center`` went out);
- ``~/stats`` (std_msgs/String, YAML), once per frame (focused with a board: once when its
  center went out, with the last corners found, and once when its corners did, latency then
  up to the corners): rate, latency and per-stage milliseconds (convert,
  decode, rectify: the central view, detect: the corners, triangulate, rays, depth, cloud,
  refocus, views: the mosaic, publish: the rest; a stage not run is absent), frame
  counters, how the corners were found (``corners``: tracked, re-acquired or full search and
  why; ``full_search_ms``: the last full search's duration), ``problems``,
  and ``calibration_drift``: the board's residual over the last frames against the limit the
  calibration's RMS gives (:mod:`lf_mpc_calib.measurement.drift`) and, for a conventional
  camera whose calibration file keeps its covariance, under ``intrinsics`` the targeted test
  of how far the corners say an intrinsic moved (:mod:`lf_mpc_calib.measurement.drift_score`);
  a drift is named under ``problems``, docs/ros-session.md.

A calibration with a robot mount (its ``hand_eye`` key: tool -> optical on an arm, base ->
optical for a fixed camera) is published on ``/tf_static`` (latched, the mount's parent frame to
this node's optical frame), so the points reach the robot's base frame through TF; with a
focused camera's rendered frame in the same message.

Bad input is logged once per cause (:class:`lf_mpc_calib.ros.guard.CauseLog`: again only
when the cause changes or clears, the causes now on ``~/stats`` under ``problems``) and the
node keeps serving: malformed images, frames of another size than the calibration's lenslet
grid (skipped), a calibration without a lenslet grid (file or topic; frames wait), a depth
range the calibration cannot serve, a frame that is (nearly) the white image or transposed /
turned by 90 degrees against it (``frame check``, the evidence of
:func:`lf_mpc_calib.lenslet.frame_check.frame_warnings` on a 65 536-pixel subsample: about
0.5-1.5 ms, part of the ``convert`` stage, on the first frame, every 10th frame and every frame
while named, so the first good frame clears it; the frame is processed anyway). A parameter
out of range or an unreadable calibration file stops the node at startup with its name.
"""

import collections
import dataclasses
import re
import threading
import time

import numpy as np

from lf_mpc_calib.errors import LFCalibError
from lf_mpc_calib.ros import defaults as D
from lf_mpc_calib.ros.guard import CauseLog, guarded_callback

try:
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from rclpy.node import Node
except ImportError:  # pragma: no cover - importable without ROS for docs
    Node = object

CALIBRATION_TOPIC = 'lf_calibration/calibration'
FRAME_CHECK_EVERY = 10
"""Frames between two checks for a white or transposed frame while none is named."""
FRAME_CHECK_PIXELS = 65_536
"""Pixels (a regular subsample) a frame check compares with the white image."""
DEPTH_PARAMETERS = [
    ('depth_near', 0.0, 'nearest depth of ~/depth and ~/cloud (m); 0 with depth_far 0: 0.5 x '
     'the distance where the views agree', D.at_least(0.0)),
    ('depth_far', 0.0, 'farthest depth (m); 0 with depth_near 0: 2 x that distance',
     D.at_least(0.0)),
    ('depth_view_step', 1, 'depth uses the usable views whose i, j are multiples of this',
     D.between(1, 64)),
    ('depth_window', 5, 'odd size (px) of the depth cost window', D.between(1, 31)),
    ('depth_min_confidence', 0.3, 'depth below this confidence is NaN', D.between(0.0, 0.99)),
    ('cloud_step', 2, 'pixel decimation of ~/cloud', D.between(1, 64)),
    ('refocus_distance', 0.0, 'distance (m) in focus on ~/refocus; 0: where the views agree',
     D.at_least(0.0)),
]


class DecodeNode(Node):
    """The decode node (module docstring); kwargs go to ``rclpy.node.Node``."""

    NODE_NAME = 'lf_decoder'

    def __init__(self, **kwargs):
        super().__init__(self.NODE_NAME, **kwargs)
        self._stop = threading.Event()
        self._worker = self._points_worker = None
        try:
            self._setup()
        except Exception:
            self.destroy_node()
            raise

    # ---- setup --------------------------------------------------------------------------
    def _setup(self):
        """Parameters, state, publishers, the calibration, the white image and image_raw;
        then the worker threads."""
        p = self._declare_parameters()
        self._init_state(p)
        self._create_publishers()
        self._watch_input(p)
        group = MutuallyExclusiveCallbackGroup()
        cal = self._calibration_input(p, group)
        self._white_input(p, cal, group)
        from sensor_msgs.msg import Image
        self.create_subscription(Image, D.IMAGE_TOPIC,
                                 guarded_callback(self, D.IMAGE_TOPIC, self._on_image),
                                 D.image_qos(p['image_reliability']),
                                 callback_group=MutuallyExclusiveCallbackGroup())
        self._start_workers()
        self.get_logger().info(
            f'calibration from {p["calibration_file"] or p["calibration_topic"]}, white from '
            f'{p["white_image_file"] or D.WHITE_TOPIC}, views {tuple(p["views"])}, board '
            f'{D.describe_board(self.board)}')

    def _declare_parameters(self):
        """Declare and check the node's parameters; returns {name: value} (also ``params``)."""
        p = D.declare_parameters(self, [
            ('calibration_file', '', 'calibration file (YAML with lenslet_grid); empty: the '
             'latched calibration_topic', None),
            ('calibration_topic', CALIBRATION_TOPIC, 'latched std_msgs/String calibration file '
             'used when calibration_file is empty', None),
            ('measure_points', True, 'find and triangulate board corners in every frame',
             None),
            ('ray_step', 8, 'pixel decimation of ~/rays', D.between(1, 4096)),
            ('ray_view_step', 4, '~/rays come from views whose i, j are multiples of this '
             '(focused: micro-images whose lattice indices k, l are)', D.between(1, 64)),
            ('optical_frame', '', 'frame id of the outputs; empty: the calibration file\'s',
             None),
        ] + DEPTH_PARAMETERS + D.BOARD_PARAMETERS + D.CHARUCO_PARAMETERS
            + [D.MIN_CORNERS_PARAMETER] + D.RAW_INPUT_PARAMETERS)
        self.params = p
        return p

    def _init_state(self, p):
        """The board, the locks and queues of the two threads, the calibration's slots and
        the frame counters."""
        from std_msgs.msg import Float32, String
        self.board = D.board_of(p)
        self._Float32, self._String = Float32, String
        self._lock = threading.Lock()          # measurer, calibration and pending frame
        self._wake = threading.Condition(self._lock)
        self._points_wake = threading.Condition(self._lock)   # the points thread's
        self._pending = None                   # newest raw Image waiting to be processed
        self._points_pending = None            # newest rendered frame waiting for corners
        self._corners = {'points': 0, 'reason': '', 'corners': '', 'full_search_ms': None}
        self.points_skipped = 0                # focused: rendered, corners not looked for
        self.calibration = None                # CalibrationFile
        self.measurer = None                   # LiveMeasurer (replaced, never mutated)
        self._white = None
        self.optical_frame = p['optical_frame'] or D.optical_frame(D.camera_name_of(self, ''))
        self.frames_received = 0
        self.frames_processed = 0
        self.frames_dropped = 0
        self.frames_waiting = 0                # before a calibration arrived
        self.bad_images = 0
        self._frames_seen = 0                  # frames of the right size (frame check)
        self._frame_warning = None             # (evidence without figures, message)
        self.last_stats = {}
        self._times = collections.deque(maxlen=10)

    def _create_publishers(self):
        """The per-frame outputs (reliable, depth 1) and the latched /tf_static."""
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import CameraInfo, Image, PointCloud2
        from std_msgs.msg import Float32, String
        from tf2_msgs.msg import TFMessage
        out = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        self.center_pub = self.create_publisher(Image, '~/center', out)
        self.info_pub = self.create_publisher(CameraInfo, '~/camera_info', out)
        self.views_pub = self.create_publisher(Image, '~/views', out)
        self.rays_pub = self.create_publisher(PointCloud2, '~/rays', out)
        self.points_pub = self.create_publisher(PointCloud2, '~/points', out)
        self.rate_pub = self.create_publisher(Float32, '~/rate', out)
        self.stats_pub = self.create_publisher(String, '~/stats', out)
        self.depth_pub = self.create_publisher(Image, '~/depth', out)
        self.depth_info_pub = self.create_publisher(CameraInfo, '~/depth/camera_info', out)
        self.cloud_pub = self.create_publisher(PointCloud2, '~/cloud', out)
        self.refocus_pub = self.create_publisher(Image, '~/refocus', out)
        self.tf_pub = self.create_publisher(TFMessage, '/tf_static', D.latched_qos())

    def _watch_input(self, p):
        """The depth and drift slots, the cause log and the input monitor with its 1 s
        check."""
        from lf_mpc_calib.ros.input_monitor import InputMonitor
        self._depth = (None, None)             # (measurer, DepthEstimator | error text)
        self._drift = (None, None)             # (measurer, DriftWatch | error text)
        self.causes = CauseLog(self.get_logger())  # bad input, logged once per cause
        self.input = InputMonitor(self, D.IMAGE_TOPIC, self.causes, p['image_reliability'])
        check_input = guarded_callback(self, 'input check', self._check_input)
        self.create_timer(1.0, lambda: check_input(None))

    def _calibration_input(self, p, group):
        """Load calibration_file (returns it; a file without a lenslet grid is logged and
        waits), or subscribe the latched calibration_topic (returns None)."""
        if not p['calibration_file']:
            from std_msgs.msg import String
            self.create_subscription(
                String, p['calibration_topic'],
                guarded_callback(self, p['calibration_topic'], self._on_calibration),
                D.latched_qos(), callback_group=group)
            return None
        from lf_mpc_calib.io.calibration_file import load_calibration
        try:
            cal = load_calibration(p['calibration_file'])
        except (LFCalibError, OSError) as exc:
            from lf_mpc_calib.errors import InvalidInputError
            raise InvalidInputError(
                f"parameter 'calibration_file' = {p['calibration_file']!r}: cannot load "
                f'it: {exc}') from exc
        try:
            self._set_calibration(cal, p['calibration_file'])
        except LFCalibError as exc:   # e.g. no lenslet grid: say so once, keep serving
            self.causes.error('calibration', f"{p['calibration_file']}: {exc}")
        return cal

    def _white_input(self, p, cal, group):
        """The dark frame and the white image: white_image_file (checked against the loaded
        calibration ``cal``'s lenslet grid), or the latched white_image topic."""
        from lf_mpc_calib.ros.image_conversion import less_dark, load_dark
        self._dark = load_dark(p['dark_image_file'])
        if not p['white_image_file']:
            from sensor_msgs.msg import Image
            self.create_subscription(Image, D.WHITE_TOPIC,
                                     guarded_callback(self, D.WHITE_TOPIC, self._on_white),
                                     D.latched_qos(), callback_group=group)
            return
        from lf_mpc_calib.io.images import read_image
        white = less_dark(read_image(p['white_image_file']), self._dark, 'white_image_file')
        white = white if white.ndim == 2 else white.mean(axis=2)
        if cal is not None and cal.lenslet_grid is not None:
            from lf_mpc_calib.errors import InvalidInputError
            from lf_mpc_calib.lenslet.white_image import check_grid_size
            try:
                check_grid_size(cal.lenslet_grid, white.shape)
            except LFCalibError as exc:
                raise InvalidInputError(f"parameters 'calibration_file' and "
                                        f"'white_image_file' disagree: {exc}") from None
        self._set_white(white)

    def _start_workers(self):
        """The frame worker (``lf_decoder_worker``) and the points thread
        (``lf_decoder_points``)."""
        self._worker = threading.Thread(target=self._work, name='lf_decoder_worker',
                                        daemon=True)
        self._worker.start()
        self._points_worker = threading.Thread(target=self._points_work, daemon=True,
                                               name='lf_decoder_points')
        self._points_worker.start()

    # ---- calibration and white ----------------------------------------------------------
    def _set_calibration(self, cal, source):
        from lf_mpc_calib.measurement.live import LiveMeasurer
        board = self.board if self.params['measure_points'] else None
        if cal.camera_type == 'focused':   # rendered image and corners from micro-images
            from lf_mpc_calib.measurement.focused import FocusedMeasurer
            measurer = FocusedMeasurer.from_calibration(
                cal, board=board, ray_step=self.params['ray_step'],
                ray_lens_step=self.params['ray_view_step'], background_search=True)
        else:
            from lf_mpc_calib.features.corners import CornerOptions
            measurer = LiveMeasurer.from_calibration(
                cal, board=board, views=tuple(int(v) for v in self.params['views']),
                ray_step=self.params['ray_step'], ray_view_step=self.params['ray_view_step'],
                corner_options=CornerOptions(min_corners=self.params['min_corners']))
        with self._lock:
            white = self._white
        if white is not None:
            try:
                measurer.set_white(white)
            except LFCalibError as exc:
                self.get_logger().error(f'white image does not fit the calibration: {exc}')
        with self._lock:
            self.calibration, self.measurer = cal, measurer
            if not self.params['optical_frame']:
                self.optical_frame = cal.frames.get('optical', self.optical_frame)
        self._publish_static(cal)
        m = cal.model
        self.get_logger().info(
            f'calibration from {source}: k_i {m.k_i:.4g}, k_u {m.k_u:.4g}, lenslet grid '
            f'{cal.lenslet_grid.shape[0]}x{cal.lenslet_grid.shape[1]}, frame '
            f'{self.optical_frame}')

    @property
    def rendered_frame(self):
        """Frame id of a focused camera's rendered image (``<optical frame>_rendered``)."""
        return f'{self.optical_frame}_rendered'

    def _publish_static(self, cal):
        """The calibration's robot mount (parent frame -> optical frame) and a focused camera's
        rendered frame (optical frame -> rendered frame) on /tf_static, in one message."""
        from tf2_msgs.msg import TFMessage
        from lf_mpc_calib.ros.messages import transform_stamped
        stamp = self.get_clock().now().to_msg()
        transforms = []
        hand_eye = cal.optical_hand_eye()          # parent -> the optical frame
        if hand_eye is not None:
            transforms.append(transform_stamped(
                hand_eye['rotation_vector'], hand_eye['translation_m'],
                parent=hand_eye['parent_frame'], child=self.optical_frame, stamp=stamp))
            self.get_logger().info(f'robot mount {hand_eye["parent_frame"]} -> '
                                   f'{self.optical_frame} on /tf_static')
        if cal.camera_type == 'focused':
            from lf_mpc_calib.measurement.focused import rendered_pinhole
            try:
                pin = rendered_pinhole(cal.model, 1.0, (1, 1))
            except LFCalibError as exc:
                self.causes.error('rendered', f'no pinhole for the rendered image: {exc}')
            else:
                self.causes.clear('rendered')
                centre = cal.optical_frame.points(pin.centre)    # the main lens: 0
                transforms.append(transform_stamped(pin.rotation_vector, centre,
                                                    parent=self.optical_frame,
                                                    child=self.rendered_frame, stamp=stamp))
        if transforms:
            self.tf_pub.publish(TFMessage(transforms=transforms))

    def _on_calibration(self, msg):
        from lf_mpc_calib.io.calibration_file import loads
        try:
            cal = loads(msg.data)
            self._set_calibration(cal, self.params['calibration_topic'])
        except LFCalibError as exc:
            self.causes.error('calibration', f'ignoring the calibration on '
                                             f'{self.params["calibration_topic"]}: {exc}')
        else:
            self.causes.clear('calibration')

    def _to_mono(self, msg, what):
        from lf_mpc_calib.ros.image_conversion import image_to_array, less_dark, to_mono
        try:
            pixels = to_mono(image_to_array(msg, max_pixels=self.params['max_image_pixels']),
                             msg.encoding)
            return less_dark(pixels, self._dark, what)
        except LFCalibError as exc:
            self.bad_images += 1
            self.causes.error(what, f'ignoring malformed images: {exc}')
            return None

    def _set_white(self, white):
        with self._lock:
            self._white = white
            measurer = self.measurer
        if measurer is None:
            return
        from lf_mpc_calib.measurement.focused import FocusedMeasurer
        from lf_mpc_calib.measurement.live import LiveMeasurer
        if isinstance(measurer, FocusedMeasurer):
            fresh = FocusedMeasurer(measurer.model, measurer.grid,
                                    lens_types=measurer.lens_types, board=measurer.board,
                                    ray_step=measurer.ray_step,
                                    ray_lens_step=measurer.ray_lens_step,
                                    background_search=measurer.background_search)
        else:
            fresh = LiveMeasurer(measurer.model, measurer.grid, board=measurer.board,
                                 views=measurer.views, ray_step=measurer.ray_step,
                                 ray_view_step=measurer.ray_view_step)
        try:
            fresh.set_white(white)
        except LFCalibError as exc:
            self.get_logger().error(f'white image rejected: {exc}')
            return
        with self._lock:
            if self.measurer is measurer:
                self.measurer = fresh

    def _on_white(self, msg):
        pixels = self._to_mono(msg, D.WHITE_TOPIC)
        if pixels is not None:
            self._set_white(pixels)
            self.get_logger().info(f'white image {pixels.shape[1]}x{pixels.shape[0]}')

    # ---- frames -------------------------------------------------------------------------
    def _check_input(self, _=None):
        """Timer: a stall of the input frames goes on ~/stats at once (no frame, no stats)."""
        if self.input.check() is None:
            return
        import yaml
        stats = dict(self.last_stats, input=self.input.as_dict(),
                     problems=dict(self.causes.active))
        self.last_stats = stats
        self.stats_pub.publish(self._String(data=yaml.safe_dump(stats, sort_keys=False)))

    def _on_image(self, msg):
        self.input.frame(len(msg.data))
        with self._lock:
            self.frames_received += 1
            if self._pending is not None:
                self.frames_dropped += 1
            self._pending = msg
            self._wake.notify()

    def _work(self):
        while not self._stop.is_set():
            with self._lock:
                while self._pending is None and not self._stop.is_set():
                    self._wake.wait(0.5)
                if self._stop.is_set():
                    return
                msg, self._pending = self._pending, None
                measurer = self.measurer
            if measurer is None:
                self.frames_waiting += 1
                source = self.params['calibration_file'] or self.params['calibration_topic']
                self.causes.waiting('frames', 'frames arrive but there is no usable calibration '
                                    f'(from {source}): waiting for one')
                continue
            try:
                self._process(msg, measurer)
            except LFCalibError as exc:
                self.bad_images += 1
                self.causes.error('frames', f'frame not processed: {exc}')
            except Exception as exc:  # noqa: B902 - a bad frame must not end the worker
                if self._stop.is_set():
                    return
                self.causes.error('frames', f'frame not processed: {type(exc).__name__}: {exc}')

    def _process(self, msg, measurer):
        """Decode and measure one raw Image; publish everything; update the statistics."""
        from lf_mpc_calib.measurement.focused import FocusedMeasurer
        t0 = time.perf_counter()
        pixels = self._frame_pixels(msg, measurer)
        if pixels is None:
            return
        t1 = time.perf_counter()
        focused = isinstance(measurer, FocusedMeasurer)   # rendered image, no views
        split = focused and measurer.board is not None   # corners in the points thread
        want_views = self.views_pub.get_subscription_count() > 0
        want_cloud = self.cloud_pub.get_subscription_count() > 0
        meas, frame = self._measure(msg, pixels, measurer, focused, split, want_views,
                                    want_cloud)
        t2 = time.perf_counter()
        if focused:
            self._publish_rendered(msg, pixels, meas, measurer, want_cloud)
        else:
            self._publish_central(msg, pixels, meas, measurer, want_views)
        self._publish_rays(msg, meas, measurer)
        if measurer.board is not None and not split:
            self._publish_points(msg, meas, measurer)
        t3 = time.perf_counter()
        self.causes.clear('frames')
        stages = {'convert': t1 - t0, **meas.timings,
                  'publish': t3 - t2 - meas.timings.get('views', 0.0)}
        if frame is not None:   # the points thread counts the frame when its corners are out
            self._publish_stats(stages, t3 - t0, counted=False)     # before the corners' own
            self._hand_to_points((msg, measurer, meas, frame, t0, stages))
        else:
            corners = self._corner_stats(measurer, meas, self._watch_drift(measurer, meas))
            self._publish_stats(stages, t3 - t0, corners=corners, counted=True)

    def _frame_pixels(self, msg, measurer):
        """The raw Image as a mono array less the dark frame, checked for the lenslet grid's
        size and against the white image (frame check); None, the cause named, when it cannot
        be processed."""
        pixels = self._to_mono(msg, D.IMAGE_TOPIC)
        if pixels is None:
            return None
        self.causes.clear(D.IMAGE_TOPIC)
        width, height = (int(v) for v in measurer.grid.image_size)
        if pixels.shape[:2] != (height, width):
            self.bad_images += 1
            self.causes.error('frames', f'frames are {pixels.shape[1]}x{pixels.shape[0]} px but '
                              f'the calibration\'s lenslet grid is for {width}x{height} px raw '
                              'frames: frames are skipped until they match (camera resolution '
                              'or calibration file?)')
            return None
        self._check_frame(pixels)
        return pixels

    def _measure(self, msg, pixels, measurer, focused, split, want_views, want_cloud):
        """Measure one frame with what is subscribed: with ``split`` only rendered (its corners
        are the points thread's), else in full, a conventional camera's depth outputs
        published; returns (the measurement, the rendered frame for the points thread or
        None)."""
        want_rays = self.rays_pub.get_subscription_count() > 0
        depth = {'depth': want_cloud or self.depth_pub.get_subscription_count() > 0} \
            if focused else {}
        if split:
            meas, frame = measurer.render(pixels, rays=want_rays, **depth)
        else:
            frame = None
            meas = measurer.measure(pixels, points=measurer.board is not None, rays=want_rays,
                                    all_views=want_views, **depth)
        if not focused:
            meas.timings.update(self._depth_outputs(msg, pixels, measurer, meas))
        return meas, frame

    def _publish_rendered(self, msg, pixels, meas, measurer, want_cloud):
        """A focused frame's ~/center (the rendered image, in the rendered frame) with its
        pinhole ~/camera_info, and its ~/depth, ~/depth/camera_info and ~/cloud (its time:
        stage cloud)."""
        if meas.center is None:
            return
        from std_msgs.msg import Header

        from lf_mpc_calib.ros.messages import depth_image, pinhole_camera_info
        rendered = Header(stamp=msg.header.stamp, frame_id=self.rendered_frame)
        self.center_pub.publish(_mono_image(meas.center, pixels.dtype, rendered))
        if meas.pinhole is None:
            return
        info = pinhole_camera_info(meas.pinhole.K, meas.pinhole.size,
                                   frame_id=self.rendered_frame, stamp=msg.header.stamp)
        self.info_pub.publish(info)
        if meas.depth is not None:
            self.depth_pub.publish(depth_image(meas.depth, header=rendered))
            self.depth_info_pub.publish(info)
            if want_cloud:
                top = 255 if pixels.dtype == np.uint8 else 65535
                meas.timings['cloud'] = self._focused_cloud(msg, meas, top, measurer)

    def _publish_central(self, msg, pixels, meas, measurer, want_views):
        """A conventional frame's ~/center (the rectified central view), ~/camera_info and,
        while subscribed, the ~/views mosaic (its time: stage views)."""
        from std_msgs.msg import Header

        from lf_mpc_calib.lenslet.decode import mosaic
        from lf_mpc_calib.ros.messages import camera_info
        header = Header(stamp=msg.header.stamp, frame_id=self.optical_frame)
        if meas.center is not None:
            self.center_pub.publish(_mono_image(meas.center, pixels.dtype, header))
        self.info_pub.publish(camera_info(measurer.model, measurer.view_size,
                                          frame_id=self.optical_frame,
                                          stamp=msg.header.stamp))
        if want_views:
            t_views = time.perf_counter()
            self.views_pub.publish(_mono_image(mosaic(meas.lightfield), pixels.dtype, header))
            meas.timings['views'] = time.perf_counter() - t_views

    def _publish_rays(self, msg, meas, measurer):
        """~/rays of a frame (when measured: subscribed), origins in the optical frame."""
        if meas.rays is None:
            return
        from lf_mpc_calib.ros.messages import ray_cloud
        optical = _optical_frame(measurer)             # every output in the optical frame
        rays = dataclasses.replace(meas.rays, origins=optical.points(meas.rays.origins))
        self.rays_pub.publish(ray_cloud(rays, frame_id=self.optical_frame,
                                        stamp=msg.header.stamp))

    def _publish_points(self, msg, meas, measurer):
        """~/points of a frame's corners, in the optical frame (a focused camera's at the main
        lens, :func:`_optical_frame`)."""
        from lf_mpc_calib.ros.messages import points_cloud
        self.points_pub.publish(points_cloud(
            _optical_frame(measurer).points(meas.points.reshape(-1, 3)), meas.point_ids,
            meas.rays_per_point, meas.residual_m, frame_id=self.optical_frame,
            stamp=msg.header.stamp))

    def _corner_stats(self, measurer, meas, drift):
        """The ~/stats entries of a frame's corners (also the focused tracking's cause)."""
        if meas.corner_search.startswith(('tracked', 're-acquired')):
            self.causes.clear('tracking')
        elif meas.corner_search.startswith(('full search: tracking kept',
                                            'full search running: tracking kept')):
            self.causes.error('tracking', 'corner tracking lost the board and could not '
                              're-acquire it on 2 frames (the figures: "corners" on ~/stats): '
                              'the whole frame is searched beside the stream (seconds, '
                              '"full_search_ms" on ~/stats) until the board is found again')
        corners = {'points': int(len(meas.point_ids)), 'reason': meas.reason,
                   'corners': meas.corner_search, 'full_search_ms': _full_search_ms(measurer)}
        if drift is not None:
            corners['calibration_drift'] = drift
        return corners

    def _publish_stats(self, stages, latency_s, *, corners=None, counted, center=True):
        """~/stats (and ~/rate when ``center``: a frame's center went out) of one frame;
        ``corners``: its corners' entries (None: the last ones found, the points thread's);
        ``counted``: the frame counts as processed (once its stats are in ``last_stats``)."""
        now = time.monotonic()
        with self._lock:
            if center:
                self._times.append(now)
                while len(self._times) > 2 and now - self._times[0] > 2.0:
                    self._times.popleft()
            if corners is not None:
                self._corners = corners
            corners = self._corners
            times = list(self._times)
            counts = dict(received=self.frames_received,
                          processed=self.frames_processed + int(counted),
                          dropped=self.frames_dropped, bad=self.bad_images)
            if self.points_skipped:
                counts['points_skipped'] = self.points_skipped
        rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
        stats = {'rate_hz': round(rate, 3), 'latency_ms': round(latency_s * 1e3, 2),
                 'stages_ms': {k: round(v * 1e3, 2) for k, v in stages.items()},
                 'frames': counts, **{k: v for k, v in corners.items()
                                      if k != 'calibration_drift'},
                 'problems': dict(self.causes.active)}
        stats['input'] = self.input.as_dict()
        if 'calibration_drift' in corners:
            stats['calibration_drift'] = corners['calibration_drift']
        if self.parameter_problems:
            stats['parameter_problems'] = list(self.parameter_problems)
        self.last_stats = stats
        if counted:
            with self._lock:
                self.frames_processed += 1
        if center:
            self.rate_pub.publish(self._Float32(data=float(rate)))
        import yaml
        self.stats_pub.publish(self._String(data=yaml.safe_dump(stats, sort_keys=False)))

    # ---- the focused corners, beside the next frame's render ----------------------------
    def _hand_to_points(self, item):
        """Queue a rendered frame for the points thread, newest first: a frame still waiting
        there is replaced (counted processed, its corners skipped)."""
        with self._lock:
            if self._points_pending is not None:
                self.frames_processed += 1
                self.points_skipped += 1
            self._points_pending = item
            self._points_wake.notify()

    def _points_work(self):
        while not self._stop.is_set():
            with self._lock:
                while self._points_pending is None and not self._stop.is_set():
                    self._points_wake.wait(0.5)
                if self._stop.is_set():
                    return
                item, self._points_pending = self._points_pending, None
            try:
                self._process_points(*item)
            except LFCalibError as exc:
                self.causes.error('frames', f'corners not measured: {exc}')
            except Exception as exc:  # noqa: B902 - a bad frame must not end the thread
                if self._stop.is_set():
                    return
                self.causes.error('frames', f'corners not measured: {type(exc).__name__}: '
                                  f'{exc}')

    def _process_points(self, msg, measurer, meas, frame, t0, stages):
        """Find, triangulate and publish one rendered frame's corners; its ~/stats."""
        meas = measurer.find_points(meas, frame)
        t = time.perf_counter()
        self._publish_points(msg, meas, measurer)
        corners = self._corner_stats(measurer, meas, self._watch_drift(measurer, meas))
        publish = stages['publish'] + time.perf_counter() - t
        stages = {**{k: v for k, v in stages.items() if k != 'publish'},
                  **{k: v for k, v in meas.timings.items() if k not in stages},
                  'publish': publish}
        self._publish_stats(stages, time.perf_counter() - t0, corners=corners, counted=True,
                            center=False)

    def _check_frame(self, pixels):
        """Name a frame that is (nearly) the white image or transposed against it under
        problems ('frame check'; module docstring), checked on the first frame, every
        FRAME_CHECK_EVERY-th frame and every frame while named (so a good frame clears it)."""
        with self._lock:
            white = self._white
        self._frames_seen += 1
        named = 'frame check' in self.causes.active
        if white is None or not (named or self._frames_seen % FRAME_CHECK_EVERY == 1):
            return
        from lf_mpc_calib.lenslet.frame_check import frame_warnings
        found = frame_warnings(pixels, white, sample_pixels=FRAME_CHECK_PIXELS)
        if not found:
            self._frame_warning = None
            self.causes.clear('frame check')
            return
        text = '; '.join(found)
        kind = re.sub(r'\d+(\.\d+)?', '#', text)   # the same evidence, other figures: once
        if self._frame_warning is None or self._frame_warning[0] != kind:
            self._frame_warning = (kind, f'{text} (the frame is processed anyway)')
        self.causes.error('frame check', self._frame_warning[1])

    def _watch_drift(self, measurer, meas):
        """Feed the board's corners to the calibration-drift watch
        (:mod:`lf_mpc_calib.measurement.calibration_watch`); its figures for ~/stats, or None."""
        from lf_mpc_calib.measurement.calibration_watch import CalibrationWatch
        owner, watch = self._drift
        if owner is not measurer:
            with self._lock:
                cal = self.calibration if self.measurer is measurer else None
            if cal is None:
                return None
            try:
                watch = CalibrationWatch(cal)
            except LFCalibError as exc:
                watch = f'off: {exc}'
            self._drift = (measurer, watch)
            self.causes.clear('calibration drift')
        if isinstance(watch, str):
            return watch
        if meas.observations is None:
            return None if watch.summary is None else watch.summary.as_dict()
        t0 = time.perf_counter()
        try:
            s = watch.add(meas.observations, measurer.model,
                          terms=getattr(measurer, 'terms', None))
        except LFCalibError:    # too few corners for a pose: not counted
            return None if watch.summary is None else watch.summary.as_dict()
        if s.news:
            self.causes.error('calibration drift', s.message())
        elif not s.beyond:
            self.causes.clear('calibration drift')
        return dict(s.as_dict(), ms=round((time.perf_counter() - t0) * 1e3, 2))

    # ---- depth, cloud and refocus ---------------------------------------------------------
    def _estimator(self, measurer, dtype):
        """The DepthEstimator of this measurer (built once), or None after logging why."""
        owner, est = self._depth
        if owner is not measurer:
            from lf_mpc_calib.measurement.depth import DepthEstimator
            p = self.params
            rng = None if p['depth_near'] == 0.0 and p['depth_far'] == 0.0 else \
                (p['depth_near'], p['depth_far'])
            try:
                est = DepthEstimator.for_decoder(
                    measurer.model, measurer.decoder(dtype), depth_range=rng,
                    view_step=p['depth_view_step'], window=p['depth_window'],
                    min_confidence=p['depth_min_confidence'])
            except LFCalibError as exc:
                est = str(exc)
            self._depth = (measurer, est)
        if isinstance(est, str):
            self.causes.error('depth', f'no depth: {est}')
            return None
        self.causes.clear('depth')
        return est

    def _focused_cloud(self, msg, meas, top, measurer):
        """Publish ~/cloud of a focused frame's depth (optical frame); returns its time."""
        from lf_mpc_calib.measurement.focused import rendered_depth_points
        from lf_mpc_calib.ros.messages import depth_cloud
        t0 = time.perf_counter()
        pts, uv = rendered_depth_points(meas.pinhole, meas.depth, step=self.params['cloud_step'])
        self.cloud_pub.publish(depth_cloud(
            _optical_frame(measurer).points(pts), meas.center[uv[:, 1], uv[:, 0]] / top,
            np.ones(len(pts)),
            frame_id=self.optical_frame, stamp=msg.header.stamp))
        return time.perf_counter() - t0

    def _depth_outputs(self, msg, pixels, measurer, meas):
        """Publish ~/depth, ~/cloud, ~/refocus when subscribed; returns their stage times."""
        from std_msgs.msg import Header

        from lf_mpc_calib.ros.messages import camera_info, depth_cloud, depth_image
        timings = {}
        want_depth = self.depth_pub.get_subscription_count() > 0
        want_cloud = self.cloud_pub.get_subscription_count() > 0
        header = Header(stamp=msg.header.stamp, frame_id=self.optical_frame)
        if want_depth or want_cloud:
            t0 = time.perf_counter()
            est = self._estimator(measurer, pixels.dtype)
            if est is not None:
                dm = est.estimate(meas.lightfield)
                if want_depth:
                    self.depth_pub.publish(depth_image(dm.depth, header=header))
                    self.depth_info_pub.publish(camera_info(
                        measurer.model, measurer.view_size, frame_id=self.optical_frame,
                        stamp=msg.header.stamp))
                timings['depth'] = time.perf_counter() - t0
                if want_cloud:
                    t0 = time.perf_counter()
                    pts, uv = dm.points(step=self.params['cloud_step'])
                    top = 255.0 if pixels.dtype == np.uint8 else 65535.0
                    self.cloud_pub.publish(depth_cloud(
                        pts, meas.center[uv[:, 1], uv[:, 0]] / top,
                        dm.confidence[uv[:, 1], uv[:, 0]], frame_id=self.optical_frame,
                        stamp=msg.header.stamp))
                    timings['cloud'] = time.perf_counter() - t0
        if self.refocus_pub.get_subscription_count() > 0:
            t0 = time.perf_counter()
            from lf_mpc_calib.measurement.depth import default_depth_range, refocus
            distance = self.params['refocus_distance']
            try:
                if distance == 0.0:
                    distance = 2.0 * default_depth_range(measurer.model)[0]
                image = refocus(meas.lightfield, measurer.model, distance)
            except LFCalibError as exc:
                self.causes.error('refocus', f'no refocus: {exc}')
            else:
                self.causes.clear('refocus')
                from lf_mpc_calib.ros.image_conversion import array_to_image
                encoding, top = ('mono8', 255) if pixels.dtype == np.uint8 else \
                    ('mono16', 65535)
                self.refocus_pub.publish(array_to_image(
                    np.clip(np.rint(image), 0, top).astype(pixels.dtype), encoding,
                    header=header))
            timings['refocus'] = time.perf_counter() - t0
        return timings

    def destroy_node(self):
        """Stop the worker thread, then destroy the node."""
        self._stop.set()
        if getattr(self, '_wake', None) is not None:
            with self._lock:
                self._wake.notify_all()
                self._points_wake.notify_all()
        for worker in (self._worker, getattr(self, '_points_worker', None)):
            if worker is not None and worker is not threading.current_thread():
                worker.join(timeout=10.0)
        if hasattr(getattr(self, 'measurer', None), 'close'):
            self.measurer.close(timeout=1.0)     # a focused full search beside the stream
        return super().destroy_node()


def _optical_frame(measurer):
    """The optical frame of ``measurer``'s calibration (:mod:`lf_mpc_calib.camera.optical_frame`:
    a focused camera's origin at the main lens, a conventional camera's the model's)."""
    from lf_mpc_calib.camera.optical_frame import OpticalFrame
    from lf_mpc_calib.measurement.focused import FocusedMeasurer
    focused = isinstance(measurer, FocusedMeasurer)
    return OpticalFrame.of(measurer.model, 'focused' if focused else 'conventional')


def _mono_image(values, dtype, header):
    """``values`` rounded into an Image: mono8 for a ``dtype`` uint8 frame, else mono16."""
    from lf_mpc_calib.ros.image_conversion import array_to_image
    encoding, top, out = ('mono8', 255, np.uint8) if dtype == np.uint8 else \
        ('mono16', 65535, np.uint16)
    return array_to_image(np.clip(np.rint(values), 0, top).astype(out), encoding,
                          header=header)


def _full_search_ms(measurer):
    """How long the focused measurer's last full corner search took (ms), or None."""
    seconds = getattr(getattr(measurer, 'search', None), 'last_full_search_s', None)
    return None if seconds is None else round(seconds * 1e3, 1)


def main(args=None):
    """Run the node until shut down; returns the exit code."""
    return D.run_node(DecodeNode, args)


if __name__ == '__main__':
    import sys
    sys.exit(main())
