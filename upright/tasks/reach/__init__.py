"""upright.tasks.reach: a Franka Panda brings its gripper site to a commanded point (Isaac Lab's and mjlab's reach
task, joint-space actions), a task written as a config, a scene, a state, term files and a spec on the env core."""
