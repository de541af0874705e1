"""Install lf_mpc_calib as an ament_python package (colcon) or into a venv (pip)."""

from glob import glob
import os

from setuptools import find_packages, setup

package_name = 'lf_mpc_calib'


def _version():
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           package_name, '__init__.py')) as f:
        for line in f:
            if line.startswith('__version__'):
                return line.split('=', 1)[1].strip().strip('\'"')
    raise RuntimeError('__version__ not found in lf_mpc_calib/__init__.py')


setup(
    name=package_name,
    version=_version(),
    packages=find_packages(exclude=['test', 'test.*']),
    package_data={'lf_mpc_calib.ros': ['fastdds_large_frames.xml']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', sorted(glob('launch/*.launch.py'))),
        ('share/' + package_name + '/config', sorted(glob('config/*.yaml'))),
    ],
    python_requires='>=3.10',
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='lf_mpc_calib developers',
    maintainer_email='lf_mpc_calib@example.invalid',
    description='Light-field camera calibration with the multi-projection-center model.',
    license='BSD-3-Clause',
    tests_require=['pytest'],
    entry_points={
        'console_scripts': [
            'lf-mpc-calib = lf_mpc_calib.cli:main',
            'calibration_node = lf_mpc_calib.ros.calibration_node:main',
            'decode_node = lf_mpc_calib.ros.decode_node:main',
            'sim_camera_node = lf_mpc_calib.ros.sim_camera_node:main',
        ],
    },
)
