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
            raise ValueError(
                f"cannot pack a numpy {_REFUSED_KINDS[kind]} array or scalar (dtype {obj.dtype}): "
                "the openpi wire format carries numeric, bool and fixed-width string dtypes only"
            )
        if isinstance(obj, np.ndarray):
            return {_NDARRAY: True, b"data": obj.tobytes(), b"dtype": obj.dtype.str, b"shape": obj.shape}
        return {_NPGENERIC: True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(
        f"cannot pack a {type(obj).__module__}.{type(obj).__qualname__}: send numpy arrays "
        "(tensor.cpu().numpy()), numbers, strings, lists or dicts"
    )


class MalformedMessage(ValueError):
    """A message that is valid msgpack but not a valid openpi message (a bad packed array or scalar)."""


def _dtype(spec: Any) -> np.dtype:
    """The numpy dtype of a packed array's or scalar's ``dtype`` field (openpi sends ``dtype.str``, e.g. ``"<f4"``).

    Raises:
        MalformedMessage: not a string, not a dtype numpy knows, or an object, structured or complex dtype.
    """
    if isinstance(spec, bytes):
        spec = spec.decode("ascii", "replace")
    if not isinstance(spec, str):
        raise MalformedMessage(f"bad dtype {spec!r:.40} in a packed array (openpi sends dtype.str, e.g. '<f4')")
    try:
        dtype = np.dtype(spec)
    except (TypeError, ValueError):
        raise MalformedMessage(
            f"bad dtype {spec!r:.40} in a packed array (openpi sends dtype.str, e.g. '<f4')"
        ) from None
    if dtype.kind in _REFUSED_KINDS:
        raise MalformedMessage(f"refusing to unpack a {_REFUSED_KINDS[dtype.kind]} array (dtype {dtype})")
    return dtype


def _decode(obj: dict) -> Any:
    """msgpack's ``object_hook``: openpi's tagged maps back to numpy (arrays are read-only views of the message).

    Raises:
        MalformedMessage: a tagged map without its fields, with a bad or refused dtype, or with data that does not
            fill its shape.
    """
    if _NDARRAY in obj:
        missing = [k.decode() for k in (b"data", b"dtype", b"shape") if k not in obj]
        if missing:
            raise MalformedMessage(f"packed array without {missing} (openpi sends data, dtype and shape)")
        dtype, shape = _dtype(obj[b"dtype"]), obj[b"shape"]
        try:
            return np.ndarray(buffer=obj[b"data"], dtype=dtype, shape=shape)
        except (TypeError, ValueError) as e:
            raise MalformedMessage(f"malformed packed array (dtype {dtype}, shape {shape!r:.60}): {e}") from None
    if _NPGENERIC in obj:
        if b"data" not in obj or b"dtype" not in obj:
            raise MalformedMessage("packed numpy scalar without data or dtype")
        dtype = _dtype(obj[b"dtype"])
        try:
            return dtype.type(obj[b"data"])
        except (TypeError, ValueError, OverflowError) as e:
            raise MalformedMessage(f"malformed packed scalar (dtype {dtype}): {e}") from None
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

    Any failure is a ``ValueError`` with a one-line message (a server answers it as a bad request, never with a
    traceback): whatever msgpack raises on malformed bytes (``FormatError``, ``ExtraData``, a non-string map key,
    nesting deeper than its stack, ...) is wrapped.

    Raises:
        MalformedMessage: a malformed or refused packed array or scalar (a ``ValueError``).
        ValueError: bytes that are not msgpack.
    """
    try:
        return msgpack.unpackb(data, object_hook=_decode)
    except MalformedMessage:
        raise
    except Exception as e:  # noqa: BLE001  (untrusted bytes: every failure is "not an openpi message")
        detail = " ".join(f"{type(e).__name__} {e or '(invalid msgpack)'}".split())[:200]
        raise ValueError(f"not an openpi (msgpack-numpy) message: {detail}") from None


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
        raise ValueError(
            f"{source} replied 'actions' of shape {actions.shape} and dtype {actions.dtype}; "
            "expected a numeric (H, A) array"
        )
    return actions.astype(np.float32), reply
