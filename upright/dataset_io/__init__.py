"""Datasets on disk, on the package's ground floor (numpy and pyarrow only), shared by the daemon's logger
(:mod:`upright.deploy`), demonstration recording (:mod:`upright.training.record_demos`), replay
(:mod:`upright.viewer.trajectory`) and training from interventions (:mod:`upright.vla`).

- :mod:`~upright.dataset_io.lerobot`: the LeRobotDataset v3.0 writer and reader, with the crash-safe journal.
- :mod:`~upright.dataset_io.lock`: the writer lock (one writer per dataset).
- :mod:`~upright.dataset_io.check`: the check of a dataset folder before any I/O (a damaged one is refused in one line
  naming the file).
- :mod:`~upright.dataset_io.records`: the record layout every writer shares (frame features, the ``control_source``
  and ``safety_flags`` codes, the upright keys of info.json).
"""
