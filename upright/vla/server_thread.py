"""A :class:`~upright.vla.server.PolicyServer` on a thread of its own (:class:`BackgroundServer`: tests, benchmarks,
notebooks)."""

from __future__ import annotations

import asyncio
import threading

from upright.vla.policy import ChunkPolicy
from upright.vla.server import PolicyServer
from upright.vla.server_metadata import DEFAULT_HOST


class BackgroundServer:
    """A :class:`PolicyServer` on a thread of its own (tests, benchmarks, notebooks); a context manager.

    ``port=0`` (the default) picks a free port: read :attr:`port`. :meth:`stop` closes it. Other keyword arguments
    (``key_map``, ``max_batch``, ``max_message_bytes``, ``send_timeout_s``, ``api_key``) go to :class:`PolicyServer`.

    Raises:
        OSError: the address cannot be bound (raised by the constructor).
        ValueError: as :class:`PolicyServer`.
    """

    def __init__(self, policy: ChunkPolicy, host: str = DEFAULT_HOST, port: int = 0, **kwargs):
        self.server = PolicyServer(policy, host, port, **kwargs)
        self.host = host
        self.port: int | None = None
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._bound = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="upright-policy-server", daemon=True)
        self._thread.start()
        self._bound.wait(timeout=30.0)
        if self._error is not None:
            raise self._error
        if self.port is None:
            raise RuntimeError("the policy server thread did not start within 30 s")

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def run():
            self._stop = asyncio.Event()
            await self.server.run(self._stop, on_bound=self._on_bound)

        try:
            self._loop.run_until_complete(run())
        except BaseException as e:  # noqa: BLE001  reported to the constructor
            self._error = e
            self._bound.set()
        finally:
            self._loop.close()

    def _on_bound(self, port: int) -> None:
        self.port = port
        self._bound.set()

    @property
    def url(self) -> str:
        """``ws://host:port``."""
        return f"ws://{self.host}:{self.port}"

    def stop(self) -> None:
        """Close the listening socket and every connection; returns once the thread has ended (5 s at most)."""
        if self._thread.is_alive() and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=5.0)

    def __enter__(self) -> BackgroundServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
