"""The web viewer (viser): the scene and robot meshes in the browser, play/pause/step/reset, speed and
variant controls, live plots of the reward groups and the head height, and a JSON status endpoint.

``http://<host>:<port>`` is the viewer page; ``http://<host>:<status_port>/status`` (default port + 1)
answers the session's status as JSON (sim time, episode, reset count, qpos, last rewards, paused, speed).
The simulation runs in the thread that calls :meth:`WebViewer.run`; GUI callbacks only queue commands.
"""

from __future__ import annotations

import collections
import contextlib
import io
import ipaddress
import json
import math
import queue
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from upright.viewer.session import Session
from upright.viewer.viser_scene import add_model, update_poses

GROUP_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def is_loopback(host: str) -> bool:
    """True when ``host`` only accepts connections from this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, port: int) -> str | None:
    """The warning printed when the viewer listens beyond this machine (None for a loopback address)."""
    if is_loopback(host):
        return None
    return (
        f"WARNING: the web viewer listens on {host}:{port} with no authentication: anyone who can reach this "
        "machine can watch and control the simulation. Drop web.host (default 127.0.0.1) to keep it local, "
        f"or reach it through SSH: ssh -L {port}:localhost:{port} <this host>"
    )


class WebViewer:
    """Serve ``session`` in the browser.

    Args:
        session: what to play.
        web_cfg: ``host`` (127.0.0.1 by default; any other address prints :func:`exposure_warning` on stderr),
            ``port``, ``status_port`` (None: port + 1; 0: off), ``plot_window_s``.
        speed: initial real-time factor.
        start_paused: start with the simulation paused.
    """

    def __init__(self, session: Session, web_cfg, speed: float = 1.0, start_paused: bool = False):
        import viser

        self.session = session
        self.host = str(web_cfg.host)
        self.port = int(web_cfg.port)
        warning = exposure_warning(self.host, self.port)
        if warning:
            print(warning, file=sys.stderr, flush=True)
        self.speed = float(speed)
        self.paused = bool(start_paused)
        self.plot_window_s = float(web_cfg.plot_window_s)
        self.commands: queue.Queue[tuple[str, object]] = queue.Queue()
        self.lock = threading.Lock()
        self._stop = threading.Event()
        with contextlib.redirect_stdout(io.StringIO()):  # viser prints its own banner; run() prints the URL
            self.server = viser.ViserServer(host=self.host, port=self.port, verbose=False)
        self.port = self.server.get_port()
        self.server.scene.set_up_direction("+z")
        self._build_scene()
        self._build_gui()
        self._history: collections.deque = collections.deque(maxlen=max(2, int(self.plot_window_s / session.dt)))
        status_port = web_cfg.status_port
        if status_port is None:
            status_port = self.port + 1
        self.status_server = self._start_status_server(int(status_port)) if status_port != 0 else None
        shown = "localhost" if self.host in ("0.0.0.0", "::", "127.0.0.1") else self.host
        self.url = f"http://{shown}:{self.port}"
        self.status_url = (
            f"http://{shown}:{self.status_server.server_address[1]}/status" if self.status_server else None
        )

    # ------------------------------------------------------------------ scene and GUI
    def _build_scene(self) -> None:
        s = self.session
        self.server.scene.reset()
        self.bodies = add_model(self.server, s.model)
        update_poses(self.bodies, s.data)
        base = s.data.xpos[s.root_body]
        self.server.initial_camera.position = (float(base[0]) + 1.6, float(base[1]) - 1.6, 1.2)
        self.server.initial_camera.look_at = (float(base[0]), float(base[1]), 0.3)

    def _build_gui(self) -> None:
        gui, s = self.server.gui, self.session
        gui.add_markdown(f"**upright play** · {s.description}")
        self.status_md = gui.add_markdown("starting…")
        with gui.add_folder("Playback"):
            self.play_button = gui.add_button("Play")
            self.pause_button = gui.add_button("Pause")
            self.step_button = gui.add_button("Step")
            self.reset_button = gui.add_button("Reset")
            self.speed_slider = gui.add_slider("Speed", min=0.05, max=4.0, step=0.05, initial_value=self.speed)
            names = [v.name for v in s.variants] or ["recording"]
            self.variant_dropdown = gui.add_dropdown(
                "Posture/terrain", options=names, initial_value=names[s.variant_index]
            )
            if len(names) < 2:
                self.variant_dropdown.disabled = True
        self.play_button.on_click(lambda _: self.commands.put(("play", None)))
        self.pause_button.on_click(lambda _: self.commands.put(("pause", None)))
        self.step_button.on_click(lambda _: self.commands.put(("step", None)))
        self.reset_button.on_click(lambda _: self.commands.put(("reset", None)))
        self.speed_slider.on_update(lambda _: self.commands.put(("speed", float(self.speed_slider.value))))
        self.variant_dropdown.on_update(lambda _: self.commands.put(("variant", self.variant_dropdown.value)))
        with gui.add_folder("Plots"):
            empty = (np.zeros(2), np.zeros(2))
            groups = s.group_names
            if groups:
                series = ({"label": "t (s)"},) + tuple(
                    {"label": g, "stroke": GROUP_COLORS[i % len(GROUP_COLORS)], "width": 1.5}
                    for i, g in enumerate(groups)
                )
                self.reward_plot = gui.add_uplot(
                    data=empty[:1] + tuple(np.zeros(2) for _ in groups),
                    series=series,
                    title="reward per step (groups)",
                    scales={"x": {"time": False}},
                    aspect=1.6,
                )
            else:
                self.reward_plot = None
                gui.add_markdown("_no rewards in this recording_")
            self.head_plot = gui.add_uplot(
                data=empty,
                series=({"label": "t (s)"}, {"label": "head height (m)", "stroke": "#9467bd", "width": 1.5}),
                title="head height (m)",
                scales={"x": {"time": False}},
                aspect=1.6,
            )

    # ------------------------------------------------------------------ status endpoint
    def status(self) -> dict:
        with self.lock:
            out = self.session.status()
        out.update(paused=self.paused, speed=self.speed, url=self.url, connected_clients=len(self.server.get_clients()))
        return out

    def _start_status_server(self, port: int) -> ThreadingHTTPServer:
        viewer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path.rstrip("/") not in ("/status", ""):
                    self.send_error(404, "try /status")
                    return
                body = json.dumps(viewer.status()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # quiet
                pass

        server = ThreadingHTTPServer((self.host, port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="play-status", daemon=True).start()
        return server

    # ------------------------------------------------------------------ loop
    def _handle(self, cmd: str, arg) -> None:
        s = self.session
        if cmd == "play":
            self.paused = False
            if s.finished:
                s.reset()
        elif cmd == "pause":
            self.paused = True
        elif cmd == "step":
            self.paused = True
            self._step()
        elif cmd == "reset":
            s.reset()
            self._history.clear()
        elif cmd == "speed":
            self.speed = max(0.01, float(arg))
        elif cmd == "variant":
            names = [v.name for v in s.variants]
            if arg in names and names.index(arg) != s.variant_index:
                if s.set_variant(names.index(arg)):
                    self._build_scene()
                    self._history.clear()

    def _step(self) -> None:
        s = self.session
        info = s.step()
        self._history.append(
            (s.total_time, info.head_height, [info.reward_groups.get(g, math.nan) for g in s.group_names])
        )

    def _publish(self, plots: bool) -> None:
        s = self.session
        with self.server.atomic():
            update_poses(self.bodies, s.data)
        state = "paused" if self.paused else f"playing ×{self.speed:g}"
        head = s.last_info.head_height
        self.status_md.content = (
            f"t = {s.episode_time:.2f} s · episode {s.episode} · head {head:.2f} m · {state}"
            if not math.isnan(head)
            else f"t = {s.episode_time:.2f} s · episode {s.episode} · {state}"
        )
        if plots and len(self._history) >= 2:
            t = np.array([h[0] for h in self._history])
            self.head_plot.data = (t, np.nan_to_num(np.array([h[1] for h in self._history]), nan=0.0))
            if self.reward_plot is not None:
                g = np.array([h[2] for h in self._history]).reshape(len(t), -1)
                self.reward_plot.data = (t, *(np.nan_to_num(g[:, i]) for i in range(g.shape[1])))

    def run(self, duration: float | None = None, episodes: int | None = None) -> None:
        """Serve until Ctrl-C, :meth:`stop`, ``duration`` sim seconds or ``episodes`` episodes."""
        print(f"Web viewer: {self.url}" + (f"   (status: {self.status_url})" if self.status_url else ""), flush=True)
        if self.host in ("0.0.0.0", "::"):
            print(f"  from another machine: http://{socket.gethostname()}:{self.port}", flush=True)
        s = self.session
        next_step = time.monotonic()
        last_pose = last_plot = 0.0
        while not self._stop.is_set():
            changed = False
            while True:
                try:
                    cmd, arg = self.commands.get_nowait()
                except queue.Empty:
                    break
                with self.lock:
                    self._handle(cmd, arg)
                changed = True
            now = time.monotonic()
            if not self.paused and now >= next_step:
                with self.lock:
                    if s.kind == "replay" and s.finished:
                        s.reset()
                        self._history.clear()
                    else:
                        self._step()
                changed = True
                next_step = max(next_step + s.dt / self.speed, now - 0.25)
                if duration is not None and s.total_time >= duration - 1e-9:
                    break
                if duration is None and episodes is not None and s.episodes_done >= episodes:
                    break
            elif self.paused:
                next_step = now
            if changed and (now - last_pose >= 1 / 30 or self.paused):
                plots = now - last_plot >= 0.25 or self.paused
                self._publish(plots)
                last_pose = now
                if plots:
                    last_plot = now
            time.sleep(min(0.005, max(0.0, next_step - time.monotonic())) if not self.paused else 0.01)

    def stop(self) -> None:
        """Stop the loop and both servers."""
        self._stop.set()
        if self.status_server is not None:
            self.status_server.shutdown()
            self.status_server.server_close()
            self.status_server = None
        self.server.stop()
