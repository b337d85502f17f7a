"""``ccpo-lab``: the Typer application and its one error boundary.

A :class:`~ccpo_lab.errors.UserError` prints one line (``error: ...``) and exits 2, a
usage error (missing argument, unknown command or option) its usage line and exits 2; an
:class:`~ccpo_lab.errors.EnvironmentFailure` (a full disk, an I/O error) one line and exits
1; an :class:`OSError` of the environment that reaches the boundary (a read-only or full
disk, a symlink loop, a permission) one line naming the path and what to do
(:func:`~ccpo_lab.errors.os_failure`); any other exception prints one line pointing at
``CCPO_LAB_DEBUG=1`` and exits 1. With ``CCPO_LAB_DEBUG=1`` the traceback is shown.
"""

from __future__ import annotations

import os
import sys

# Rich help costs ~90 ms of imports (rich.markdown, rich.traceback) on every start; it is
# rendered for people at a terminal, and plain help is printed when the output is piped.
if "TYPER_USE_RICH" not in os.environ and not sys.stdout.isatty():
    os.environ["TYPER_USE_RICH"] = "0"

import typer  # noqa: E402

import ccpo_lab  # noqa: E402
from ccpo_lab.cli import arms as arms_cmd  # noqa: E402
from ccpo_lab.cli import cancel as cancel_cmd  # noqa: E402
from ccpo_lab.cli import card as card_cmd  # noqa: E402
from ccpo_lab.cli import doctor as doctor_cmd  # noqa: E402
from ccpo_lab.cli import evaluate as evaluate_cmd  # noqa: E402
from ccpo_lab.cli import games as games_cmd  # noqa: E402
from ccpo_lab.cli import importer as import_cmd  # noqa: E402
from ccpo_lab.cli import init as init_cmd  # noqa: E402
from ccpo_lab.cli import install as install_cmd  # noqa: E402
from ccpo_lab.cli import rehearse as rehearse_cmd  # noqa: E402
from ccpo_lab.cli import report as report_cmd  # noqa: E402
from ccpo_lab.cli import status as status_cmd  # noqa: E402
from ccpo_lab.cli import sweep as sweep_cmd  # noqa: E402
from ccpo_lab.cli import sync as sync_cmd  # noqa: E402
from ccpo_lab.cli import verify as verify_cmd  # noqa: E402
from ccpo_lab.errors import MESSAGE_CHARS, UserError, cut, os_failure  # noqa: E402
from ccpo_lab.textout import prepare_streams  # noqa: E402

# Each command module has ``register(app)``; keep these modules light at import time.
_COMMAND_MODULES = (
    init_cmd,
    install_cmd,
    sweep_cmd,
    status_cmd,
    cancel_cmd,
    verify_cmd,
    evaluate_cmd,
    report_cmd,
    card_cmd,
    sync_cmd,
    import_cmd,
    doctor_cmd,
    rehearse_cmd,
    games_cmd,
)

app = typer.Typer(
    name="ccpo-lab",
    help="Multi-arm, multi-seed studies of LLM-agent advantage estimators (GRPO, GiGPO, "
    "CCPO) on ALFWorld, with honest statistics.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(arms_cmd.app, name="arms")
for _module in _COMMAND_MODULES:
    _module.register(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ccpo-lab {ccpo_lab.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version and exit."),
) -> None:
    """Multi-arm, multi-seed studies of advantage estimators on ALFWorld."""


def debug() -> bool:
    """Whether ``CCPO_LAB_DEBUG`` asks for tracebacks."""
    return os.environ.get("CCPO_LAB_DEBUG", "") not in ("", "0", "false", "no")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; the single error boundary. Returns the exit code.

    A usage error (a missing argument, an unknown command or option: Typer's own
    exceptions, ``typer.TyperException``) prints the usage line and exits 2; a
    :class:`UserError` prints one line and exits with its code (2; 1 for an environment
    failure), as does an :class:`OSError` of the environment; anything else is a bug
    (exit 1). Output to a terminal or pipe that is not UTF-8 never fails on a character it
    lacks (:func:`ccpo_lab.textout.prepare_streams`).
    """
    prepare_streams()
    try:
        rv = app(args=argv, prog_name="ccpo-lab", standalone_mode=False)
    except UserError as e:
        if debug():
            raise
        return _say(e)
    except typer.Exit as e:
        return int(e.exit_code)
    except typer.TyperException as e:
        show = getattr(e, "show", None)
        if callable(show):
            show()
        else:
            typer.echo(f"Error: {e.format_message()}", err=True)
        return int(e.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        return 130
    except OSError as e:
        if debug():
            raise
        # a path the user gave (or a parent of it) that cannot be used as asked, a full disk
        from ccpo_lab.runs.files import RunFileError

        failure = UserError(str(e)) if isinstance(e, RunFileError) else os_failure(e)
        if failure is None:
            typer.echo(f"internal error: {type(e).__name__}: {e} (set CCPO_LAB_DEBUG=1 for "
                       "the traceback)", err=True)
            return 1
        return _say(failure)
    except Exception as e:  # noqa: BLE001 - the one boundary
        if debug():
            raise
        why = cut(str(e), MESSAGE_CHARS)
        typer.echo(f"internal error: {type(e).__name__}: {why} (set CCPO_LAB_DEBUG=1 for the "
                   "traceback)", err=True)
        return 1
    return int(rv) if isinstance(rv, int) else 0


def _say(e: UserError) -> int:
    """Print ``e`` (``error: ...`` and its detail lines); return its exit code."""
    lines = str(e).splitlines() or [""]
    typer.echo(f"error: {lines[0]}", err=True)
    for line in lines[1:]:
        typer.echo(line, err=True)
    return int(e.exit_code)


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
