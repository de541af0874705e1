"""
Orchestration of the stages: the offline pipeline (a folder or rosbag2 of raw frames -> a
calibration) and the interactive capture session the calibration node drives.
"""
