"""
The rectified central view's pinhole calibration as a ``camera_info_manager`` YAML file.

The layout ``camera_calibration`` writes and ``camera_info_manager`` reads (its default URL
``file://${ROS_HOME}/camera_info/${NAME}.yaml``): image_width, image_height, camera_name,
camera_matrix, distortion_model (plumb_bob), distortion_coefficients, rectification_matrix,
projection_matrix, each matrix as {rows, cols, data}. The central view of a conventional
camera is a pinhole without distortion
(:func:`lf_mpc_calib.measurement.live.central_view_intrinsics`), so image_proc's
rectification of ``~/center`` with it is the identity and tools that want a pinhole (AprilTag
detectors, image_view) get the right one.
"""

import numpy as np
import yaml

from lf_mpc_calib.errors import InvalidInputError


def camera_info_document(k, size, camera_name):
    """The mapping of the YAML file for pinhole K (3, 3) and size (width, height) px."""
    k = np.asarray(k, dtype=float).reshape(3, 3)
    width, height = (int(v) for v in size)
    if width <= 0 or height <= 0 or not np.all(np.isfinite(k)):
        raise InvalidInputError(f'camera info needs a finite K and a positive size, got '
                                f'K {k.tolist()}, size {size}')

    def matrix(a):
        a = np.asarray(a, dtype=float)
        return {'rows': int(a.shape[0]), 'cols': int(a.shape[1]),
                'data': [float(x) for x in a.ravel()]}
    return {'image_width': width, 'image_height': height, 'camera_name': str(camera_name),
            'camera_matrix': matrix(k), 'distortion_model': 'plumb_bob',
            'distortion_coefficients': matrix(np.zeros((1, 5))),
            'rectification_matrix': matrix(np.eye(3)),
            'projection_matrix': matrix(np.hstack([k, np.zeros((3, 1))]))}


def write_camera_info(path, k, size, camera_name):
    """Write the YAML file (through a temporary name) to ``path``."""
    from lf_mpc_calib.io.atomic import open_atomically
    doc = camera_info_document(k, size, camera_name)
    with open_atomically(path, 'w') as f:
        yaml.safe_dump(doc, f, sort_keys=False, default_flow_style=None)
