"""
Simulated light-field cameras.

The observation-level simulator of the paper and the optics-based raw renderer.
"""
