"""
``~/suggest`` and ``~/suggested_pose`` of the calibration node: where to put the board next.

A thin adapter over :func:`lf_mpc_calib.pipeline.capture_planning.suggest_next` (conventional
and focused cameras; focused: ``plan_focus_band`` kept clear around the plane conjugate to the
micro-lenses, a band covering the depth range refused; multi-focus:
each type's band from the captures, else ``plan_type_focus_bands``, the reply's
``lens_types``). ``~/suggest``
(std_srvs/Trigger) answers JSON: ``board_pose`` (rotation vector, translation in m, board ->
optical frame: a focused camera's at its distance from the main lens, as ``~/points``; the
planner computes in the model's MPC frame, and
:func:`~lf_mpc_calib.pipeline.capture_planning.suggest_next` maps what it is given and what
it returns), ``predicted_sigma_after`` the capture and
``sigma_now`` (k_i..k_v in % of their value, the principal point in px; null while
undetermined), ``reached`` (the captures so far meet the targets) and ``reached_after``,
``why`` (ending with ``prediction_note`` when the prediction is not to be trusted to 25 %:
from the nominal model, or from a calibration of fewer than 5 captures whose errors the
planner cannot describe as independent plus common to a corner's views), ``model``
('calibration' after a ~/calibrate, else 'nominal': the
``nominal_model_file``), the corner noise assumed and the depth range searched
(``depth_range_m``; it and the ``lens_types``' focus bands in the optical frame too, as
``plan_depth_range`` and ``plan_type_focus_bands`` are given); on an arm,
``arm``: the base -> tool pose that brings the camera (eye-in-hand) or the board
(eye-to-hand) there, once ``~/calibrate`` has solved the mount (null before, with a note),
inside ``plan_workspace_box`` and ``plan_max_tool_tilt_deg`` (candidates outside are
discarded before scoring; limits no candidate meets: success false with the reason), and
the mount's predicted sigmas (``mount_translation`` mm, ``mount_rotation`` deg) in
``predicted_sigma_after``, the mount being in the criterion. The same board pose goes out on
``~/suggested_pose`` (geometry_msgs/PoseStamped, latched, frame the optical frame). A
suggestion the user does not follow is no error: the next one accounts for what was
captured.
"""

import json

import numpy as np

from lf_mpc_calib.ros import defaults as D

PARAMETERS = [
    ('nominal_model_file', '', 'calibration YAML planned with before the first ~/calibrate '
     "(a previous calibration of the camera or its design); '': ~/suggest needs a "
     'calibration', None),
    ('target_k_sigma', 0.3, '~/suggest: sigma of k_i..k_v aimed at, % of the value',
     D.positive),
    ('target_pp_sigma', 0.3, '~/suggest: sigma of the principal point aimed at, px',
     D.positive),
    ('plan_depth_range', [0.0], '~/suggest: board-centre depths [near, far] m in the optical '
     "frame; [0.0]: the captures' range widened by 25 %",
     lambda v: None if len(v) <= 1 or (len(v) == 2 and 0 < v[0] < v[1]) else
     'expected [near, far] with 0 < near < far, or [0.0]'),
    ('plan_max_tilt_deg', 30.0, '~/suggest: board tilt limit about x and y, degrees',
     D.between(0.0, 89.0)),
    ('plan_corner_noise', 0.15, '~/suggest: corner noise (px) assumed before a calibration '
     'measures it', D.positive),
    ('plan_seed', -1, '~/suggest: seed of the candidate poses (-1: random)', None),
    ('plan_focus_band', 0.0, '~/suggest, focused cameras: half-width (m) of the band kept '
     'clear around the plane conjugate to the micro-lenses (Z = 1/k_3 of the optical frame); '
     "0: only the model's test that each corner is seen in >= 2 micro-images",
     D.between(0.0, 100.0)),
    ('plan_type_focus_bands', [0.0], '~/suggest, multi-focus cameras: [near_0, far_0, near_1, '
     'far_1, ..] m (Z of the optical frame) where each micro-lens type (the calibration\'s '
     "numbering) images a corner sharply, for a type until the captures tell its band (>= 50 "
     "corner rows of it); [0.0]: every type at every depth",
     lambda v: None if len(v) <= 1 or (len(v) % 2 == 0 and all(
         lo < hi for lo, hi in zip(v[0::2], v[1::2]))) else
     'expected [near_0, far_0, near_1, far_1, ..] with each near < far, or [0.0]'),
    ('plan_workspace_box', [-1.5, -1.5, 0.0, 1.5, 1.5, 1.5], '~/suggest on an arm: '
     '[x_min, y_min, z_min, x_max, y_max, z_max] m of the tool origin in the base frame; '
     '[0.0]: no box', lambda v: None if len(v) <= 1 or (
         len(v) == 6 and all(lo < hi for lo, hi in zip(v[:3], v[3:]))) else
     'expected [x_min, y_min, z_min, x_max, y_max, z_max] with each min < max, or [0.0]'),
    ('plan_tool_tilt_reference', [0.0, 0.0, -1.0], '~/suggest on an arm: base-frame '
     "direction the tool's z axis is measured from",
     lambda v: None if len(v) == 3 and any(x != 0 for x in v) else
     'expected a non-zero [x, y, z]'),
    ('plan_max_tool_tilt_deg', 75.0, "~/suggest on an arm: largest angle of the tool's z "
     'axis from plan_tool_tilt_reference, degrees (180: no limit)', D.between(1.0, 180.0)),
    ('target_mount_translation', 0.1, '~/suggest on an arm: bound of the mount translation '
     'error aimed at (95 %), mm: its sigma (root of the trace) aimed at is this / 1.614',
     D.positive),
    ('target_mount_rotation', 0.02, '~/suggest on an arm: bound of the mount rotation error '
     'aimed at (95 %), degrees: its sigma (root of the trace) aimed at is this / 1.614',
     D.positive),
]
"""The node's parameters of the suggestions (declared with the node's own)."""


class SuggestionService:
    """``~/suggest`` and ``~/suggested_pose`` of ``node`` (its ``session``, ``params``,
    ``optical_frame``); lock: the lock serialising the session."""

    def __init__(self, node, lock, callback_group=None):
        from geometry_msgs.msg import PoseStamped
        from std_srvs.srv import Trigger

        from lf_mpc_calib.pipeline.capture_planning import PlanSettings
        from lf_mpc_calib.ros.guard import guarded_service
        p = node.params
        self.node, self.lock = node, lock
        depth = tuple(p['plan_depth_range']) if len(p['plan_depth_range']) == 2 else None
        self.settings = PlanSettings(
            target_k_pct=p['target_k_sigma'], target_pp_px=p['target_pp_sigma'],
            corner_noise_px=p['plan_corner_noise'], depth_range_m=depth,
            max_tilt_deg=p['plan_max_tilt_deg'], focus_band_m=p['plan_focus_band'],
            workspace_box=(tuple(p['plan_workspace_box']) if len(p['plan_workspace_box']) == 6
                           else None),
            tilt_reference=tuple(p['plan_tool_tilt_reference']),
            max_tool_tilt_deg=p['plan_max_tool_tilt_deg'],
            target_mount_mm=p['target_mount_translation'],
            target_mount_deg=p['target_mount_rotation'],
            type_depths_m=(tuple(zip(p['plan_type_focus_bands'][0::2],
                                     p['plan_type_focus_bands'][1::2]))
                           if len(p['plan_type_focus_bands']) > 1 else None))
        self.nominal = self._load_nominal(p['nominal_model_file'])
        self.seed = int(p['plan_seed'])
        self.count = 0                          # suggestions made
        self.last = None                        # the last SessionSuggestion
        self.target_uv = None                   # its corners (C, 2) in the central view
        self._PoseStamped = PoseStamped
        self.pub = node.create_publisher(PoseStamped, '~/suggested_pose', D.latched_qos())
        node.create_service(Trigger, '~/suggest',
                            guarded_service(node, 'suggestion', self._on_suggest),
                            qos_profile=D.service_qos(), callback_group=callback_group)

    @staticmethod
    def _load_nominal(path):
        if not path:
            return None
        from lf_mpc_calib.errors import InvalidInputError, LFCalibError
        from lf_mpc_calib.io.calibration_file import load_calibration
        try:
            return load_calibration(path).model
        except (LFCalibError, OSError) as exc:
            raise InvalidInputError(f"parameter 'nominal_model_file' = {path!r}: expected a "
                                    f'calibration YAML: {exc}') from None

    def _on_suggest(self, request, response):
        from lf_mpc_calib.errors import LFCalibError
        from lf_mpc_calib.pipeline.capture_planning import suggest_next
        from lf_mpc_calib.ros.messages import quaternion_from_rotation_vector
        response.success = False
        rng = np.random.default_rng(None if self.seed < 0 else [self.seed, self.count])
        with self.lock:
            try:
                s = suggest_next(self.node.session, self.settings, nominal=self.nominal,
                                 rng=rng)
            except LFCalibError as exc:
                response.message = f'no suggestion: {exc}'
                return response
        self.count += 1
        self.last = s
        self.target_uv = s.central_uv
        frame = self.node.optical_frame
        msg = self._PoseStamped()
        msg.header.frame_id = frame
        msg.header.stamp = self.node.get_clock().now().to_msg()
        t, q = s.suggestion.translation, quaternion_from_rotation_vector(
            s.suggestion.rotation_vector)
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in t)
        (msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z,
         msg.pose.orientation.w) = (float(v) for v in q)
        self.pub.publish(msg)
        response.success = True
        response.message = json.dumps(s.to_dict(frame))
        self.node.get_logger().info(f'suggestion {self.count}: {s.suggestion.why}'
                                    + (' (target reached already)' if s.reached else ''))
        return response
