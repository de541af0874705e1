"""
The whole pipeline on the simulated camera: lf_sim_camera, lf_calibration and lf_decoder.

    ros2 launch lf_mpc_calib demo.launch.py [namespace:=demo] [camera_name:=cam0]
        [calibration_params_file:=my.yaml] [params_file:=overrides.yaml]

The three nodes with their config/*.yaml parameters in one namespace connect on image_raw and
white_image; calibrate through the services (or run ``lf-mpc-calib demo --ros``, which does
the same in one process and drives the services for you):

    ros2 service call /lf_calibration/capture std_srvs/srv/Trigger    # per pose
    ros2 service call /lf_sim_camera/next_pose std_srvs/srv/Trigger
    ros2 service call /lf_calibration/calibrate std_srvs/srv/Trigger

lf_decoder picks up the new calibration from the latched lf_calibration/calibration and
publishes the measured board corners on /lf_decoder/points. The arguments are those of
calibrate.launch.py and decode.launch.py for the same things (``--show-args``;
docs/ros-session.md); image_reliability defaults to reliable here: the simulated camera
publishes reliably, and best-effort subscribers in other processes lose most of its
multi-megabyte frames (Fast DDS fragments).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from lf_mpc_calib.ros.launch_arguments import choices_of, node_parameters


def _nodes(context):
    remappings = [('image_raw', LaunchConfiguration('image_topic')),
                  ('white_image', LaunchConfiguration('white_topic'))]
    nodes = [('sim_camera_node', 'lf_sim_camera', 'sim_params_file', ('camera_name',)),
             ('calibration_node', 'lf_calibration', 'calibration_params_file',
              ('camera_name', 'optical_frame', 'image_reliability')),
             ('decode_node', 'lf_decoder', 'decode_params_file',
              ('optical_frame', 'image_reliability'))]
    return [Node(package='lf_mpc_calib', executable=executable, name=name,
                 namespace=LaunchConfiguration('namespace'), output='screen',
                 parameters=node_parameters(context, own_file, names),
                 remappings=remappings)
            for executable, name, own_file, names in nodes]


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
        DeclareLaunchArgument('image_reliability', default_value='reliable',
                              choices=choices_of('image_reliability'),
                              description='QoS of image_raw: best_effort (any camera) or '
                                          'reliable (large frames from a reliable publisher);'
                                          " '': the parameters files'"),
        DeclareLaunchArgument('calibration_params_file',
                              default_value=os.path.join(config, 'calibration.yaml'),
                              description='parameters of lf_calibration'),
        DeclareLaunchArgument('decode_params_file',
                              default_value=os.path.join(config, 'decode.yaml'),
                              description='parameters of lf_decoder'),
        DeclareLaunchArgument('sim_params_file',
                              default_value=os.path.join(config, 'sim_camera.yaml'),
                              description='parameters of lf_sim_camera'),
        DeclareLaunchArgument('params_file', default_value='',
                              description='parameters for any of the nodes (sections '
                                          '/**/<node>), applied after their own files'),
        OpaqueFunction(function=_nodes),
    ])
