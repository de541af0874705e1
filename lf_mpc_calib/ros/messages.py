"""
ROS messages built from calibration results and measurements: CameraInfo, TransformStamped,
TFMessage, PointCloud2 (rays and points), and the inverse of the PointCloud2 packing.

Only these builders import message packages; the core never does.
"""

import sys

import numpy as np

from lf_mpc_calib.errors import InvalidInputError
from lf_mpc_calib.measurement.live import central_view_intrinsics

RAY_FIELDS = ('x', 'y', 'z', 'normal_x', 'normal_y', 'normal_z', 'intensity')
"""Fields of a ray cloud: origin (x, y, z) on the view plane, unit direction, intensity."""

POINT_FIELDS = ('x', 'y', 'z', 'id', 'rays', 'residual')
"""Fields of a measured-point cloud: position, board corner index, rays used, RMS ray
distance (m)."""

_PF_TYPES = {np.dtype(np.int8): 1, np.dtype(np.uint8): 2, np.dtype(np.int16): 3,
             np.dtype(np.uint16): 4, np.dtype(np.int32): 5, np.dtype(np.uint32): 6,
             np.dtype(np.float32): 7, np.dtype(np.float64): 8}
_PF_DTYPES = {v: k for k, v in _PF_TYPES.items()}


def camera_info(model, view_size, *, frame_id, stamp=None):
    """
    sensor_msgs/CameraInfo of the rectified central view (plumb_bob, zero distortion).

    view_size (width, height) in view pixels; R identity, P = [K | 0].
    """
    return pinhole_camera_info(central_view_intrinsics(model), view_size, frame_id=frame_id,
                               stamp=stamp)


def pinhole_camera_info(k, size, *, frame_id, stamp=None):
    """sensor_msgs/CameraInfo of a pinhole K (3, 3) with no distortion, size (width, height)
    px; R identity, P = [K | 0]."""
    from sensor_msgs.msg import CameraInfo
    width, height = (int(x) for x in size)
    if width <= 0 or height <= 0:
        raise InvalidInputError(f'image size must be positive (width, height), got {size}')
    k = np.asarray(k, dtype=float).reshape(3, 3)
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


def point_cloud(columns, *, frame_id, stamp=None):
    """
    sensor_msgs/PointCloud2 (unorganised: height 1, dense) from named columns.

    columns: sequence of (name, array (N,)) with numpy dtypes among int8..uint32, float32,
    float64 (each column keeps its dtype); packed in this machine's byte order.
    """
    from sensor_msgs.msg import PointCloud2, PointField
    names = [name for name, _ in columns]
    arrays = [np.asarray(values).ravel() for _, values in columns]
    if not arrays:
        raise InvalidInputError('a point cloud needs at least one field')
    n = arrays[0].shape[0]
    for name, a in zip(names, arrays):
        if a.shape != (n,):
            raise InvalidInputError(f'field {name!r} has {a.shape[0]} values, expected {n}')
        if a.dtype not in _PF_TYPES:
            raise InvalidInputError(f'field {name!r} has dtype {a.dtype}; expected one of '
                                    f'{sorted(str(d) for d in _PF_TYPES)}')
    record = np.dtype([(name, a.dtype) for name, a in zip(names, arrays)])
    packed = np.empty(n, dtype=record)
    for name, a in zip(names, arrays):
        packed[name] = a
    msg = PointCloud2()
    msg.header.frame_id = frame_id
    if stamp is not None:
        msg.header.stamp = stamp
    msg.height, msg.width = 1, int(n)
    msg.fields = [PointField(name=name, offset=int(record.fields[name][1]),
                             datatype=_PF_TYPES[a.dtype], count=1)
                  for name, a in zip(names, arrays)]
    msg.is_bigendian = sys.byteorder == 'big'
    msg.point_step = int(record.itemsize)
    msg.row_step = int(record.itemsize * n)
    msg.data = packed.tobytes()
    msg.is_dense = True
    return msg


def cloud_columns(msg):
    """
    The fields of a PointCloud2 as {name: array (N,)} (inverse of :func:`point_cloud`).

    Honours offsets, point_step, row_step padding and is_bigendian; raises InvalidInputError
    for a message whose data does not fit its layout.
    """
    n_rows, width, step = int(msg.height), int(msg.width), int(msg.point_step)
    data = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    needed = (n_rows - 1) * int(msg.row_step) + width * step if n_rows else 0
    if data.size < needed:
        raise InvalidInputError(f'PointCloud2 data has {data.size} bytes, too few for '
                                f'{n_rows} x {width} points of {step} bytes')
    rows = [data[r * msg.row_step:r * msg.row_step + width * step] for r in range(n_rows)]
    raw = np.concatenate(rows).reshape(-1, step) if rows and step else \
        np.zeros((0, max(step, 1)), np.uint8)
    endian = '>' if msg.is_bigendian else '<'
    out = {}
    for f in msg.fields:
        dtype = _PF_DTYPES.get(int(f.datatype))
        if dtype is None or f.offset + dtype.itemsize > step:
            raise InvalidInputError(f'PointCloud2 field {f.name!r}: datatype {f.datatype} at '
                                    f'offset {f.offset} does not fit point_step {step}')
        col = np.ascontiguousarray(raw[:, f.offset:f.offset + dtype.itemsize])
        out[f.name] = col.view(dtype.newbyteorder(endian)).ravel().astype(dtype)
    return out


def ray_cloud(rays, *, frame_id, stamp=None):
    """
    PointCloud2 of a :class:`lf_mpc_calib.measurement.live.RaySet` (fields :data:`RAY_FIELDS`).

    (x, y, z) is the ray's origin on the view plane (z = 0; a focused camera's, in the optical
    frame at its main lens: on the plane conjugate to the micro-lenses, z = 1/k_3, as the
    decode node gives it), (normal_x, normal_y, normal_z) its unit direction (the names RViz
    and PCL read as a vector), intensity in [0, 1]; float32, metres, in ``frame_id`` (the
    optical frame).
    """
    o = np.asarray(rays.origins, dtype=np.float32)
    d = np.asarray(rays.directions, dtype=np.float32)
    cols = [('x', o[:, 0]), ('y', o[:, 1]), ('z', o[:, 2]), ('normal_x', d[:, 0]),
            ('normal_y', d[:, 1]), ('normal_z', d[:, 2]),
            ('intensity', np.asarray(rays.intensity, dtype=np.float32))]
    return point_cloud(cols, frame_id=frame_id, stamp=stamp)


def points_cloud(points, ids, rays_per_point, residual_m, *, frame_id, stamp=None):
    """
    PointCloud2 of measured points (fields :data:`POINT_FIELDS`).

    points (C, 3) metres (float32 in the message), ids (C,) board corner indices (uint32),
    rays_per_point (C,) (uint32), residual_m (C,) RMS ray distance (float32).
    """
    p = np.asarray(points, dtype=np.float32).reshape(-1, 3)
    cols = [('x', p[:, 0]), ('y', p[:, 1]), ('z', p[:, 2]),
            ('id', np.asarray(ids, dtype=np.uint32)),
            ('rays', np.asarray(rays_per_point, dtype=np.uint32)),
            ('residual', np.asarray(residual_m, dtype=np.float32))]
    return point_cloud(cols, frame_id=frame_id, stamp=stamp)


def depth_image(depth, *, header):
    """
    sensor_msgs/Image 32FC1 of a depth map (rows, cols) in metres, NaN where unknown (REP 118).

    Packed in this machine's byte order (is_bigendian set accordingly), step = 4 * cols.
    """
    from sensor_msgs.msg import Image
    d = np.ascontiguousarray(depth, dtype=np.float32)
    if d.ndim != 2:
        raise InvalidInputError(f'depth must be (rows, cols), got shape {d.shape}')
    msg = Image(header=header, height=int(d.shape[0]), width=int(d.shape[1]),
                encoding='32FC1', is_bigendian=int(sys.byteorder == 'big'),
                step=int(4 * d.shape[1]))
    msg.data = d.tobytes()
    return msg


def depth_cloud(points, intensity, confidence, *, frame_id, stamp=None):
    """PointCloud2 of depth points (P, 3) m with intensity and confidence (P,) (float32)."""
    p = np.asarray(points, dtype=np.float32).reshape(-1, 3)
    return point_cloud([('x', p[:, 0]), ('y', p[:, 1]), ('z', p[:, 2]),
                        ('intensity', np.asarray(intensity, dtype=np.float32)),
                        ('confidence', np.asarray(confidence, dtype=np.float32))],
                       frame_id=frame_id, stamp=stamp)
