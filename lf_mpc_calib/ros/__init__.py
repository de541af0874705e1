"""
The ROS 2 layer: nodes and message conversions.

The only part of lf_mpc_calib that imports rclpy or message packages; everything it computes
comes from the core.

The node processes run with one BLAS thread unless the environment says otherwise
(:mod:`lf_mpc_calib.blas_threads`).
"""

from lf_mpc_calib.blas_threads import prefer_one_blas_thread

prefer_one_blas_thread()      # before the node modules load NumPy
