"""
``lf_sim_camera``: a simulated light-field camera looking at a checkerboard held by a robot.

Renders raw frames with the core's optics simulator (:mod:`lf_mpc_calib.simulation`) of a
checkerboard (``board_cols``, ``board_rows``, ``square_size``; 0: the preset's capture board,
:func:`lf_mpc_calib.simulation.dataset.capture_board`: a conventional camera's default board,
a focused camera's the board ``simulate`` renders, filling most of the view at the nearest
pose), or with ``board_type`` charuco a ChArUco board of that size (``dictionary``,
``marker_size``, ``charuco_layout``: the calibration node's parameters, OpenCV's texture), at
a sequence of poses and publishes them at a steady rate; each
pose is rendered once and cached (``samples`` rays per pixel; 0: ``simulate``'s, 4 or
FOCUSED_SAMPLES for a focused camera); with ``render_ahead`` every pose's frame is rendered in
order in a worker process from the start (:mod:`lf_mpc_calib.simulation.frame_pool`: the same
frames, ready on a second core while the first ones are processed). Publishes (relative
names, so it connects to the other nodes in its namespace):

- ``image_raw`` (sensor_msgs/Image, mono8 or mono16, ``rate`` Hz, frame ``<camera>_optical_frame``)
- ``white_image`` (latched): the white image of the same camera
- ``~/dark_image`` (latched, realistic sensor only): a dark frame of the same sensor (black
  level, hot pixels, read noise), as a user captures one with the lens capped; save it
  and give it to the other nodes as ``dark_image_file`` (``demo --ros`` does)
- ``~/ground_truth`` (latched std_msgs/String): the ground-truth calibration file (every
  pose, frames of ``camera_name``)
- ``/tf_static``: the current board pose as ``<camera>_true_board`` in the optical frame a
  calibration reports, where the decode node's ``~/points`` are
  (:func:`lf_mpc_calib.simulation.planning_scene.in_optical_frame`: conventional, the
  calibration's axis signs, a half turn about the axis for the Lytro preset; focused, origin
  at the main lens, every board at z > 0), so that the two compare directly. The poses the
  node holds (``poses``, :attr:`rvecs`, :attr:`tvecs`, :meth:`true_pose_at`) and the ground
  truth's model are in the simulated optics' own frame, the truth's MPC frame (a focused
  camera's z counts from the plane conjugate to the micro-lenses); the ground-truth file
  holds its poses as every calibration file does (focused: the optical frame)

Scene (``scene``): 'board', the board alone on a grey background, or 'planes', textured
planes at several depths and slants with the board among them
(:func:`lf_mpc_calib.simulation.scene.planes_scene`, one drawn per pose from ``seed``; the
board at its pose from ``poses`` when given, else where the scene put it; conventional
presets). With 'planes' it also publishes ``~/depth_truth`` (latched sensor_msgs/Image
32FC1): the ground-truth depth of the rectified central view of the pose shown, metres along
the optical axis, NaN where no surface (:func:`lf_mpc_calib.simulation.scene.depth_truth`).

Arm mode (``arm`` = eye-in-hand: the board fixed in the world, the camera on a simulated arm;
eye-to-hand: the camera fixed, the board in the gripper; :mod:`lf_mpc_calib.simulation.arm`):
the arm is driven to the base -> tool pose that shows the board at each pose, published on
``/tf`` as ``base_frame`` -> ``tool_frame`` with the stamp of every frame (just before it); the
mount is known only to the ground truth (its ``hand_eye`` key). ``~/next_pose`` answers once
the arm has moved and come to rest (``settle_time`` s on the new pose, frames going on).

Live mode (``motion_frames`` N > 0, or :meth:`SimCameraNode.start_motion` in-process): each
pose is played as a loop of N frames of the board drifting slowly around it (a circle of
``motion_amplitude`` m sideways and 1 % of its distance in depth per loop), rendered once per
pose, so the frames change at ``rate`` Hz (camera rate) as on a moving arm; the true board
pose of every frame goes out on ``/tf`` (``<camera>_true_board``, the frame's stamp, in the
optical frame as above) instead of ``/tf_static``, and :meth:`SimCameraNode.true_pose_at`
gives it by stamp in-process (in the optics' frame).

With ``follow_suggestions`` the board goes to each pose received on ``suggestion_topic``
(geometry_msgs/PoseStamped in the optical frame as a calibration reports it, conventional:
k_i, k_u > 0; focused: origin at the main lens; taken into the optics' frame,
:func:`~lf_mpc_calib.simulation.planning_scene.in_optics_frame`; default the calibration
node's latched
``lf_calibration/suggested_pose``): the pose is appended to the poses and to the ground truth
(republished), rendered and shown (``followed`` counts them); 'board' scene. In arm mode the
arm is driven there through its true chain (the tool pose that shows the board at that pose)
and ``followed`` counts it once the arm has rested ``settle_time`` s.

Service ``~/next_pose`` (std_srvs/Trigger) advances to the next pose (wrapping) and answers
with its index once its frame is rendered; ``auto_advance_period`` > 0 advances on a timer.
Poses: ``poses`` (6 N doubles: rvec, tvec per pose, board -> camera, metres, in the optics'
frame: a focused camera's tz from the plane conjugate to its micro-lenses) or ``num_poses``
from ``seed``: a careful user's set (boards at 0.6-1.5 x the focus distance alternating near
and far, tilted about both axes in turn; a focused camera's only on the side of the plane
conjugate to its micro-lenses where they focus:
:func:`lf_mpc_calib.simulation.dataset.capture_poses`); with ``partial`` each slid 30-60 %
out of view into an image corner or side
(:func:`lf_mpc_calib.simulation.partial_poses.partial_poses`, as ``simulate --partial``).
"""

import dataclasses
import threading

import numpy as np

from lf_mpc_calib.ros import defaults as D

try:
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from rclpy.node import Node
except ImportError:  # pragma: no cover - the module is importable without ROS for docs
    Node = object


class SimCameraNode(Node):
    """The simulated camera node (module docstring); kwargs go to ``rclpy.node.Node``."""

    NODE_NAME = 'lf_sim_camera'

    def __init__(self, **kwargs):
        super().__init__(self.NODE_NAME, **kwargs)
        try:
            self._setup()
        except Exception:
            self.destroy_node()
            raise

    def _setup(self):
        """Declare the parameters, build the camera, board, poses and ground truth, publish
        the latched topics and the first frame, and start the timers and services."""
        from lf_mpc_calib.io.calibration_file import dumps
        from lf_mpc_calib.simulation.dataset import FOCUSED_SAMPLES, capture_board
        from lf_mpc_calib.simulation.optics import IDEAL, preset

        p = self._declare_parameters()
        self.camera = preset(p['preset'], scale=p['scale'],
                             **(IDEAL if p['ideal_sensor'] else {}))
        if p['samples'] == 0:
            p['samples'] = FOCUSED_SAMPLES if self.camera.camera_type == 'focused' else 4
        self.params = p
        self.board = self._board(p, capture_board)
        self._poses(p)
        self._frame_state(p)
        self._ground_truth(p)
        self._create_publishers()
        self._publish_white_and_dark(p)
        self.truth_pub.publish(self._String(data=dumps(self.truth)))
        self.live_tf_pub = None
        if p['motion_frames'] > 0:
            self.start_motion(p['motion_frames'], p['motion_amplitude'])
        self._set_pose(0)
        self._serve(p)
        self.get_logger().info(
            f'{self.camera.name} x{p["scale"]} {self.camera.sensor.width}x'
            f'{self.camera.sensor.height} px, board {D.describe_board(self.board)}, '
            f'{len(self.rvecs)} poses{" (partial views)" if p["partial"] else ""}, scene '
            f'{p["scene"]}, '
            f'{p["samples"]} rays per pixel, {p["encoding"]} at {p["rate"]} Hz')

    def _declare_parameters(self):
        """The node's parameters, declared and checked: {name: value}, ``camera_name``
        resolved from the namespace when ''."""
        from lf_mpc_calib.simulation.dataset import FOCUSED_SAMPLES
        from lf_mpc_calib.simulation.optics import PRESETS
        p = D.declare_parameters(self, [
            ('preset', D.SIM_PRESET, 'camera preset of the simulator (simulation.optics.PRESETS)',
             D.one_of(*PRESETS)),
            ('scale', D.SIM_SCALE, 'sensor crop factor in (0, 1]',
             lambda v: None if 0 < v <= 1 else 'expected 0 < scale <= 1'),
            ('seed', 0, 'seed of the random poses and the sensor noise', None),
            ('num_poses', 12, 'poses when none are given', D.at_least(1)),
            ('poses', [0.0], 'board poses, 6 doubles each (rvec, tvec; board -> camera, m); '
             '[0.0] or empty: a careful user\'s set from seed',
             lambda v: None if len(v) <= 1 or len(v) % 6 == 0 else 'expected 6 N values'),
            ('encoding', 'mono8', 'image encoding of image_raw', D.one_of('mono8', 'mono16')),
            ('rate', 2.0, 'frames per second on image_raw', D.positive),
            ('auto_advance_period', 0.0, 'seconds per pose when > 0 (0: only ~/next_pose)',
             D.at_least(0.0)),
            ('board_cols', 0, "inner corners along the board rows; 0 (with board_rows and "
             "square_size 0): the preset's capture board", D.at_least(0)),
            ('board_rows', 0, 'inner corners along the board columns; 0: the capture board',
             D.at_least(0)),
            ('square_size', 0.0, 'board square side in metres; 0: the capture board',
             D.at_least(0.0)),
        ] + D.CHARUCO_PARAMETERS + [
            ('partial', False, 'poses from seed pushed 30-60 % out of view into the image '
             'corners and sides, the same depths and tilts (simulate --partial; for '
             'board_type charuco)', None),
            ('samples', 0, 'rays per pixel (renderer); 0: the preset\'s, 4 (focused: '
             f'{FOCUSED_SAMPLES}, its detector reads the micro-images up to their rims)',
             D.at_least(0)),
            ('noise', -1.0, 'sensor noise sigma (fraction of full scale); < 0: the preset\'s',
             None),
            ('ideal_sensor', False, 'an ideal camera: the irradiance itself, every lens on '
             "its lattice point (false: the presets' realistic sensor, with shot and read "
             'noise, PRNU, black level, hot pixels and dust, and lenses off their lattice '
             'points and focal lengths; docs/simulation.md)', None),
            ('camera_name', '', "camera name (frame ids); '': from the namespace (cam1 in "
             f'/cam1), {D.CAMERA_NAME} at the root', None),
            ('scene', 'board', "what the camera sees: 'board' or 'planes' (textured planes at "
             'several depths with the board; conventional presets)', D.one_of('board', 'planes')),
            ('arm', '', "'' (a hand-held board), eye-in-hand or eye-to-hand: a simulated "
             'robot arm', D.one_of('', 'eye-in-hand', 'eye-to-hand')),
            ('base_frame', 'base_link', 'arm mode: the robot base frame', None),
            ('tool_frame', 'tool0', 'arm mode: the robot tool frame', None),
            ('settle_time', 0.3, 'arm mode: seconds ~/next_pose waits for the arm to rest',
             D.at_least(0.0)),
            ('motion_frames', 0, 'live mode: frames of the board drifting around each pose, '
             'played in a loop at rate Hz (0: a still board)', D.at_least(0)),
            ('motion_amplitude', 0.002, 'live mode: metres the board drifts sideways',
             D.at_least(0.0)),
            ('render_ahead', False, "render every pose's frame in order in a worker process "
             "from the start ('board' scene), so that on a second core the next frames are "
             'ready while the first are processed (simulation.frame_pool)', None),
            ('follow_suggestions', False, 'move the board to each pose received on '
             'suggestion_topic (a closed loop with the calibration node)', None),
            ('suggestion_topic', 'lf_calibration/suggested_pose', 'follow_suggestions: the '
             'geometry_msgs/PoseStamped board poses (optical frame) to show', None),
        ])
        p['camera_name'] = D.camera_name_of(self, p['camera_name'])
        return p

    def _poses(self, p):
        """The poses shown: ``self.rvecs``, ``self.tvecs`` (N, 3; board -> camera in the optics'
        frame) from ``poses``, else a careful user's set from ``seed`` (``partial``: slid partly
        out of view); ``self.scenes``: one planes scene per pose ('planes'), else None."""
        from lf_mpc_calib.simulation.dataset import capture_board, capture_poses
        poses = np.asarray(p['poses'], dtype=float)
        self.scenes = None
        if p['scene'] == 'planes':
            self._planes(poses)
        elif poses.size >= 6:
            self.rvecs, self.tvecs = poses.reshape(-1, 6)[:, :3], poses.reshape(-1, 6)[:, 3:]
        elif p['partial']:      # the careful user's set slid partly out of view
            from lf_mpc_calib.simulation.partial_poses import partial_poses
            self.rvecs, self.tvecs = partial_poses(
                self.camera, self.board, p['num_poses'], rng=np.random.default_rng(p['seed']),
                base_board=capture_board(self.camera))
        else:   # both sides of the focus distance (focused: where the micro-lenses focus)
            self.rvecs, self.tvecs = capture_poses(self.camera, self.board, p['num_poses'],
                                                   rng=np.random.default_rng(p['seed']))

    def _frame_state(self, p):
        """What the frames are made and sent with: frame id, bit depth, the frame cache, the
        pose shown, live mode's state and, with ``render_ahead`` ('board' scene), the worker
        process rendering every pose's frame in order (``self._pool``; else None)."""
        from sensor_msgs.msg import Image
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage

        from lf_mpc_calib.ros.image_conversion import array_to_image
        from lf_mpc_calib.simulation.render import quantize
        self.frame_id = D.optical_frame(p['camera_name'])
        self.bits = 8 if p['encoding'] == 'mono8' else 16
        self._quantize, self._array_to_image = quantize, array_to_image
        self._lock = threading.Lock()
        self._cache = {}
        self._index = 0
        self._motion = None                     # live mode: (msgs, rvecs, tvecs) of the pose
        self._motion_frames = 0
        self._phase = 0
        self._sent = {}                         # live mode: stamp ns -> (rvec, tvec) sent
        self._Image, self._TFMessage, self._String = Image, TFMessage, String
        self._pool = None                       # render_ahead: the frames' worker process
        if p['render_ahead'] and self.scenes is None:
            from lf_mpc_calib.simulation.frame_pool import FramePool
            self._pool = FramePool(self.camera, self.board, self.rvecs, self.tvecs,
                                   samples=p['samples'], seed=p['seed'], noise=self._noise(),
                                   bits=self.bits)

    def _ground_truth(self, p):
        """``self.truth``: the ground-truth calibration file of every pose (frames of
        ``camera_name``); in arm mode also ``self.arm`` (else None), the robot poses
        ``self.robot_rvecs``, ``self.robot_tvecs`` (N, 3) and the mount in the truth."""
        from lf_mpc_calib.io.calibration_file import default_frames
        from lf_mpc_calib.simulation.dataset import ground_truth_file
        truth = ground_truth_file(self.camera, self.rvecs, self.tvecs)
        self.truth = dataclasses.replace(truth, frames=default_frames(p['camera_name']))
        self.arm = None                          # the simulated arm's ground truth
        if p['arm']:
            from lf_mpc_calib.simulation.arm import default_arm
            self.arm = default_arm(p['arm'], base_frame=p['base_frame'],
                                   tool_frame=p['tool_frame'])
            self.robot_rvecs, self.robot_tvecs = self.arm.robot_poses(self.rvecs, self.tvecs)
            self.truth = dataclasses.replace(
                self.truth, hand_eye=self.arm.truth_dict(self.truth.frames['optical']))

    def _create_publishers(self):
        """image_raw, the latched white image, ground truth, dark frame and board pose on
        /tf_static, ~/depth_truth ('planes' scene; else None) and the arm's /tf (else None)."""
        from sensor_msgs.msg import Image
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage
        latched = D.latched_qos()
        self.image_pub = self.create_publisher(Image, D.IMAGE_TOPIC, 2)
        self.white_pub = self.create_publisher(Image, D.WHITE_TOPIC, latched)
        self.truth_pub = self.create_publisher(String, '~/ground_truth', latched)
        self.tf_pub = self.create_publisher(TFMessage, '/tf_static', latched)
        self.depth_truth_pub = None if self.scenes is None else \
            self.create_publisher(Image, '~/depth_truth', latched)
        self.arm_pub = self.create_publisher(TFMessage, '/tf', 100) if self.arm else None
        self.dark_pub = self.create_publisher(Image, '~/dark_image', latched)

    def _serve(self, p):
        """The frame timer at ``rate``, ~/next_pose, the suggestions' subscription
        (``follow_suggestions``) and the ``auto_advance_period`` timer; ``self.followed`` = 0."""
        from std_srvs.srv import Trigger
        self._render_group = MutuallyExclusiveCallbackGroup()
        self.create_timer(1.0 / p['rate'], self._publish_frame,
                          callback_group=MutuallyExclusiveCallbackGroup())
        self.create_service(Trigger, '~/next_pose', self._on_next_pose,
                            qos_profile=D.service_qos(), callback_group=self._render_group)
        self.followed = 0                       # suggestions shown (follow_suggestions)
        if p['follow_suggestions']:
            self._follow(p)
        if p['auto_advance_period'] > 0:
            self.create_timer(p['auto_advance_period'], self._advance,
                              callback_group=self._render_group)

    def _publish_white_and_dark(self, p):
        """The latched white image and, for a realistic sensor, its dark frame
        (``self.dark``, uint (H, W); None on an ideal sensor): what a user captures with a
        diffuser and with the lens capped, for ``dark_image_file``."""
        from lf_mpc_calib.ros.image_conversion import array_to_image
        from lf_mpc_calib.simulation.render import (
            WHITE_SAMPLES, dark_frame, quantize, render_white)
        stamp = self.get_clock().now().to_msg()
        white = quantize(render_white(self.camera, samples=max(p['samples'], WHITE_SAMPLES)),
                         self.bits)
        self.white_msg = array_to_image(white, p['encoding'])
        self.white_msg.header.frame_id, self.white_msg.header.stamp = self.frame_id, stamp
        self.white_pub.publish(self.white_msg)
        dark = dark_frame(self.camera, white.shape, p['seed'])
        self.dark = None if dark is None else quantize(dark, self.bits)
        if self.dark is not None:
            msg = array_to_image(self.dark, p['encoding'])
            msg.header.frame_id, msg.header.stamp = self.frame_id, stamp
            self.dark_pub.publish(msg)

    def _board(self, p, capture_board):
        """The board of ``board_cols``, ``board_rows``, ``square_size``, or the preset's
        capture board when all three are 0; a ChArUco one of that size with ``board_type``
        charuco (``dictionary``, ``marker_size``, ``charuco_layout``)."""
        from lf_mpc_calib.errors import InvalidInputError
        from lf_mpc_calib.simulation.optics import CharucoBoard, Checkerboard
        given = (p['board_cols'], p['board_rows'], p['square_size'])
        if not any(given):
            board = capture_board(self.camera)
            if p['board_type'] != 'charuco':
                return board
            return D.board_of(dict(p, board_cols=board.cols, board_rows=board.rows,
                                   square_size=board.square), Checkerboard, CharucoBoard)
        if given[0] < 2 or given[1] < 2 or not given[2] > 0:
            raise InvalidInputError(
                "parameters 'board_cols', 'board_rows', 'square_size': all three 0 (the "
                'capture board) or a board of at least 2 x 2 inner corners and squares > 0 m, '
                f'got {given[0]} x {given[1]} x {given[2]:g} m')
        return D.board_of(p, Checkerboard, CharucoBoard)

    def _follow(self, p):
        """Subscribe to the suggested poses ('board' scene only)."""
        from geometry_msgs.msg import PoseStamped

        from lf_mpc_calib.errors import InvalidInputError
        from lf_mpc_calib.ros.guard import guarded_callback
        if p['scene'] != 'board':
            raise InvalidInputError(
                "parameter 'follow_suggestions': board poses are followed with scene 'board', "
                f"got {p['scene']!r}")
        self.create_subscription(PoseStamped, p['suggestion_topic'],
                                 guarded_callback(self, 'suggested pose', self._on_suggestion),
                                 D.latched_qos(), callback_group=self._render_group)

    def _on_suggestion(self, msg):
        """Show the board at a suggested pose: appended to the poses (and the ground truth),
        rendered, shown."""
        from lf_mpc_calib.errors import InvalidInputError
        from lf_mpc_calib.io.calibration_file import dumps
        from lf_mpc_calib.ros.messages import rotation_vector_from_quaternion
        from lf_mpc_calib.simulation.dataset import ground_truth_file
        from lf_mpc_calib.simulation.planning_scene import in_optics_frame
        if msg.header.frame_id != self.frame_id:
            raise InvalidInputError(f'suggested pose in frame {msg.header.frame_id!r}, '
                                    f'expected {self.frame_id!r}')
        o, t = msg.pose.orientation, msg.pose.position
        rvec = rotation_vector_from_quaternion([o.x, o.y, o.z, o.w])
        tvec = asked = np.array([t.x, t.y, t.z])
        # in front of the camera: z > 0 in the optical frame (a focused camera's MPC frame has
        # boards nearer than the plane conjugate to the micro-lenses at z < 0)
        if not (np.all(np.isfinite(rvec)) and np.all(np.isfinite(tvec)) and tvec[2] > 0):
            raise InvalidInputError(f'suggested pose t = {tvec} m: expected finite values and '
                                    'the board in front of the camera')
        rvec, tvec = in_optics_frame(self.truth.model, rvec, tvec, self.camera.camera_type)
        self.rvecs = np.vstack([self.rvecs, rvec])
        self.tvecs = np.vstack([self.tvecs, tvec])
        if self.arm is not None:                # the arm's true chain takes the board there
            w, t = self.arm.robot_poses(rvec, tvec)
            self.robot_rvecs = np.vstack([self.robot_rvecs, w])
            self.robot_tvecs = np.vstack([self.robot_tvecs, t])
        truth = ground_truth_file(self.camera, self.rvecs, self.tvecs)
        self.truth = dataclasses.replace(truth, frames=self.truth.frames)
        self._advance_to(len(self.rvecs) - 1)
        self.truth_pub.publish(self._String(data=dumps(self.truth)))
        if self.arm is not None:                # the arm comes to rest; frames go on
            import time
            time.sleep(self.params['settle_time'])
        self.followed += 1
        self.get_logger().info(f'board moved to the suggested pose {len(self.rvecs) - 1}: '
                               f't = {np.round(asked, 4).tolist()} m (optical frame)')

    def _planes(self, poses):
        """One planes scene per pose (rvecs, tvecs: the board's there, or ``poses``')."""
        from lf_mpc_calib.errors import InvalidInputError
        from lf_mpc_calib.simulation.scene import BoardSurface, Scene, planes_scene
        if self.camera.camera_type != 'conventional':
            raise InvalidInputError(f"parameter 'scene' = 'planes' needs a conventional camera "
                                    f'preset (depth truth of the central view), got '
                                    f'{self.params["preset"]!r} ({self.camera.camera_type})')
        given = poses.reshape(-1, 6) if poses.size >= 6 else None
        count = len(given) if given is not None else self.params['num_poses']
        scenes = []
        for k in range(count):
            scene = planes_scene(self.camera, np.random.default_rng([self.params['seed'], k]),
                                 board=self.board)
            if given is not None:
                surfaces = [BoardSurface(self.board, given[k, :3], given[k, 3:])
                            if s is scene.board else s for s in scene.surfaces]
                scene = Scene(tuple(surfaces), scene.background)
            scenes.append(scene)
        self.scenes = scenes
        self.rvecs = np.array([s.board.rvec for s in scenes])
        self.tvecs = np.array([s.board.tvec for s in scenes])
        self._depth_cache = {}

    def depth_truth(self, index):
        """Ground-truth depth (rows, cols) float32 of pose ``index`` ('planes' scene only)."""
        from lf_mpc_calib.simulation.scene import depth_truth
        index = int(index) % len(self.rvecs)
        if index not in self._depth_cache:
            self._depth_cache[index] = depth_truth(self.camera, self.scenes[index])
        return self._depth_cache[index]

    @property
    def pose_index(self):
        """Index of the pose now shown."""
        return self._index

    def frame(self, index):
        """The quantized raw frame (H, W) uint8/uint16 of pose ``index``, rendered once (with
        ``render_ahead``: by the worker process, the same frame)."""
        from lf_mpc_calib.simulation.frame_pool import render_frame
        from lf_mpc_calib.simulation.render import render_scene
        index = int(index) % len(self.rvecs)
        if index not in self._cache:
            if self.scenes is not None:
                rng = np.random.default_rng([self.params['seed'], index])
                raw = render_scene(self.camera, self.scenes[index],
                                   samples=self.params['samples'], rng=rng,
                                   noise=self._noise())
                self._cache[index] = self._quantize(raw, self.bits)
            elif self._pool is not None and index < len(self._pool):
                self._cache[index] = self._pool.frame(index)
            else:
                self._cache[index] = render_frame(
                    self.camera, self.board, self.rvecs[index], self.tvecs[index],
                    samples=self.params['samples'], seed=self.params['seed'], index=index,
                    noise=self._noise(), bits=self.bits)
        return self._cache[index]

    def _noise(self):
        """The sensor noise sigma of the frames (None: the preset's)."""
        return self.params['noise'] if self.params['noise'] >= 0 else None

    def destroy_node(self):
        """Stop the render worker (``render_ahead``), then destroy the node."""
        if getattr(self, '_pool', None) is not None:
            self._pool.close()
        super().destroy_node()

    def start_motion(self, frames, amplitude=0.002, samples=None):
        """Live mode from now on (module docstring): ``frames`` per pose, drifting
        ``amplitude`` m sideways, rendered at ``samples`` rays per pixel (None: the node's
        ``samples``); the current pose's frames are rendered here unless queued before
        (:meth:`queue_motion`)."""
        self._check_motion()
        if self.live_tf_pub is None:
            self.live_tf_pub = self.create_publisher(self._TFMessage, '/tf', 100)
        self._motion_frames, self._amplitude = int(frames), float(amplitude)
        self._motion_samples = self.params['samples'] if samples is None else int(samples)
        if hasattr(self, '_msg'):
            self._set_pose(self._index)

    def queue_motion(self, index, frames, amplitude=0.002, samples=None):
        """With ``render_ahead``, have the worker render the live loop of pose ``index`` (as
        :meth:`start_motion` would, the same frames) after the poses' frames, so that a later
        ``start_motion`` on that pose finds it ready; without a worker, nothing."""
        self._check_motion()
        samples = self.params['samples'] if samples is None else int(samples)
        index = int(index) % len(self.rvecs)
        if self._pool is not None:
            rvecs, tvecs = self.motion_poses(index, frames, amplitude)
            self._pool.queue_loop(_motion_key(index, frames, amplitude, samples),
                                  rvecs, tvecs, samples=samples, index=index)

    def _check_motion(self):
        if self.scenes is not None or self.arm is not None:
            from lf_mpc_calib.errors import InvalidInputError
            raise InvalidInputError('live mode (motion_frames) needs the board scene without '
                                    'an arm')

    def motion_poses(self, index, frames=None, amplitude=None):
        """(rvecs (N, 3), tvecs (N, 3)) of the live loop around pose ``index`` (N ``frames``,
        ``amplitude`` m; None: live mode's)."""
        n = self._motion_frames if frames is None else int(frames)
        amplitude = self._amplitude if amplitude is None else float(amplitude)
        a = 2 * np.pi * np.arange(n) / n
        t = self.tvecs[index]
        depth = 0.01 * t[2]
        shift = np.column_stack([amplitude * np.cos(a), amplitude * np.sin(a),
                                 depth * np.sin(a)])
        return np.repeat(self.rvecs[index][None], n, axis=0), t + shift

    def _motion_loop(self, index):
        """The live loop of pose ``index``: (messages, rvecs, tvecs), rendered once (by the
        worker when queued there: :meth:`queue_motion`)."""
        from lf_mpc_calib.simulation.frame_pool import render_frame
        samples = getattr(self, '_motion_samples', self.params['samples'])
        key = _motion_key(index, self._motion_frames, self._amplitude, samples)
        if key not in self._cache:
            rvecs, tvecs = self.motion_poses(index)
            frames = self._pool.loop(key) if self._pool is not None else None
            if frames is None:
                frames = [render_frame(self.camera, self.board, rvecs[k], tvecs[k],
                                       samples=samples, seed=self.params['seed'],
                                       index=(index, k), noise=self._noise(), bits=self.bits)
                          for k in range(len(rvecs))]
            msgs = []
            for raw in frames:
                msg = self._array_to_image(raw, self.params['encoding'])
                msg.header.frame_id = self.frame_id
                msgs.append(msg)
            self._cache[key] = (msgs, rvecs, tvecs)
            self.get_logger().info(f'live loop of pose {index}: {len(msgs)} frames rendered')
        return self._cache[key]

    def true_pose_at(self, stamp_ns):
        """(rvec, tvec) of the board in the frame sent with ``stamp_ns`` (live mode), or
        None when no such frame was sent (the last 1000 are kept)."""
        with self._lock:
            return self._sent.get(int(stamp_ns))

    def _set_pose(self, index):
        index = int(index) % len(self.rvecs)
        motion = self._motion_loop(index) if self._motion_frames else None
        msg = None                  # live mode: the loop's frames go out, not the still one
        if motion is None:
            msg = self._array_to_image(self.frame(index), self.params['encoding'])
            msg.header.frame_id = self.frame_id
        with self._lock:
            self._index, self._msg, self._motion, self._phase = index, msg, motion, 0
        if motion is not None:      # the true board goes out with every frame on /tf
            return index
        self.tf_pub.publish(self._TFMessage(transforms=[self._true_board_tf(
            self.rvecs[index], self.tvecs[index], self.get_clock().now().to_msg())]))
        if self.depth_truth_pub is not None:
            from std_msgs.msg import Header

            from lf_mpc_calib.ros.messages import depth_image
            self.depth_truth_pub.publish(depth_image(self.depth_truth(index), header=Header(
                stamp=self.get_clock().now().to_msg(), frame_id=self.frame_id)))
        return index

    def _true_board_tf(self, rvec, tvec, stamp):
        """The ``<camera>_true_board`` transform of a board at (rvec, tvec) (optics' frame):
        in the optical frame a calibration reports (module docstring)."""
        from lf_mpc_calib.ros.messages import transform_stamped
        from lf_mpc_calib.simulation.planning_scene import in_optical_frame
        rv, tv = in_optical_frame(self.truth.model, rvec, tvec, self.camera.camera_type)
        return transform_stamped(rv, tv, parent=self.frame_id,
                                 child=f'{self.params["camera_name"]}_true_board', stamp=stamp)

    def _advance(self):
        return self._advance_to(self._index + 1)

    def _advance_to(self, index):
        index = self._set_pose(index)
        # the new pose's first frame goes out before ~/next_pose answers, so a depth-1
        # subscriber holds it (not an older frame) when the caller asks for the next frame
        self._publish_frame()
        return index

    def _publish_frame(self):
        # under the lock to the end: a pose change (_set_pose) waits for a frame in flight, so
        # no frame of the old pose goes out after the new pose's first (a capture asked for
        # after ~/next_pose got the old pose's frame, 'the board has not moved')
        with self._lock:
            msg, index, motion = self._msg, self._index, self._motion
            if motion is not None:
                k = self._phase % len(motion[0])
                self._phase += 1
                msg = motion[0][k]
            msg.header.stamp = self.get_clock().now().to_msg()
            if motion is not None:
                stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
                self._sent[stamp_ns] = (motion[1][k], motion[2][k])
                while len(self._sent) > 1000:
                    self._sent.pop(next(iter(self._sent)))
                self.live_tf_pub.publish(self._TFMessage(transforms=[self._true_board_tf(
                    motion[1][k], motion[2][k], msg.header.stamp)]))
            if self.arm_pub is not None:            # the arm's state at the frame, sent first
                from lf_mpc_calib.ros.messages import transform_stamped
                self.arm_pub.publish(self._TFMessage(transforms=[transform_stamped(
                    self.robot_rvecs[index], self.robot_tvecs[index],
                    parent=self.arm.base_frame, child=self.arm.tool_frame,
                    stamp=msg.header.stamp)]))
            self.image_pub.publish(msg)

    def _on_next_pose(self, request, response):
        index = self._advance()
        if self.arm is not None:                # the arm comes to rest; frames go on
            import time
            time.sleep(self.params['settle_time'])
        response.success = True
        response.message = f'pose {index} of {len(self.rvecs)}'
        return response


def _motion_key(index, frames, amplitude, samples):
    """The key of pose ``index``'s live loop in the frame cache and the render worker."""
    return ('motion', int(index), int(frames), float(amplitude), int(samples))


def main(args=None):
    """Run the node until shut down; returns the exit code."""
    return D.run_node(SimCameraNode, args)


if __name__ == '__main__':
    import sys
    sys.exit(main())
