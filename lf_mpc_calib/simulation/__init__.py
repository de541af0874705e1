"""Simulated light-field cameras: the observation-level simulator and the optics-based raw renderer."""
