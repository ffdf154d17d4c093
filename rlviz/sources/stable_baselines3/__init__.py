"""Stable-Baselines3 and sb3-contrib zips and objects, their VecNormalize statistics, and rl-zoo3 run folders."""
