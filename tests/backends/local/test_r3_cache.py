"""Reliability round 3 (issue 36), item 5: nothing read from a results, games or cache
folder runs code. The engine cache's pickles are signed with a key of the user's kept
outside the results; a planted pickle is never loaded."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ccpo_lab.backends.local import speedups


class _Boom:
    """Unpickling it creates a marker file (what a planted pickle could do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    _forget_key()
    speedups.use_disk_cache(tmp_path / "results" / ".games" / ".engines")
    yield tmp_path / "results" / ".games" / ".engines"
    speedups.use_disk_cache(None)
    _forget_key()


def _forget_key() -> None:
    """Forget the key read so far (code without a key has none to forget)."""
    key = getattr(speedups, "signing_key", None)
    if key is not None:
        key.cache_clear()


def _cached(calls: list[int]) -> Callable[..., Any]:
    def compute(x: int) -> dict[str, int]:
        calls.append(x)
        return {"value": x * 2}

    return speedups._memoised(compute, copies=True, name="test_fn", persist=True)


def test_a_planted_pickle_is_never_loaded(cache: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "pwned"
    path = speedups._disk_path("test_fn", ((21,), ()))
    assert path is not None and path.parent == cache
    cache.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(_Boom(marker)))  # an unsigned pickle where one is read
    calls: list[int] = []
    assert _cached(calls)(21) == {"value": 42}
    assert not marker.exists() and calls == [21]  # recomputed, nothing run
    assert "not signed by this user's key" in capsys.readouterr().err
    # a forged signature (another key) is no better
    path.write_bytes(speedups.SIGNED + b"\0" * 32 + pickle.dumps(_Boom(marker)))
    assert _cached([])(21) == {"value": 42} and not marker.exists()


def test_a_signed_file_is_read_back_by_another_process_of_the_user(cache: Path) -> None:
    calls: list[int] = []
    assert _cached(calls)(5) == {"value": 10} and calls == [5]
    path = speedups._disk_path("test_fn", ((5,), ()))
    assert path is not None and path.read_bytes().startswith(speedups.SIGNED)
    again: list[int] = []
    assert _cached(again)(5) == {"value": 10} and again == []  # read from disk


def test_the_key_is_private_and_refused_otherwise(cache: Path) -> None:
    assert speedups.signing_key() is not None
    key = speedups.key_file()
    assert oct(key.stat().st_mode & 0o777) == oct(0o600)
    key.chmod(0o644)  # readable by others: anyone could forge a signature
    speedups.signing_key.cache_clear()
    assert speedups.signing_key() is None
    assert speedups._disk_path("test_fn", ((1,), ())) is None  # memory only then
    assert _cached([])(1) == {"value": 2}


def test_a_read_only_home_leaves_the_cache_in_memory(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        ro = tmp_path / "ro-file"
        ro.write_text("")  # root writes anywhere: a config home that is a file stands in
        monkeypatch.setenv("XDG_CONFIG_HOME", str(ro))
    else:
        (tmp_path / "ro").mkdir(mode=0o555)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "ro"))
    speedups.signing_key.cache_clear()
    try:
        assert speedups.signing_key() is None
        speedups.use_disk_cache(tmp_path / "engines")
        assert _cached([])(3) == {"value": 6}
        assert not any((tmp_path / "engines").iterdir())
    finally:
        speedups.use_disk_cache(None)
        speedups.signing_key.cache_clear()


PLAY = ("import sys, hashlib; from pathlib import Path; "
        "from ccpo_lab.backends.local import speedups; "
        "from ccpo_lab.backends.local.games import load_game_set; "
        "from tests.backends.local.test_env import transcript; "
        "speedups.use_disk_cache(Path(sys.argv[2])); "
        "print(hashlib.sha256(transcript(load_game_set(Path(sys.argv[1])), 5)"
        ".encode()).hexdigest())")
"""A fresh process (nothing cached in memory) loading real engines from the disk cache."""


def test_planted_engine_cache_files_never_run_and_the_engines_still_work(
        tmp_path: Path) -> None:
    from ccpo_lab.backends.local.games import GameSpec, ensure_games

    games = ensure_games(tmp_path / "results" / ".games", GameSpec(n_train=2, n_eval=1, seed=7))
    engines = games.root / ".engines"  # where a run and evaluate keep them
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    repo = Path(__file__).resolve().parents[3]

    def play() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", PLAY, str(games.root), str(engines)],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=600)

    first = play()
    assert first.returncode == 0, first.stderr[-2000:]
    written = sorted(engines.glob("*.pickle"))
    assert written  # the load-time results were cached
    marker = tmp_path / "pwned"
    for path in written:  # someone who can write the games folder plants code
        path.write_bytes(pickle.dumps(_Boom(marker)))
    second = play()
    assert not marker.exists()
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout == first.stdout  # the engines still play the same text
    assert second.stderr.count("not signed by this user's key") == 1  # one warning line
    assert all(p.read_bytes().startswith(speedups.SIGNED) for p in written)  # rebuilt


READ_ONE = ("import sys; from pathlib import Path; "
            "from ccpo_lab.backends.local import speedups; "
            "speedups.use_disk_cache(Path(sys.argv[1])); "
            "f = speedups._memoised(lambda x: {'value': 2 * x}, copies=True, name='test_fn', "
            "persist=True); "
            "path = speedups._disk_path('test_fn', ((21,), ())); "
            "Path(sys.argv[2]).write_text(str(path)); "
            "print(f(21))")


def test_a_fifo_or_a_link_in_the_cache_is_not_read(tmp_path: Path) -> None:
    """A FIFO planted where a cache file is read would block the run for ever, a link to
    ``/dev/zero`` would fill its memory: neither is opened for reading."""
    engines = tmp_path / "results" / ".games" / ".engines"
    engines.mkdir(parents=True)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    repo = Path(__file__).resolve().parents[3]
    where = tmp_path / "where"

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", READ_ONE, str(engines), str(where)],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=120)

    assert run().stdout.strip() == "{'value': 42}"  # the file is written, signed
    path = Path(where.read_text())
    for plant in ("fifo", "link"):
        path.unlink()
        if plant == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero")
        try:
            out = run()  # on the code before: blocked for ever (the timeout fails it)
        except subprocess.TimeoutExpired:
            pytest.fail(f"a {plant} in the engine cache blocked the run")
        assert out.returncode == 0 and out.stdout.strip() == "{'value': 42}", out.stderr
        assert path.is_file() and not path.is_symlink()  # replaced by a signed file
