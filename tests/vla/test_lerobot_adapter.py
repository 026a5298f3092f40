"""The LeRobot adapter refuses to construct, with the fix, where lerobot >= 0.5 cannot be imported.

Only the refusal is tested: no LeRobot policy is loaded here (lerobot >= 0.5 needs Python >= 3.12).
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from upright.vla.lerobot_adapter import LeRobotPolicy


def test_construction_without_lerobot_fails_with_one_line_naming_the_requirement():
    if sys.version_info >= (3, 12) and importlib.util.find_spec("lerobot") is not None:
        pytest.skip("lerobot is importable here: the refusal path does not apply")
    with pytest.raises(ImportError) as err:
        LeRobotPolicy(object())
    msg = str(err.value)
    assert "\n" not in msg and 'pip install "lerobot>=0.5"' in msg
    if sys.version_info < (3, 12):
        assert "Python >= 3.12" in msg and f"Python {sys.version_info.major}.{sys.version_info.minor}" in msg
    with pytest.raises(ImportError, match=r"lerobot>=0\.5"):
        LeRobotPolicy.from_pretrained("lerobot/smolvla_base")
