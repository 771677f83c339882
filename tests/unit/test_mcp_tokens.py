"""The MCP server's bearer-token file must be private to its owner: a file its group or
others may read is refused with ConfigError naming the file and the fix, by the loader
and by ``memorybus mcp`` before any bus starts (no Ray, no server)."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("mcp")

import memorybus as mb
from memorybus.cli import main as cli
from memorybus.integrations.mcp import load_tokens

TOKENS = {"tok-alice-0123456789": {"org": "acme", "user": "alice", "agent": "claude"}}


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    return path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o660, 0o666, 0o602, 0o610])
def test_a_token_file_others_may_access_is_refused_with_the_fix(token_file, mode):
    os.chmod(token_file, mode)
    with pytest.raises(mb.ConfigError) as caught:
        load_tokens(token_file)
    message = str(caught.value)
    assert str(token_file) in message and "chmod 600" in message and f"{mode:04o}" in message
    assert "tok-alice" not in message  # the message never shows a token


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_private_token_file_loads(token_file, mode):
    os.chmod(token_file, mode)
    assert load_tokens(token_file) == {"tok-alice-0123456789": mb.Context("acme", "alice", "claude")}


def test_the_cli_refuses_a_readable_token_file_before_starting_a_bus(token_file, tmp_path, capsys):
    os.chmod(token_file, 0o644)
    data = tmp_path / "data"
    assert cli(["mcp", "--transport", "http", "--tokens", str(token_file), "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err
    assert "chmod 600" in err and str(token_file) in err
    assert not data.exists()  # refused before anything was created


def test_a_missing_or_broken_file_is_still_a_config_error(tmp_path, token_file):
    with pytest.raises(mb.ConfigError, match="cannot read"):
        load_tokens(tmp_path / "absent.json")
    token_file.write_text("{not json")
    os.chmod(token_file, 0o600)
    with pytest.raises(mb.ConfigError, match="cannot read"):
        load_tokens(token_file)
