"""The play config (same task configs as train.py + play keys), the viewer choice and the native key plumbing."""

from __future__ import annotations

import pytest
from hydra import compose, initialize


def _compose(overrides: list[str]):
    from upright.viewer.config import register_play_config

    register_play_config()
    with initialize(version_base=None, config_path=None):
        return compose(config_name="play", overrides=overrides)


def test_play_config_has_task_and_play_keys():
    from upright.viewer.config import ViewerKind

    cfg = _compose(
        ["task=standup", "policy=zero", "viewer=web", "env.episode_length_s=3", "render.width=320", "beta=0.5"]
    )
    assert cfg.task_name == "standup" and cfg.env.episode_length_s == 3 and cfg.train.actor_hidden_dims[0] == 512
    assert cfg.viewer == ViewerKind.web and cfg.policy == "zero" and cfg.render.width == 320 and cfg.beta == 0.5
    assert cfg.web.port == 8080 and cfg.randomize is False


def test_invalid_play_overrides_are_refused():
    from upright.conf.validate import validate_overrides

    assert validate_overrides(["policy=zero", "viewer=web"], config_name="play") is None
    assert "viewer" in validate_overrides(["viewer=window"], config_name="play")
    assert "replay" in validate_overrides(["replai=x.npz"], config_name="play")


@pytest.mark.parametrize(
    "env, overrides, expected",
    [
        ({"DISPLAY": ":0"}, ["viewer=auto"], "native"),
        ({"WAYLAND_DISPLAY": "wayland-0"}, ["viewer=auto"], "native"),
        ({}, ["viewer=auto"], "web"),
        ({"DISPLAY": ":0"}, ["viewer=auto", "video=x.mp4"], "video"),
        ({}, ["viewer=web", "video=x.mp4"], "video"),
        ({"DISPLAY": ":0"}, ["viewer=web"], "web"),
    ],
)
def test_viewer_choice(monkeypatch, env, overrides, expected):
    from upright.viewer.cli import choose_viewer

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert choose_viewer(_compose(overrides)).value == expected


def test_native_viewer_without_display_is_a_clear_error(monkeypatch):
    from upright.viewer.cli import PlayError, play

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(PlayError, match="needs a display"):
        play(_compose(["policy=zero", "viewer=native"]))


def test_native_keys(capsys):
    from upright.viewer import native

    c = native.NativeControls(speed=1.0)
    c.on_key(native.KEY_SPACE)
    c.on_key(native.KEY_MINUS)
    c.on_key(native.KEY_MINUS)
    c.on_key(native.KEY_RIGHT)
    c.on_key(native.KEY_RIGHT)
    c.on_key(native.KEY_BACKSPACE)
    c.on_key(native.KEY_PAGE_DOWN)
    assert c.take() == (True, 2, True, 1, 0.25)
    assert c.take() == (True, 0, False, 0, 0.25)  # one-shot requests are cleared
    c.on_key(native.KEY_EQUAL)
    c.on_key(native.KEY_SPACE)
    assert c.take()[0] is False and c.speed == 0.5


def test_variant_switch_with_one_variant_says_so(capsys, monkeypatch):
    from upright.viewer import variants
    from upright.viewer.native import switch_variant
    from upright.viewer.variants import find_variant, task_variants

    monkeypatch.setitem(variants.TASK_VARIANTS, "standup", (variants.Variant("ground/supine", "supine", "ground"),))

    class Fake:
        variants = task_variants("standup")
        variant_index = 0
        model = object()

    assert [v.name for v in Fake.variants] == ["ground/supine"]
    assert switch_variant(Fake(), +1) is False
    assert "only one posture/terrain variant available (ground/supine)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="has variants"):
        find_variant("standup", "wall/prone")


def test_standup_variants_are_the_terrain_posture_combinations():
    from upright.viewer.variants import find_variant, task_variants

    names = [v.name for v in task_variants("standup")]
    assert names == ["ground/supine", "ground/prone", "platform/supine", "wall/supine", "slope/supine", "slope/prone"]
    slope = task_variants("standup")[names.index("slope/prone")]
    assert slope.env_overrides["terrain"] == "slope" and slope.env_overrides["posture"] == "prone"
    assert slope.env_overrides["curriculum.beta_min"] == 0.3 and slope.env_overrides["unactuated_steps"] == 50
    with pytest.raises(ValueError, match="has variants"):
        find_variant("standup", "wall/prone")  # HoST's wall start is seated: no prone
