"""
Board pose sequences of what a live stream gives a tracker (issue 40): frames dropped while the
node is busy, a loop that jumps back, a board that leaves the view and comes back, sudden moves.

Poses follow the simulated camera's live loop (:meth:`lf_mpc_calib.ros.sim_camera_node.
SimCameraNode.motion_poses`: ``n_loop`` frames on a circle of ``amplitude`` m sideways and 1 %
of the distance in depth around a base pose). Each sequence is a list of pose keys, the frames
a tracker processes in order; ``poses`` maps each key to (rvec (3,), tvec (3,), in_view):

- ``dropped``: loop frames with every 2nd, 3rd, ... 10th frame processed in turn (gaps 2-10);
- ``jump back``: a few loop frames, then the loop's far side (its whole diameter away) and back;
- ``leaves view``: the board slides out of the view (frames without it), comes back where it
  left, leaves again and comes back a few millimetres off;
- ``sudden``: 5 mm sideways, 5 mm back, 3 degrees about the optical axis and 3 degrees about x.

    poses, sequences = tracking_sequences(camera, board, distance, angles_deg)
    for key in sequences['dropped']: rvec, tvec, in_view = poses[key]
"""

import numpy as np
from scipy.spatial.transform import Rotation

from lf_mpc_calib.simulation.focused_raw import board_pose


def tracking_sequences(camera, board, distance, angles_deg, *, amplitude=0.002, n_loop=24):
    """
    (poses {key: (rvec, tvec, in_view)}, sequences {name: [key, ...]}) of the module docstring;
    camera: the Camera the board is seen by; distance (m), angles_deg (3,): the base pose
    (:func:`~lf_mpc_calib.simulation.focused_raw.board_pose`).
    """
    rv0, tv0 = board_pose(camera, board, distance, angles_deg)
    poses = {}

    def loop(k):
        a = 2 * np.pi * (k % n_loop) / n_loop
        shift = [amplitude * np.cos(a), amplitude * np.sin(a), 0.01 * tv0[2] * np.sin(a)]
        poses[f'loop {k % n_loop}'] = (rv0, tv0 + np.array(shift), True)
        return f'loop {k % n_loop}'

    def moved(name, dx=0.0, dy=0.0, turn=None, in_view=True):
        rot = Rotation.from_rotvec(rv0)
        if turn is not None:        # about the board's centre
            centre = rot.apply(board.points().mean(0)) + tv0
            extra = Rotation.from_euler(turn[0], np.deg2rad(turn[1]))
            rot = extra * rot
            tv = centre + extra.apply(tv0 - centre)
        else:
            tv = tv0.copy()
        poses[name] = (rot.as_rotvec(), tv + [dx, dy, 0.0], in_view)
        return name

    ks = np.cumsum([0] + list(range(2, 11)))
    width = camera.field_of_view(distance)[0]
    out = 0.5 * width + board.cols * board.square
    sequences = {
        'dropped': [loop(k) for k in ks],
        'jump back': [loop(k) for k in (0, 1, 2, n_loop // 2, n_loop // 2 + 1, 0, 1)],
        'leaves view': [loop(0), loop(1), moved('out', dx=out, in_view=False),
                        moved('far out', dx=2 * out, in_view=False), loop(1), loop(2),
                        moved('out', dx=out, in_view=False), moved('back off', dx=0.004),
                        moved('back off 2', dx=0.0045)],
        'sudden': [loop(0), moved('5 mm x', dx=0.005), loop(0), moved('5 mm y', dy=0.005),
                   moved('3 deg z', turn=('z', 3.0)), moved('3 deg x', turn=('x', 3.0)),
                   loop(0)],
    }
    return poses, sequences
