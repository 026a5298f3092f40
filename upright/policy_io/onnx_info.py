"""What upright reads from an ONNX file without running it: its metadata and its graph's inputs and outputs, through
onnxruntime (a dependency of the slim robot install), and the nodes of a domain onnxruntime lacks, through the ``onnx``
package where it is installed (the training install; it only sharpens an error message).

onnxruntime parses the file with its own ONNX protobuf reader: :func:`read` builds a session with graph optimisation
off on the CPU provider and asks it for ``get_modelmeta().custom_metadata_map``, ``get_inputs()`` and
``get_outputs()`` (initialisers are not graph inputs there). A file onnxruntime cannot load (not ONNX, truncated, an
operator it does not implement) raises :class:`OnnxFileError` with onnxruntime's own first line. A policy load asks
for the metadata, the graph and the kind in turn; :func:`read` parses a file once per version of it (the last few
files, keyed by path, device, inode, size and modification and change times, so a file replaced or rewritten on disk
is read again; a parse during which the file changed is not kept).
"""

from __future__ import annotations

import functools
import pathlib
from dataclasses import dataclass


class OnnxFileError(ValueError):
    """onnxruntime cannot load the file (not ONNX, damaged, or an operator it does not implement)."""


@dataclass(frozen=True)
class OnnxInfo:
    """The parts of an ONNX file upright reads before it runs it."""

    metadata: dict[str, str]
    """``metadata_props`` (key -> value string; upright's values are JSON)."""
    inputs: dict[str, list[int]]
    """Graph input name -> declared shape; a dimension without a fixed size (named or dynamic) is -1."""
    outputs: dict[str, list[int]]
    """Graph output name -> declared shape, as :attr:`inputs`."""


def _dims(shape) -> list[int]:
    return [d if isinstance(d, int) else -1 for d in shape]


def read(path: str | pathlib.Path) -> OnnxInfo:
    """Read an ONNX file's metadata and graph inputs/outputs with onnxruntime.

    Returns:
        A new :class:`OnnxInfo` each call (its dicts are the caller's to change).

    Raises:
        OSError: no such file, or it cannot be read.
        OnnxFileError: onnxruntime cannot load it (the message is onnxruntime's first line).
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    st = path.stat()
    key = (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    info = _read_version(*key)
    after = path.stat()
    if (after.st_size, after.st_mtime_ns, after.st_ctime_ns) != key[3:]:  # written while being read
        _read_version.cache_clear()  # never keep that parse; this call returns it (the file's state is the writer's)
    return OnnxInfo(
        metadata=dict(info.metadata),
        inputs={k: list(v) for k, v in info.inputs.items()},
        outputs={k: list(v) for k, v in info.outputs.items()},
    )


@functools.lru_cache(maxsize=8)
def _read_version(path: str, device: int, inode: int, size: int, mtime_ns: int, ctime_ns: int) -> OnnxInfo:
    """:func:`read` of one version of a file (the arguments past ``path`` only key the cache; errors are not cached)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    try:
        session = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime's pybind errors share no base class but Exception
        text = str(err).strip().splitlines()
        raise OnnxFileError(text[0] if text else type(err).__name__) from err
    return OnnxInfo(
        metadata=dict(session.get_modelmeta().custom_metadata_map),
        inputs={i.name: _dims(i.shape) for i in session.get_inputs()},
        outputs={o.name: _dims(o.shape) for o in session.get_outputs()},
    )


STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "com.microsoft")
"""Operator domains onnxruntime implements."""


def custom_ops(path: str | pathlib.Path) -> list[str]:
    """``domain::op (node 'name')`` of the graph's nodes of a domain onnxruntime does not implement, read with the
    ``onnx`` package; [] when it is not installed (the slim robot install) or the file cannot be read as ONNX."""
    try:
        import onnx
    except ImportError:
        return []
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - not ONNX at all: the caller's message says what onnxruntime said
        return []
    local = {f.domain for f in model.functions}
    return [
        f"{n.domain}::{n.op_type} (node '{n.name}')"
        for n in model.graph.node
        if n.domain not in STANDARD_DOMAINS and n.domain not in local
    ]
