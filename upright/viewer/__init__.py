"""Sim playback: ``play.py``'s policy loading, replay files and the three viewers.

- :mod:`~upright.viewer.config`: the ``play`` Hydra config (task configs + play keys).
- :mod:`~upright.viewer.policy`: a policy from a run dir, checkpoint ``.pt``, ``.onnx``, ``zero`` or ``random``
  (:mod:`upright.training.policy_loading`), or for task=lift a VLA chunk policy (:mod:`~upright.viewer.vla_policy`).
- :mod:`~upright.viewer.session`: one env played by a policy, or a recorded trajectory, behind one interface.
- :mod:`~upright.viewer.trajectory`: the qpos trajectory ``.npz`` format and deploy-dataset replay.
- :mod:`~upright.viewer.variants`: posture/terrain variants the viewers switch between.
- :mod:`~upright.viewer.video` (headless MP4), :mod:`~upright.viewer.native` (``mujoco.viewer``),
  :mod:`~upright.viewer.web` (viser in the browser).
- :mod:`~upright.viewer.viser_scene`: MuJoCo geoms and meshes as viser scene nodes.
- :mod:`~upright.viewer.browser`: a tiny headless-Chromium driver (DevTools protocol) for tests and screenshots
  (``python -m upright.viewer.browser URL out.png``).
"""
