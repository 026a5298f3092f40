"""upright.tasks.lift: a Franka Panda picks up a cube and lifts it to a target (MuJoCo Playground's ``PandaPickCube``,
ManiSkill's ``PickCube``), built on the shared managers of :mod:`upright.managers`."""
