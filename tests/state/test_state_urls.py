"""Choosing a store by URL, and importing without optional packages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import _state_support
import pytest
from _state_support import RedisServer

from callwarden.state import Counter, MemoryStore, SQLiteStore, StateStore, open_store
from callwarden.state._redis import RedisStore


@pytest.mark.parametrize("url", ["memory", "memory://", "MEMORY"])
def test_memory_url_opens_a_memory_store(url: str) -> None:
    assert isinstance(open_store(url), MemoryStore)


def test_sqlite_url_with_three_slashes_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///relative.db") as store:
        store.consume([Counter("k", 1, None)], now=1.0, commit=True)
    assert (tmp_path / "relative.db").exists()


def test_sqlite_url_with_four_slashes_is_absolute(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path}/absolute.db") as store:
        store.consume([Counter("k", 1, None)], now=1.0, commit=True)
    assert (tmp_path / "absolute.db").exists()


def test_sqlite_url_query_sets_store_options(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/s.db?prefix=cw_&timeout=0.5&history_ttl=60")
    assert isinstance(store, SQLiteStore)
    assert (store._prefix, store._timeout, store._history_ttl) == ("cw_", 0.5, 60.0)


def test_keyword_options_win_over_the_url(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/s.db?prefix=cw_", prefix="kw_")
    assert isinstance(store, SQLiteStore)
    assert store._prefix == "kw_"


def test_redis_url_prefix_names_the_key_prefix(redis_server: RedisServer) -> None:
    with open_store(f"{redis_server.url}?prefix=app1:", timeout=0.3) as store:
        assert isinstance(store, RedisStore)
        store.consume([Counter("k", 1, None)], now=1.0, commit=True)
        [key, _] = store._counter_keys(Counter("k", 1, None))
        assert key.startswith("app1:t:") and store._client.exists(key) == 1
        assert (store._prefix, store._timeout) == ("app1:", 0.3)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgres://localhost/db", "Unknown state store"),
        ("sqlite://host/x.db", "has a host"),
        ("sqlite:///", "names no file"),
        ("sqlite:///x.db?colour=red", "Unknown option 'colour'"),
        ("sqlite:///x.db?timeout=soon", "must be a number"),
    ],
)
def test_bad_urls_are_rejected_with_a_hint(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        open_store(url)


def test_every_store_is_a_state_store(tmp_path: Path) -> None:
    assert issubclass(MemoryStore, StateStore) and issubclass(SQLiteStore, StateStore)
    assert issubclass(RedisStore, StateStore)


def test_importing_the_state_package_does_not_import_redis() -> None:
    code = "import sys, callwarden.state; sys.exit('redis' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    assert subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == 0


def test_missing_redis_server_fails_with_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_state_support.shutil, "which", lambda name: None)
    monkeypatch.setattr(_state_support.os.path, "exists", lambda path: False)
    with pytest.raises(pytest.fail.Exception, match="apt-get install redis-server"):
        _state_support.redis_server_binary()


def test_every_exported_name_exists_and_has_a_docstring() -> None:
    import callwarden.state as state

    assert all(getattr(state, name).__doc__ for name in state.__all__)
