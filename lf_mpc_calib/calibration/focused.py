"""
The orientation convention of a focused-camera calibration.

With (i, j) the absolute micro-image centre, the MPC rays of a focused camera cannot tell a board
in front of the view plane (the plane conjugate to the MLA, z = 0 of the MPC frame) from its
point reflection behind it: X -> -X maps the rays {(s + x Z, t + y Z, Z)} to those of
s -> -s, t -> -t, Z -> -Z with (x, y) unchanged, i.e. k_i, k_j, k_3, k_4 -> -k_i, -k_j, -k_3,
-k_4 and each planar board pose R -> -R diag(1, 1, -1) (a proper rotation), t -> -t, every
residual unchanged. The closed form returns either. Physically the chief rays all pass the
main-lens centre, which lies at z = -1/k_3 on the object side of the view plane
(NOTES §3; the simulator's truth has k_3 = k_4 = +1/Z_f), so the convention is k_3 + k_4 > 0:
then 1/k_3 is the distance of the plane in focus on the MLA (Raytrix R12: 0.45 m, its focus
distance).
"""

from dataclasses import replace

import numpy as np

from lf_mpc_calib.camera.rotations import rotation_matrix
from scipy.spatial.transform import Rotation


def orient_focused(result):
    """Return ``result`` (CalibrationResult) in the k_3 + k_4 > 0 orientation (docstring)."""
    m = result.model
    if m.k_3 + m.k_4 >= 0:
        return result
    model = m.replace(k_i=-m.k_i, k_j=-m.k_j, k_3=-m.k_3, k_4=-m.k_4)
    rot = -rotation_matrix(result.rotation_vectors) @ np.diag([1.0, 1.0, -1.0])
    rv = Rotation.from_matrix(rot).as_rotvec()
    initial = result.initial
    if initial is not None and initial.k_3 + initial.k_4 < 0:
        initial = initial.replace(k_i=-initial.k_i, k_j=-initial.k_j, k_3=-initial.k_3,
                                  k_4=-initial.k_4)
    return replace(result, model=model, initial=initial, rotation_vectors=rv,
                   translations=-np.asarray(result.translations))
