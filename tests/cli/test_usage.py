"""Usage errors: every command answers a missing argument, an unknown option or an unknown
command with its usage line and exit code 2 (never ``internal error``)."""

from __future__ import annotations

import pytest
import typer

from ccpo_lab.cli.main import app, main


def _commands() -> list[tuple[list[str], bool]]:
    """``(path, has a required argument)`` of every leaf command of the CLI."""
    out: list[tuple[list[str], bool]] = []

    def walk(cmd: object, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in sorted(subs.items()):
                walk(sub, [*path, name])
            return
        params = getattr(cmd, "params", [])
        out.append((path, any(getattr(p, "required", False) for p in params)))

    walk(typer.main.get_command(app), [])
    return out


COMMANDS = _commands()


def test_every_command_is_covered() -> None:
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"sweep", "status", "cancel", "verify", "report", "sync", "import", "doctor",
            "evaluate", "arms list", "arms show", "arms diff", "games make"} <= names


@pytest.mark.parametrize(("path", "required"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_unknown_option_is_a_usage_error(path: list[str], required: bool,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*path, "--no-such-option"]) == 2
    err = capsys.readouterr().err
    assert f"Usage: ccpo-lab {' '.join(path)}" in err and "No such option" in err
    assert "internal error" not in err


@pytest.mark.parametrize("path", [p for p, required in COMMANDS if required],
                         ids=[" ".join(p) for p, r in COMMANDS if r])
def test_missing_argument_is_a_usage_error(path: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(path) == 2
    err = capsys.readouterr().err
    assert f"Usage: ccpo-lab {' '.join(path)}" in err and "Missing" in err
    assert "internal error" not in err


@pytest.mark.parametrize("argv", [["nosuch"], ["arms", "nosuch"], ["import", "x", "y"]])
def test_unknown_command_or_missing_option(argv: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Usage: ccpo-lab" in err and "internal error" not in err


def test_no_arguments_prints_the_help() -> None:
    assert main([]) == 2  # no_args_is_help: the help, as a usage error


def test_a_bug_is_an_internal_error(monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    def boom(*_a: object, **_k: object) -> None:
        raise KeyError("plumbing")

    monkeypatch.setattr("ccpo_lab.config.arms.arm_names", boom)
    assert main(["arms", "list"]) == 1
    assert "internal error: KeyError" in capsys.readouterr().err
