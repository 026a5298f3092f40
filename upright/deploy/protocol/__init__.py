"""Byte-level frame protocols spoken on the robot's serial links (GO-M8010-6 motors, upright IMU frame)."""
