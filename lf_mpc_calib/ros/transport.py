"""
Fast DDS transport for camera-size frames between processes of one machine.

Fast DDS (ROS 2's default rmw) hands a sample to another process through the writer's
shared-memory segment, 512 KB by default: a 12.5 MB Raytrix-R12-size frame (4080 x 3068 mono8)
goes as fragments, and a keep-last-1 writer replaces the frame before most have arrived.
Measured on 2 Dec 2026 (15 Hz of those frames, a subscriber process that does nothing with
them, 2-core machine): 2.4-3.2 Hz arrive reliable, none best effort; with the writer's segment
at 64 MB (:data:`PROFILE`) all 15 Hz arrive, reliable or best effort.

The publisher's segment decides, so the camera driver needs the profile too:
``export FASTDDS_DEFAULT_PROFILES_FILE=$(python3 -m lf_mpc_calib.ros.transport)`` before
starting it. Each process with the profile holds a 64 MB segment in /dev/shm.
"""

import os

PROFILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fastdds_large_frames.xml')
"""The Fast DDS XML profile: shared memory with a 64 MB segment, the builtin transports kept."""
FASTDDS_RMWS = ('', 'rmw_fastrtps_cpp', 'rmw_fastrtps_dynamic_cpp')
"""RMW_IMPLEMENTATION values that mean Fast DDS ('': the default rmw)."""
USER_SETTINGS = ('FASTDDS_DEFAULT_PROFILES_FILE', 'FASTRTPS_DEFAULT_PROFILES_FILE',
                 'FASTDDS_BUILTIN_TRANSPORTS')
"""Environment variables by which a user has chosen Fast DDS's transports already."""


def use_large_frame_transport(environ=None):
    """
    Point Fast DDS at :data:`PROFILE` in ``environ`` (default ``os.environ``), before rclpy.init.

    Left alone (returns None) when the rmw is not Fast DDS or one of :data:`USER_SETTINGS` is
    set: the user's choice wins. Returns the profile's path when set.
    """
    environ = os.environ if environ is None else environ
    if environ.get('RMW_IMPLEMENTATION', '') not in FASTDDS_RMWS:
        return None
    if any(environ.get(name) for name in USER_SETTINGS):
        return None
    environ['FASTDDS_DEFAULT_PROFILES_FILE'] = PROFILE
    return PROFILE


if __name__ == '__main__':
    print(PROFILE)
