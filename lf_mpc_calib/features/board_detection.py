"""
The board's corners in a decoded light field, whatever the board.

:func:`detect_board_corners` hands a checkerboard to
:func:`lf_mpc_calib.features.corners.detect_corners` and a ChArUco board to
:func:`lf_mpc_calib.features.charuco_views.detect_charuco_views`; both return a
:class:`~lf_mpc_calib.features.corners.Detection`.
"""

from lf_mpc_calib.features.charuco_views import detect_charuco_views
from lf_mpc_calib.features.corners import CornerOptions, detect_corners


def detect_board_corners(lightfield, board, *, pose=0, options=None):
    """Corners of ``board`` (Checkerboard or CharucoBoard) in every usable view of one decoded
    light field: a Detection (observations with ``pose`` as their pose index)."""
    opt = options or CornerOptions()
    if getattr(board, 'board_type', 'checkerboard') == 'charuco':
        return detect_charuco_views(lightfield, board, pose=pose, options=opt)
    return detect_corners(lightfield, board, pose=pose, options=opt)


__all__ = ['detect_board_corners']
