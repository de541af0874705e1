"""
Calibrate a light-field camera: the lf_calibration node on the camera's raw image.

    ros2 launch lf_mpc_calib calibrate.launch.py [namespace:=cam] [camera_name:=cam0]
        [image_topic:=/camera/image_raw] [image_reliability:=reliable]
        [calibration_params_file:=my.yaml] [params_file:=overrides.yaml] [sim:=true]

Then, for each board pose, ``ros2 service call /lf_calibration/capture std_srvs/srv/Trigger``,
and at the end ``.../calibrate`` and ``.../save``; ``rqt_image_view /lf_calibration/detections``
shows what the node sees. ``sim:=true`` also starts the simulated camera (lf_sim_camera), which
the default parameters match. The arguments are those of decode.launch.py and demo.launch.py
for the same things (``--show-args``; docs/ros-session.md).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from lf_mpc_calib.ros.launch_arguments import choices_of, node_parameters


def _nodes(context):
    remappings = [('image_raw', LaunchConfiguration('image_topic')),
                  ('white_image', LaunchConfiguration('white_topic'))]
    return [
        Node(package='lf_mpc_calib', executable='calibration_node', name='lf_calibration',
             namespace=LaunchConfiguration('namespace'), output='screen',
             parameters=node_parameters(context, 'calibration_params_file', (
                 'camera_name', 'optical_frame', 'image_reliability', 'white_image_file',
                 'dark_image_file')),
             remappings=remappings),
        Node(package='lf_mpc_calib', executable='sim_camera_node', name='lf_sim_camera',
             namespace=LaunchConfiguration('namespace'), output='screen',
             parameters=node_parameters(context, 'sim_params_file', ('camera_name',)),
             condition=IfCondition(LaunchConfiguration('sim')), remappings=remappings),
    ]


def generate_launch_description():
    config = os.path.join(get_package_share_directory('lf_mpc_calib'), 'config')
    return LaunchDescription([
        DeclareLaunchArgument('namespace', default_value='',
                              description='namespace of the nodes and their topics'),
        DeclareLaunchArgument('camera_name', default_value='',
                              description="camera name (file names, frame ids <camera_name>_*);"
                                          " '': the parameters files'"),
        DeclareLaunchArgument('optical_frame', default_value='',
                              description="optical frame id; '': the parameters files'"),
        DeclareLaunchArgument('image_topic', default_value='image_raw',
                              description='raw plenoptic image topic'),
        DeclareLaunchArgument('white_topic', default_value='white_image',
                              description='white image topic (unless white_image_file)'),
        DeclareLaunchArgument('white_image_file', default_value='',
                              description="white image file; '': the parameters files' "
                                          '(empty there: the white image topic)'),
        DeclareLaunchArgument('dark_image_file', default_value='',
                              description="dark frame file, subtracted from the white and "
                                          "every frame; '': the parameters files' (empty "
                                          'there: none)'),
        DeclareLaunchArgument('image_reliability', default_value='',
                              choices=choices_of('image_reliability'),
                              description='QoS of image_raw: best_effort (any camera) or '
                                          'reliable (large frames from a reliable publisher);'
                                          " '': the parameters files'"),
        DeclareLaunchArgument('calibration_params_file',
                              default_value=os.path.join(config, 'calibration.yaml'),
                              description='parameters of lf_calibration'),
        DeclareLaunchArgument('sim_params_file',
                              default_value=os.path.join(config, 'sim_camera.yaml'),
                              description='parameters of lf_sim_camera'),
        DeclareLaunchArgument('params_file', default_value='',
                              description='parameters for any of the nodes (sections '
                                          '/**/<node>), applied after their own files'),
        DeclareLaunchArgument('sim', default_value='false',
                              choices=choices_of('sim'),
                              description='also start the simulated camera'),
        OpaqueFunction(function=_nodes),
    ])
