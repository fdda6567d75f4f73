"""``callwarden mcp wrap``: a client's MCP config with every command server behind the gateway,
and the wrapped config driving a real session through the gateway."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from callwarden.cli import main

UPSTREAM = Path(__file__).parents[1] / "fixtures" / "mcp_files_server.py"
CLI = Path(sys.executable).with_name("callwarden")


def client_config(tmp_path: Path) -> Path:
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"theme": "dark", "mcpServers": {
        "Files": {"command": sys.executable, "args": [str(UPSTREAM), str(tmp_path / "ran")],
                  "env": {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}},
        "remote": {"type": "http", "url": "https://mcp.example.com/mcp",
                   "headers": {"Authorization": "Bearer t0k"}},
        "odd": {"note": "neither"},
        "done": {"command": "callwarden", "args": ["mcp", "--policy", "p.yaml", "--", "x"]},
    }}, indent=2))
    return config


def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text("version: 1\nrules:\n"
                    "  - {id: no-delete, match: {tool: mcp__files__delete_file}, effect: deny}\n")
    return path


def test_wrap_prints_the_change_and_writes_it_only_when_asked(tmp_path: Path, capsys) -> None:
    config = client_config(tmp_path)
    before = config.read_text()
    assert main(["mcp", "wrap", str(config), "--policy", str(policy(tmp_path))]) == 0
    out, err = capsys.readouterr()
    assert "+        \"mcp\"," in out and "--name" in out
    assert "odd: neither a 'command' nor a 'url'" in err
    assert "done: already behind callwarden" in err
    assert config.read_text() == before  # a dry run
    assert main(["mcp", "wrap", str(config), "--policy", str(policy(tmp_path)),
                 "--write"]) == 0
    wrapped = json.loads(config.read_text())
    files = wrapped["mcpServers"]["Files"]
    assert files["command"] == "callwarden"
    assert files["args"][:6] == ["mcp", "--policy", str(policy(tmp_path)), "--name", "files",
                                 "--"]
    assert files["args"][6:] == [sys.executable, str(UPSTREAM), str(tmp_path / "ran")]
    assert files["env"]["PYTHONPATH"]  # kept
    assert wrapped["mcpServers"]["remote"] == {"command": "callwarden", "args": [
        "mcp", "--policy", str(policy(tmp_path)), "--name", "remote", "--upstream",
        "https://mcp.example.com/mcp", "--header", "Authorization: Bearer t0k"]}
    assert wrapped["theme"] == "dark"
    assert (tmp_path / "claude_desktop_config.json.bak").read_text() == before
    # Wrapping again changes nothing: every command server is already behind callwarden.
    assert main(["mcp", "wrap", str(config), "--policy", str(policy(tmp_path)),
                 "--write"]) == 0
    assert "nothing to wrap" in capsys.readouterr().err
    assert not (tmp_path / "claude_desktop_config.json.bak.1").exists()


async def test_the_wrapped_config_runs_through_the_gateway(tmp_path: Path) -> None:
    config = client_config(tmp_path)
    assert main(["mcp", "wrap", str(config), "--policy", str(policy(tmp_path)),
                 "--command", str(CLI), "--write"]) == 0
    server = json.loads(config.read_text())["mcpServers"]["Files"]
    params = StdioServerParameters(command=server["command"], args=server["args"],
                                   env={**os.environ, **server["env"]})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        denied = await session.call_tool("delete_file", {"path": "a"})
        read_ok = await session.call_tool("read_file", {"path": "a"})
    assert denied.is_error and not read_ok.is_error
    assert [json.loads(line)["tool"] for line in (tmp_path / "ran").read_text().splitlines()] \
        == ["read_file"]


def test_wrap_refuses_what_is_not_a_client_config(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"servers": 3}')
    assert main(["mcp", "wrap", str(bad), "--policy", str(policy(tmp_path))]) == 2
    assert "not an MCP client config" in capsys.readouterr().err
    assert main(["mcp", "wrap", str(bad)]) == 2  # no policy given
    assert main(["mcp", "wrap", str(tmp_path / "none.json"), "--policy",
                 str(policy(tmp_path))]) == 2
