"""
Live decoding and 3-D measurement: the lf_decoder node on a calibrated camera.

    ros2 launch lf_mpc_calib decode.launch.py calibration_file:=/path/lf_camera.yaml
        [white_image_file:=/path/white.png] [namespace:=cam] [image_topic:=/camera/image_raw]
        [image_reliability:=reliable] [decode_params_file:=my.yaml]
        [params_file:=overrides.yaml]

calibration_file empty (the default, unless the parameters files set one): the calibration
comes from the latched ``lf_calibration/calibration`` topic of the calibration node in the
same namespace. The arguments are those of calibrate.launch.py and demo.launch.py for the same
things (``--show-args``; docs/ros-session.md).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from lf_mpc_calib.ros.launch_arguments import choices_of, node_parameters


def _nodes(context):
    return [
        Node(package='lf_mpc_calib', executable='decode_node', name='lf_decoder',
             namespace=LaunchConfiguration('namespace'), output='screen',
             parameters=node_parameters(context, 'decode_params_file', (
                 'optical_frame', 'image_reliability', 'white_image_file',
                 'dark_image_file',
                 'calibration_file')),
             remappings=[('image_raw', LaunchConfiguration('image_topic')),
                         ('white_image', LaunchConfiguration('white_topic'))]),
    ]


def generate_launch_description():
    config = os.path.join(get_package_share_directory('lf_mpc_calib'), 'config')
    return LaunchDescription([
        DeclareLaunchArgument('namespace', default_value='',
                              description='namespace of the nodes and their topics'),
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
        DeclareLaunchArgument('decode_params_file',
                              default_value=os.path.join(config, 'decode.yaml'),
                              description='parameters of lf_decoder'),
        DeclareLaunchArgument('params_file', default_value='',
                              description='parameters for any of the nodes (sections '
                                          '/**/<node>), applied after their own files'),
        DeclareLaunchArgument('calibration_file', default_value='',
                              description="calibration file; '': the parameters files' "
                                          '(empty there: the calibration topic)'),
        OpaqueFunction(function=_nodes),
    ])
