"""
The ROS 2 layer: nodes and message conversions.

The only part of lf_mpc_calib that imports rclpy or message packages; everything it computes
comes from the core.
"""
