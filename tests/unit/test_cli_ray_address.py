"""The command line starts its own Ray on loopback, and leaves a joined cluster alone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memorybus.cli import build_parser, local_ray_on_loopback

SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["ls"], {}, "0"),
        (["simulate"], {}, "0"),
        (["ls", "--ray-address", "10.0.0.5:6379"], {}, None),
        (["simulate", "--address", "10.0.0.5:6379"], {}, None),
        (["ls"], {"RAY_ADDRESS": "10.0.0.5:6379"}, None),
        (["ls"], {SWITCH: "1"}, "1"),  # an operator's explicit choice stands
    ],
)
def test_the_switch_is_set_only_for_a_ray_the_command_starts(monkeypatch, argv, env, expected):
    monkeypatch.delenv(SWITCH, raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    local_ray_on_loopback(build_parser().parse_args(argv))
    assert os.environ.get(SWITCH) == expected


def test_a_ray_started_after_the_switch_binds_to_loopback():
    """What the switch buys, checked on a real Ray: its node address is 127.0.0.1."""
    code = (
        "from memorybus.cli import build_parser, local_ray_on_loopback\n"
        "local_ray_on_loopback(build_parser().parse_args(['ls']))\n"
        "import ray\n"
        "ray.init(num_cpus=1, include_dashboard=False, configure_logging=False)\n"
        "print('NODE', ray.util.get_node_ip_address())\n"
        "ray.shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (SWITCH, "RAY_ADDRESS")}
    out = subprocess.run([sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "NODE 127.0.0.1" in out.stdout
