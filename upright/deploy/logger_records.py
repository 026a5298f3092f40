"""The logger's pipe record, shared by the daemon's client and the logger process: the fixed-size record of a frame
or an episode end, and the image features that travel beside it (see :mod:`upright.deploy.logger_process`). The
dataset's features and the upright keys of info.json, which demonstration recording writes too, are
:mod:`upright.dataset_io.records`'.
"""

from __future__ import annotations

import select

import numpy as np

KIND_FRAME, KIND_EPISODE_END, KIND_CLOSE = 0, 1, 2
REASON_BYTES = 240
"""Longest episode-end reason carried in a record (UTF-8, truncated)."""


def image_features(features: dict[str, dict]) -> dict[str, tuple[int, int]]:
    """Feature name -> (H, W) of the image features (they travel through the image ring, not the pipe)."""
    return {n: (int(f["shape"][0]), int(f["shape"][1])) for n, f in features.items() if f["dtype"] == "image"}


_NP = {"float32": np.float32, "int64": np.int64, "bool": np.bool_}


def record_dtype(features: dict[str, dict]) -> np.dtype:
    """Fixed-size pipe record: header fields (``reason`` is used by episode-end records), then one field per feature.

    Raises:
        ValueError: the record would not fit one atomic pipe write (PIPE_BUF).
    """
    fields = [
        ("kind", np.uint8),
        ("outcome", np.uint8),
        ("episode", np.int64),
        ("frame_index", np.int64),
        ("image_stamp", np.int64),
        ("reason", f"S{REASON_BYTES}"),
    ]
    for name, f in features.items():
        if f["dtype"] == "image":  # through the image ring
            continue
        shape = tuple(f["shape"])
        fields.append((name, _NP[f["dtype"]], shape) if shape != (1,) else (name, _NP[f["dtype"]]))
    dt = np.dtype(fields)
    if dt.itemsize > select.PIPE_BUF:
        raise ValueError(f"a frame record is {dt.itemsize} bytes, more than PIPE_BUF ({select.PIPE_BUF})")
    return dt
