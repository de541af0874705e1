"""
The whole pipeline on the simulated camera: lf_sim_camera, lf_calibration and lf_decoder.

    ros2 launch lf_mpc_calib demo.launch.py [params_file:=my.yaml] [namespace:=demo]

The three nodes with their config/*.yaml parameters in one namespace connect on image_raw and
white_image; calibrate through the services (or run ``lf-mpc-calib demo --ros``, which does
the same in one process and drives the services for you):

    ros2 service call /lf_calibration/capture std_srvs/srv/Trigger    # per pose
    ros2 service call /lf_sim_camera/next_pose std_srvs/srv/Trigger
    ros2 service call /lf_calibration/calibrate std_srvs/srv/Trigger

lf_decoder picks up the new calibration from the latched lf_calibration/calibration and
publishes the measured board corners on /lf_decoder/points.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    config = os.path.join(get_package_share_directory('lf_mpc_calib'), 'config')
    namespace = LaunchConfiguration('namespace')
    nodes = [('sim_camera_node', 'lf_sim_camera', 'sim_params_file', 'sim_camera.yaml'),
             ('calibration_node', 'lf_calibration', 'params_file', 'calibration.yaml'),
             ('decode_node', 'lf_decoder', 'decode_params_file', 'decode.yaml')]
    actions = [DeclareLaunchArgument('namespace', default_value='',
                                     description='namespace of the three nodes')]
    for executable, name, argument, config_file in nodes:
        actions.append(DeclareLaunchArgument(
            argument, default_value=os.path.join(config, config_file),
            description=f'parameters of {name}'))
    for executable, name, argument, _ in nodes:
        # the simulated camera publishes reliably; best-effort subscribers in other processes
        # lose most multi-megabyte frames (Fast DDS fragments)
        extra = [] if name == 'lf_sim_camera' else [{'image_reliability': 'reliable'}]
        actions.append(Node(package='lf_mpc_calib', executable=executable, name=name,
                            namespace=namespace, output='screen',
                            parameters=[LaunchConfiguration(argument)] + extra))
    return LaunchDescription(actions)
