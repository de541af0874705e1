"""
Live decoding and 3-D measurement: the lf_decoder node on a calibrated camera.

    ros2 launch lf_mpc_calib decode.launch.py calibration_file:=/path/lf_camera.yaml
        [white_image_file:=/path/white.png] [params_file:=my.yaml] [namespace:=cam]
        [image_topic:=/camera/image_raw] [image_reliability:=reliable]

calibration_file empty (the default): the calibration comes from the latched
``lf_calibration/calibration`` topic of the calibration node in the same namespace.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    config = os.path.join(get_package_share_directory('lf_mpc_calib'), 'config')
    return LaunchDescription([
        DeclareLaunchArgument('params_file', default_value=os.path.join(config, 'decode.yaml'),
                              description='parameters of lf_decoder'),
        DeclareLaunchArgument('calibration_file', default_value='',
                              description='calibration file; empty: the calibration topic'),
        DeclareLaunchArgument('white_image_file', default_value='',
                              description='white image file; empty: the white_image topic'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='namespace of the node and its topics'),
        DeclareLaunchArgument('image_topic', default_value='image_raw',
                              description='raw plenoptic image topic'),
        DeclareLaunchArgument('image_reliability', default_value='best_effort',
                              description='QoS of image_raw: best_effort (any camera) or '
                                          'reliable (large frames from a reliable publisher: '
                                          'best-effort delivery loses most multi-megabyte '
                                          'frames between processes)'),
        Node(package='lf_mpc_calib', executable='decode_node', name='lf_decoder',
             namespace=LaunchConfiguration('namespace'), output='screen',
             parameters=[LaunchConfiguration('params_file'),
                         {'calibration_file': LaunchConfiguration('calibration_file'),
                          'white_image_file': LaunchConfiguration('white_image_file'),
                          'image_reliability': LaunchConfiguration('image_reliability')}],
             remappings=[('image_raw', LaunchConfiguration('image_topic'))]),
    ])
