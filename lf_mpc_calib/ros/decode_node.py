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

Publishes per processed frame (header stamp of the raw frame, frame id the optical frame):

- ``~/center`` (sensor_msgs/Image, mono8/mono16 as the input) and ``~/camera_info``: the
  rectified central view and its pinhole CameraInfo;
- ``~/views``: the mosaic of all decoded views (only while someone subscribes);
- ``~/rays`` (PointCloud2: x y z origin on the view plane, normal_x normal_y normal_z unit
  direction, intensity), decimated by ``ray_step`` pixels in views that are multiples of
  ``ray_view_step`` (only while someone subscribes);
- ``~/points`` (PointCloud2: x y z, id, rays, residual): the board corners found,
  triangulated from all the views (Eq. 2-5), in the optical frame (empty when no board);
- ``~/rate`` (std_msgs/Float32): frames processed per second (last 2 s or 10 frames);
- ``~/stats`` (std_msgs/String, YAML): rate, latency and per-stage milliseconds (decode,
  rectify, detect, triangulate, rays, publish), frame counters.

Malformed images are logged and ignored; a parameter out of range or an unreadable calibration
file stops the node at startup with its name.
"""

import collections
import threading
import time

import numpy as np

from lf_mpc_calib.errors import LFCalibError
from lf_mpc_calib.ros import defaults as D

try:
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from rclpy.node import Node
except ImportError:  # pragma: no cover - importable without ROS for docs
    Node = object

CALIBRATION_TOPIC = 'lf_calibration/calibration'


class DecodeNode(Node):
    """The decode node (module docstring); kwargs go to ``rclpy.node.Node``."""

    def __init__(self, **kwargs):
        super().__init__('lf_decoder', **kwargs)
        self._stop = threading.Event()
        self._worker = None
        try:
            self._setup()
        except Exception:
            self.destroy_node()
            raise

    # ---- setup --------------------------------------------------------------------------
    def _setup(self):
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import CameraInfo, Image, PointCloud2
        from std_msgs.msg import Float32, String

        from lf_mpc_calib.camera.board import Checkerboard

        p = D.declare_parameters(self, [
            ('calibration_file', '', 'calibration file (YAML with lenslet_grid); empty: the '
             'latched calibration_topic', None),
            ('calibration_topic', CALIBRATION_TOPIC, 'latched std_msgs/String calibration file '
             'used when calibration_file is empty', None),
            ('measure_points', True, 'find and triangulate board corners in every frame',
             None),
            ('ray_step', 8, 'pixel decimation of ~/rays', D.between(1, 4096)),
            ('ray_view_step', 4, '~/rays come from views whose i, j are multiples of this',
             D.between(1, 64)),
            ('optical_frame', '', 'frame id of the outputs; empty: the calibration file\'s',
             None),
        ] + D.BOARD_PARAMETERS + D.RAW_INPUT_PARAMETERS)
        self.params = p
        self.board = Checkerboard(p['board_cols'], p['board_rows'], p['square_size'])
        self._Image, self._CameraInfo = Image, CameraInfo
        self._Float32, self._String = Float32, String
        self._lock = threading.Lock()          # measurer, calibration and pending frame
        self._wake = threading.Condition(self._lock)
        self._pending = None                   # newest raw Image waiting to be processed
        self.calibration = None                # CalibrationFile
        self.measurer = None                   # LiveMeasurer (replaced, never mutated)
        self._white = None
        self.optical_frame = p['optical_frame'] or D.optical_frame()
        self.frames_received = 0
        self.frames_processed = 0
        self.frames_dropped = 0
        self.frames_waiting = 0                # before a calibration arrived
        self.bad_images = 0
        self.last_stats = {}
        self._times = collections.deque(maxlen=10)

        latched = D.latched_qos()
        out = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        self.center_pub = self.create_publisher(Image, '~/center', out)
        self.info_pub = self.create_publisher(CameraInfo, '~/camera_info', out)
        self.views_pub = self.create_publisher(Image, '~/views', out)
        self.rays_pub = self.create_publisher(PointCloud2, '~/rays', out)
        self.points_pub = self.create_publisher(PointCloud2, '~/points', out)
        self.rate_pub = self.create_publisher(Float32, '~/rate', out)
        self.stats_pub = self.create_publisher(String, '~/stats', out)

        group = MutuallyExclusiveCallbackGroup()
        if p['calibration_file']:
            from lf_mpc_calib.io.calibration_file import load_calibration
            try:
                cal = load_calibration(p['calibration_file'])
            except (LFCalibError, OSError) as exc:
                from lf_mpc_calib.errors import InvalidInputError
                raise InvalidInputError(
                    f"parameter 'calibration_file' = {p['calibration_file']!r}: cannot load "
                    f'it: {exc}') from exc
            self._set_calibration(cal, p['calibration_file'])
        else:
            self.create_subscription(String, p['calibration_topic'], self._on_calibration,
                                     latched, callback_group=group)
        if p['white_image_file']:
            from lf_mpc_calib.io.images import read_image
            white = read_image(p['white_image_file'])
            self._set_white(white if white.ndim == 2 else white.mean(axis=2))
        else:
            self.create_subscription(Image, D.WHITE_TOPIC, self._on_white, latched,
                                     callback_group=group)
        self.create_subscription(Image, D.IMAGE_TOPIC, self._on_image,
                                 D.image_qos(p['image_reliability']),
                                 callback_group=MutuallyExclusiveCallbackGroup())
        self._worker = threading.Thread(target=self._work, name='lf_decoder_worker',
                                        daemon=True)
        self._worker.start()
        self.get_logger().info(
            f'calibration from {p["calibration_file"] or p["calibration_topic"]}, white from '
            f'{p["white_image_file"] or D.WHITE_TOPIC}, views {tuple(p["views"])}, board '
            f'{self.board.cols}x{self.board.rows}')

    # ---- calibration and white ----------------------------------------------------------
    def _set_calibration(self, cal, source):
        from lf_mpc_calib.measurement.live import LiveMeasurer
        measurer = LiveMeasurer.from_calibration(
            cal, board=self.board if self.params['measure_points'] else None,
            views=tuple(int(v) for v in self.params['views']),
            ray_step=self.params['ray_step'], ray_view_step=self.params['ray_view_step'])
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
        m = cal.model
        self.get_logger().info(
            f'calibration from {source}: k_i {m.k_i:.4g}, k_u {m.k_u:.4g}, lenslet grid '
            f'{cal.lenslet_grid.shape[0]}x{cal.lenslet_grid.shape[1]}, frame '
            f'{self.optical_frame}')

    def _on_calibration(self, msg):
        from lf_mpc_calib.io.calibration_file import loads
        try:
            cal = loads(msg.data)
            self._set_calibration(cal, self.params['calibration_topic'])
        except LFCalibError as exc:
            self.get_logger().error(f'ignoring calibration on '
                                    f'{self.params["calibration_topic"]}: {exc}')

    def _to_mono(self, msg, what):
        from lf_mpc_calib.ros.image_conversion import image_to_array, to_mono
        try:
            return to_mono(image_to_array(msg, max_pixels=self.params['max_image_pixels']),
                           msg.encoding)
        except LFCalibError as exc:
            self.bad_images += 1
            self.get_logger().error(f'ignoring malformed {what} image: {exc}')
            return None

    def _set_white(self, white):
        with self._lock:
            self._white = white
            measurer = self.measurer
        if measurer is None:
            return
        from lf_mpc_calib.measurement.live import LiveMeasurer
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
    def _on_image(self, msg):
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
                if self.frames_waiting == 1:
                    self.get_logger().warning('frames arrive before any calibration: waiting '
                                              f'for {self.params["calibration_topic"]}')
                continue
            try:
                self._process(msg, measurer)
            except LFCalibError as exc:
                self.bad_images += 1
                self.get_logger().error(f'frame not processed: {exc}')
            except Exception as exc:  # noqa: B902 - a bad frame must not end the worker
                if self._stop.is_set():
                    return
                self.get_logger().error(f'frame not processed: {type(exc).__name__}: {exc}')

    def _process(self, msg, measurer):
        """Decode and measure one raw Image; publish everything; update the statistics."""
        from std_msgs.msg import Header

        from lf_mpc_calib.lenslet.decode import mosaic
        from lf_mpc_calib.ros.image_conversion import array_to_image
        from lf_mpc_calib.ros.messages import camera_info, points_cloud, ray_cloud
        t0 = time.perf_counter()
        pixels = self._to_mono(msg, D.IMAGE_TOPIC)
        if pixels is None:
            return
        t1 = time.perf_counter()
        want_rays = self.rays_pub.get_subscription_count() > 0
        want_views = self.views_pub.get_subscription_count() > 0
        meas = measurer.measure(pixels, points=measurer.board is not None, rays=want_rays)
        t2 = time.perf_counter()

        header = Header(stamp=msg.header.stamp, frame_id=self.optical_frame)
        encoding, top = ('mono8', 255) if pixels.dtype == np.uint8 else ('mono16', 65535)
        dtype = np.uint8 if top == 255 else np.uint16

        def image(values):
            return array_to_image(np.clip(np.rint(values), 0, top).astype(dtype), encoding,
                                  header=header)

        self.center_pub.publish(image(meas.center))
        self.info_pub.publish(camera_info(measurer.model, measurer.view_size,
                                          frame_id=self.optical_frame,
                                          stamp=msg.header.stamp))
        if want_views:
            self.views_pub.publish(image(mosaic(meas.lightfield)))
        if meas.rays is not None:
            self.rays_pub.publish(ray_cloud(meas.rays, frame_id=self.optical_frame,
                                            stamp=msg.header.stamp))
        if measurer.board is not None:
            self.points_pub.publish(points_cloud(
                meas.points, meas.point_ids, meas.rays_per_point, meas.residual_m,
                frame_id=self.optical_frame, stamp=msg.header.stamp))
        t3 = time.perf_counter()

        now = time.monotonic()
        with self._lock:
            self.frames_processed += 1
            self._times.append(now)
            while len(self._times) > 2 and now - self._times[0] > 2.0:
                self._times.popleft()
            times = list(self._times)
            counts = dict(received=self.frames_received, processed=self.frames_processed,
                          dropped=self.frames_dropped, bad=self.bad_images)
        rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
        stages = {'convert': t1 - t0, **meas.timings, 'publish': t3 - t2}
        stats = {'rate_hz': round(rate, 3), 'latency_ms': round((t3 - t0) * 1e3, 2),
                 'stages_ms': {k: round(v * 1e3, 2) for k, v in stages.items()},
                 'frames': counts, 'points': int(len(meas.point_ids)),
                 'reason': meas.reason}
        self.last_stats = stats
        self.rate_pub.publish(self._Float32(data=float(rate)))
        import yaml
        self.stats_pub.publish(self._String(data=yaml.safe_dump(stats, sort_keys=False)))

    def destroy_node(self):
        """Stop the worker thread, then destroy the node."""
        self._stop.set()
        if getattr(self, '_wake', None) is not None:
            with self._lock:
                self._wake.notify_all()
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join(timeout=10.0)
        return super().destroy_node()


def main(args=None):
    """Run the node until shut down; returns the exit code."""
    return D.run_node(DecodeNode, args)


if __name__ == '__main__':
    import sys
    sys.exit(main())
