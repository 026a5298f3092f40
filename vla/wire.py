"""openpi's wire format: msgpack with numpy arrays and scalars as tagged maps (our own code, same bytes).

openpi (``openpi_client/msgpack_numpy.py``, Physical-Intelligence/openpi ``packages/openpi-client``) sends every
message as msgpack. A numpy array becomes the map ``{b"__ndarray__": True, b"data": <C-order bytes>,
b"dtype": <dtype.str, e.g. "<f4">, b"shape": [d0, d1, ...]}`` (bin keys, in that order); a numpy scalar that msgpack
cannot pack itself (``np.bool_``, ``np.float32``, ``np.int64``, ...) becomes ``{b"__npgeneric__": True,
b"data": <scalar.item()>, b"dtype": <dtype.str>}``. ``np.float64`` and ``np.str_`` subclass ``float`` and ``str``
and go out as plain msgpack values, as in openpi. Object, structured ("void") and complex dtypes are refused.
:func:`packb` gives the same bytes as ``openpi_client.msgpack_numpy.packb`` and :func:`unpackb` reads them back to
the same values (``tests/vla/test_wire.py`` checks both against the real package).

The protocol on top (openpi's ``WebsocketPolicyServer``): the server sends its metadata (a packed dict) as the first
message after a client connects; then each request is one packed, unbatched observation dict and each reply a packed
dict with ``"actions"`` (H, A) (openpi adds ``"server_timing"``: ``{"infer_ms": ..., "prev_total_ms": ...}``). An error
is sent as a *text* frame (openpi sends the traceback, then closes the connection with code 1011);
:func:`actions_from_reply` turns it into an exception.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

_NDARRAY = b"__ndarray__"
_NPGENERIC = b"__npgeneric__"
_REFUSED_KINDS = {"O": "object", "V": "structured/void", "c": "complex"}


def _encode(obj: Any) -> Any:
    """msgpack's ``default`` hook: numpy arrays and scalars to openpi's tagged maps.

    Raises:
        ValueError: an object, structured or complex dtype (openpi refuses them too).
        TypeError: any other type msgpack cannot pack (a torch tensor: call ``.numpy()`` first).
    """
    if isinstance(obj, (np.ndarray, np.generic)):
        kind = obj.dtype.kind
        if kind in _REFUSED_KINDS:
            raise ValueError(f"cannot pack a numpy {_REFUSED_KINDS[kind]} array or scalar (dtype {obj.dtype}): "
                             "the openpi wire format carries numeric, bool and fixed-width string dtypes only")
        if isinstance(obj, np.ndarray):
            return {_NDARRAY: True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": obj.shape}
        return {_NPGENERIC: True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"cannot pack a {type(obj).__module__}.{type(obj).__qualname__}: send numpy arrays "
                    "(tensor.cpu().numpy()), numbers, strings, lists or dicts")


def _decode(obj: dict) -> Any:
    """msgpack's ``object_hook``: openpi's tagged maps back to numpy (arrays are read-only views of the message).

    Raises:
        ValueError: a tagged map with a refused dtype or with data that does not fill its shape.
    """
    if _NDARRAY in obj:
        dtype = np.dtype(obj[b"dtype"])
        if dtype.kind in _REFUSED_KINDS:
            raise ValueError(f"refusing to unpack a {_REFUSED_KINDS[dtype.kind]} array (dtype {dtype})")
        try:
            return np.ndarray(buffer=obj[b"data"], dtype=dtype, shape=obj[b"shape"])
        except TypeError as e:
            raise ValueError(f"malformed packed array (dtype {dtype}, shape {obj[b'shape']}): {e}") from None
    if _NPGENERIC in obj:
        return np.dtype(obj[b"dtype"]).type(obj[b"data"])
    return obj


def packb(obj: Any) -> bytes:
    """Pack ``obj`` (dicts, lists, numbers, strings, numpy arrays and scalars) into one openpi message.

    Raises:
        ValueError: a numpy object, structured or complex dtype.
        TypeError: a type msgpack cannot pack (torch tensors included).
    """
    return msgpack.packb(obj, default=_encode)


def unpackb(data: bytes) -> Any:
    """Unpack one openpi message (numpy arrays come back read-only; copy them to write).

    Raises:
        ValueError: malformed msgpack or a malformed or refused packed array.
    """
    try:
        return msgpack.unpackb(data, object_hook=_decode)
    except (msgpack.UnpackException, msgpack.ExtraData, ValueError) as e:
        raise ValueError(f"not an openpi (msgpack-numpy) message: {type(e).__name__} {e}".rstrip()) from None


def actions_from_reply(message: bytes | str, source: str = "policy server") -> tuple[np.ndarray, dict]:
    """The (H, A) float32 ``"actions"`` of a server's reply, and the whole unpacked reply.

    Args:
        message: the websocket message, as received.
        source: who sent it, for error messages (e.g. ``"policy server at 127.0.0.1:8000"``).

    Raises:
        RuntimeError: the server answered with a text frame (its error message, or openpi's traceback).
        ValueError: the reply is not a dict with an ``"actions"`` array of 2 dimensions.
    """
    if isinstance(message, str):
        raise RuntimeError(f"{source} answered with an error: {message.strip()}")
    reply = unpackb(message)
    if not isinstance(reply, dict) or "actions" not in reply:
        keys = sorted(map(str, reply)) if isinstance(reply, dict) else type(reply).__name__
        raise ValueError(f"{source} replied without 'actions' (got {keys}); is it an openpi policy server?")
    actions = np.asarray(reply["actions"])
    if actions.ndim != 2 or actions.dtype.kind not in "fiub":
        raise ValueError(f"{source} replied 'actions' of shape {actions.shape} and dtype {actions.dtype}; "
                         "expected a numeric (H, A) array")
    return actions.astype(np.float32), reply
