"""
ROS messages built from calibration results: CameraInfo, TransformStamped, TFMessage.

Only these builders import message packages; the core never does.
"""

import numpy as np

from lf_mpc_calib.errors import InvalidInputError


def central_view_intrinsics(model):
    """
    Pinhole matrix K (3, 3) of the rectified central view of an MPCModel.

    The central view (i = j = 0) has s = t = 0, so an undistorted ray x = X / Z is seen at
    u = (x - u_0) / k_u: focal lengths 1 / k_u, 1 / k_v and principal point (-u_0 / k_u,
    -v_0 / k_v) in pixels of the view.
    """
    if model.k_u == 0.0 or model.k_v == 0.0:
        raise InvalidInputError(f'model has k_u = {model.k_u}, k_v = {model.k_v}; expected '
                                'both non-zero')
    cx, cy = model.principal_point
    return np.array([[1.0 / model.k_u, 0.0, cx], [0.0, 1.0 / model.k_v, cy], [0.0, 0.0, 1.0]])


def camera_info(model, view_size, *, frame_id, stamp=None):
    """
    sensor_msgs/CameraInfo of the rectified central view (plumb_bob, zero distortion).

    view_size (width, height) in view pixels; R identity, P = [K | 0].
    """
    from sensor_msgs.msg import CameraInfo
    width, height = (int(x) for x in view_size)
    if width <= 0 or height <= 0:
        raise InvalidInputError(f'view_size must be positive (width, height), got {view_size}')
    k = central_view_intrinsics(model)
    msg = CameraInfo()
    msg.header.frame_id = frame_id
    if stamp is not None:
        msg.header.stamp = stamp
    msg.width, msg.height = width, height
    msg.distortion_model = 'plumb_bob'
    msg.d = [0.0] * 5
    msg.k = [float(x) for x in k.ravel()]
    msg.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    msg.p = [float(x) for x in np.hstack([k, np.zeros((3, 1))]).ravel()]
    return msg


def quaternion_from_rotation_vector(rvec):
    """Unit quaternion (x, y, z, w) of a rotation vector (3,) (axis * angle, radians)."""
    r = np.asarray(rvec, dtype=float).reshape(3)
    if not np.all(np.isfinite(r)):
        raise InvalidInputError(f'rotation vector must be finite, got {r}')
    angle = float(np.linalg.norm(r))
    if angle < 1e-12:
        return np.array([0.5 * r[0], 0.5 * r[1], 0.5 * r[2], 1.0]) / \
            np.sqrt(1.0 + 0.25 * angle * angle)
    axis = r / angle
    return np.concatenate([axis * np.sin(0.5 * angle), [np.cos(0.5 * angle)]])


def rotation_vector_from_quaternion(q):
    """Rotation vector (3,) of a quaternion (x, y, z, w)."""
    q = np.asarray(q, dtype=float).reshape(4)
    q = q / np.linalg.norm(q)
    if q[3] < 0:
        q = -q
    s = np.linalg.norm(q[:3])
    if s < 1e-12:
        return 2.0 * q[:3]
    return q[:3] / s * 2.0 * np.arctan2(s, q[3])


def transform_stamped(rvec, tvec, *, parent, child, stamp=None):
    """
    geometry_msgs/TransformStamped placing ``child`` (the board) in ``parent`` (the camera).

    rvec, tvec (3,): the board -> camera pose (X_cam = R X_board + t), metres.
    """
    from geometry_msgs.msg import TransformStamped
    t = np.asarray(tvec, dtype=float).reshape(3)
    q = quaternion_from_rotation_vector(rvec)
    msg = TransformStamped()
    msg.header.frame_id = parent
    if stamp is not None:
        msg.header.stamp = stamp
    msg.child_frame_id = child
    msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = \
        (float(x) for x in t)
    rot = msg.transform.rotation
    rot.x, rot.y, rot.z, rot.w = (float(x) for x in q)
    return msg


def board_transforms(rvecs, tvecs, *, parent, child_prefix, stamp=None):
    """tf2_msgs/TFMessage with one transform per pose: ``<child_prefix><n>`` in ``parent``."""
    from tf2_msgs.msg import TFMessage
    rvecs = np.asarray(rvecs, dtype=float).reshape(-1, 3)
    tvecs = np.asarray(tvecs, dtype=float).reshape(-1, 3)
    if rvecs.shape != tvecs.shape:
        raise InvalidInputError(f'rvecs {rvecs.shape} and tvecs {tvecs.shape} must match')
    return TFMessage(transforms=[
        transform_stamped(r, t, parent=parent, child=f'{child_prefix}{n}', stamp=stamp)
        for n, (r, t) in enumerate(zip(rvecs, tvecs))])
