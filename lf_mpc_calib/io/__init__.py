"""
Readers and writers of what enters and leaves the package: images and image messages, raw data
sets (folders and rosbag2), observation tables, the Raytrix R12 table, calibration files.
"""
