"""
Calibrate a light-field camera: the lf_calibration node on the camera's raw image.

    ros2 launch lf_mpc_calib calibrate.launch.py [params_file:=my.yaml] [namespace:=cam]
        [image_topic:=/camera/image_raw] [sim:=true image_reliability:=reliable]

Then, for each board pose, ``ros2 service call /lf_calibration/capture std_srvs/srv/Trigger``,
and at the end ``.../calibrate`` and ``.../save``. ``sim:=true`` also starts the simulated
camera (lf_sim_camera), which the default parameters match.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    config = os.path.join(get_package_share_directory('lf_mpc_calib'), 'config')
    params = LaunchConfiguration('params_file')
    namespace = LaunchConfiguration('namespace')
    return LaunchDescription([
        DeclareLaunchArgument('params_file',
                              default_value=os.path.join(config, 'calibration.yaml'),
                              description='parameters of lf_calibration'),
        DeclareLaunchArgument('sim_params_file',
                              default_value=os.path.join(config, 'sim_camera.yaml'),
                              description='parameters of lf_sim_camera (sim:=true)'),
        DeclareLaunchArgument('namespace', default_value='',
                              description='namespace of the nodes and their topics'),
        DeclareLaunchArgument('image_topic', default_value='image_raw',
                              description='raw plenoptic image topic'),
        DeclareLaunchArgument('white_topic', default_value='white_image',
                              description='white image topic (unless white_image_file)'),
        DeclareLaunchArgument('sim', default_value='false',
                              description='also start the simulated camera'),
        DeclareLaunchArgument('image_reliability', default_value='best_effort',
                              description='QoS of image_raw: best_effort (any camera) or '
                                          'reliable (large frames from a reliable publisher, '
                                          'e.g. sim:=true)'),
        Node(package='lf_mpc_calib', executable='calibration_node', name='lf_calibration',
             namespace=namespace, output='screen',
             parameters=[params, {'image_reliability':
                                  LaunchConfiguration('image_reliability')}],
             remappings=[('image_raw', LaunchConfiguration('image_topic')),
                         ('white_image', LaunchConfiguration('white_topic'))]),
        Node(package='lf_mpc_calib', executable='sim_camera_node', name='lf_sim_camera',
             namespace=namespace, parameters=[LaunchConfiguration('sim_params_file')],
             output='screen', condition=IfCondition(LaunchConfiguration('sim')),
             remappings=[('image_raw', LaunchConfiguration('image_topic')),
                         ('white_image', LaunchConfiguration('white_topic'))]),
    ])
