"""The `tfxp` root command: the name of each command and where it lives, imported only when needed.

Command modules define a command function (`run.py`: `run`) or, for a command group, a Typer app
(`data.py`: `data_app`), and know nothing of this module. `COMMANDS` names them; `LazyGroup`, shaped like
Kedro's, turns any `TfxpError` a command raises into `error: <message>` and exit 2, and imports a command's
module only when the command runs or help lists it: `tfxp run --help` imports
`pipeline.cli.run` alone, and `tfxp --help` imports every command module but, as they keep TensorFlow and
TFX inside the command functions, neither of those.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import MarkupMode, TyperGroup
from typer.main import get_command_from_info, get_group
from typer.models import CommandInfo

from foundation.errors import TfxpError
from foundation.stop_request import StopRequested
from pipeline.cli.console import console, fail
from pipeline.cli.quiet import command_output, set_verbose

if TYPE_CHECKING:
    from typer import _click as click  # Typer vendors Click; its commands and contexts are these classes.

# Command name → "module:attribute": a command function, or a Typer app for a command group. A new command
# is a function in a command module plus its line here; `tfxp --help` lists the commands in this order.
COMMANDS: dict[str, str] = {
    "doctor": "pipeline.cli.doctor:doctor",
    "compile": "pipeline.cli.kubeflow:compile_command",
    "submit": "pipeline.cli.kubeflow:submit_command",
    "pipeline": "pipeline.cli.kubeflow_ops:pipeline_app",
    "schedule": "pipeline.cli.kubeflow_ops:schedule_app",
    "runs": "pipeline.cli.kubeflow_ops:runs_app",
    "run-spec": "pipeline.cli.kubeflow:run_spec_command",
    "run": "pipeline.cli.run:run",
    "report": "pipeline.cli.report:report",
    "serve": "pipeline.cli.serving:serve",
    "predict": "pipeline.cli.predict:predict",
    "loadtest": "pipeline.cli.predict:loadtest",
    "deploy-assets": "pipeline.cli.serving:deploy_assets",
    "rollout": "pipeline.cli.rollout:rollout_app",
    "data": "pipeline.cli.data:data_app",
    "edge": "pipeline.cli.edge:edge_app",
}


def load_command(name: str, target: str, rich_markup_mode: MarkupMode) -> click.Command:
    """Imports a command's module and makes the command (or command group) that Typer would have made.

    Args:
        name: The command's name on the command line, e.g. `deploy-assets`.
        target: Where it lives, `module:attribute`, e.g. `pipeline.cli.serving:deploy_assets`.
        rich_markup_mode: The root's, for a command's help text (a Typer app's own applies to a group).

    Returns:
        The Click command; a group when the attribute is a Typer app.
    """
    module_name, _, attribute = target.partition(":")
    definition = getattr(importlib.import_module(module_name), attribute)
    if isinstance(definition, typer.Typer):
        return get_group(definition)
    # What `@app.command(name)` on the root would make; tracebacks are plain (pretty_exceptions_enable=False).
    return get_command_from_info(
        CommandInfo(name=name, callback=definition), pretty_exceptions_short=True, rich_markup_mode=rich_markup_mode
    )


class LazyGroup(TyperGroup):
    """The root group: lists the names in `COMMANDS` and loads each command the first time it is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(load_command(cmd_name, COMMANDS[cmd_name], self.rich_markup_mode), cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in COMMANDS:
            # Not a command: Typer's "Did you mean ...?" looks among the loaded commands, so load them all.
            for name in COMMANDS:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        # Every command runs with TensorFlow's, TFX's and Beam's output in a log file (pipeline/cli/quiet.py).
        set_verbose(bool(ctx.params.get("verbose")))
        command = next(iter(getattr(ctx, "_protected_args", None) or ctx.args), "tfxp")
        with command_output(command):
            try:
                return super().invoke(ctx)
            except (TfxpError, OSError) as error:
                # The one place user errors become `error: ...` and exit 2 (Kedro's KedroCLI does the same). An
                # OSError names the file or address and the system's reason (permissions, disk full, port taken).
                raise fail(str(error)) from None
            except StopRequested as stop:
                # SIGTERM or Ctrl-C, recorded and unwound to here after the command's own cleanup
                # (foundation/stop_request.py): the status a process killed by that signal reports.
                console.print(f"stopped ({stop}); what was running was stopped", highlight=False, markup=False)
                raise typer.Exit(stop.exit_status) from None


app = typer.Typer(
    name="tfxp",
    cls=LazyGroup,
    help="One TFX pipeline from image TFRecords to a TF Serving model and a quantized TFLite model.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Show everything TensorFlow, TFX, Beam and LiteRT print; by default it goes to a log file.",
        ),
    ] = False,
) -> None:
    # Typer builds a Typer app with a callback as a group (`LazyGroup`) even though no command is registered on it.
    # `verbose` is read by `LazyGroup.invoke`, which runs before this callback.
    pass


def main() -> None:
    """Console-script entry point (`tfxp`)."""
    sys.exit(app())
