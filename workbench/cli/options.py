"""Typer options made from the settings table (workbench.core.settings), so `run`, `fleet` and `lab` declare none
of them: a command decorated with `with_settings("run")` gets one option per setting, and `--config`, before its
own options, and receives them resolved (typed flags over the config file over defaults) as one read-only
Settings value in its `settings` argument. The command must take `ctx: typer.Context`."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

import typer

from workbench.core.settings import Setting, for_command

F = TypeVar("F", bound=Callable[..., Any])
CONFIG = "config"  # the option naming the TOML config file
_NOT_TYPED = ("DEFAULT", "DEFAULT_MAP")  # click's sources of a value the user did not type


def _option(command: str, setting: Setting) -> inspect.Parameter:
    # a list option's default stays None ("not given"): typer cannot tell a given empty list from none
    is_list = typing.get_origin(setting.type) is list or any(
        typing.get_origin(a) is list for a in typing.get_args(setting.type)
    )
    value = None if is_list else setting.default_for(command)
    # a path setting typed empty is refused, as every path option is (path_given), not read as "."
    is_path = setting.type is Path or Path in typing.get_args(setting.type)
    shown = setting.metavar or ("<path>" if is_path else None)
    info = typer.Option(
        setting.flag_text, help=setting.help_for(command), metavar=shown, parser=path_given if is_path else None
    )
    return inspect.Parameter(
        setting.name, inspect.Parameter.KEYWORD_ONLY, default=value, annotation=Annotated[setting.type, info]
    )


def path_given(text: str) -> Path:
    """A path typed on the command line; an empty one is refused rather than read as '.' (the working directory
    served, or written into, by a typo or an unset variable)."""
    if not str(text).strip():
        raise typer.BadParameter("an empty path names nothing (give a path, or '.' for the working directory)")
    return Path(text)


# A path option's or argument's typer settings: refused when empty (path_given), shown as <path> as typer shows one
GIVEN_PATH: dict[str, Any] = {"parser": path_given, "metavar": "<path>"}


def _config_option() -> inspect.Parameter:
    info = typer.Option("--config", help="TOML config file (flags override it).", **GIVEN_PATH)
    return inspect.Parameter(
        CONFIG, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[Path | None, info]
    )


def typed_names(ctx: typer.Context) -> set[str]:
    """Names of the options the user typed (so a TOML config fills in only the rest)."""
    return {
        name
        for name, source in ((n, ctx.get_parameter_source(n)) for n in ctx.params)
        if source is not None and source.name not in _NOT_TYPED
    }


def with_settings(command: str) -> Callable[[F], F]:
    """Add the settings of `command` ("run", "fleet" or "lab") and --config as options; the decorated function
    takes `ctx` and `settings` (a workbench.core.settings.Settings, the config file read once, here)."""

    def wrap(fn: F) -> F:
        own = [p for name, p in inspect.signature(fn).parameters.items() if name != "settings"]
        hints = typing.get_type_hints(fn, include_extras=True)
        # keyword-only (typer passes every value by name), so the settings can come before the command's own
        # options in --help, as `run` always listed them
        kw = inspect.Parameter.KEYWORD_ONLY
        own = [p.replace(annotation=hints.get(p.name, p.annotation), kind=kw) for p in own]
        settings = for_command(command)
        added = [_option(command, s) for s in settings]
        own_names = {p.name for p in own}
        setting_names = {s.name for s in settings}

        @functools.wraps(fn)
        def command_fn(**kwargs: Any) -> Any:
            mine = {k: v for k, v in kwargs.items() if k in own_names}
            flags = {k: v for k, v in kwargs.items() if k in setting_names}
            typed = typed_names(mine["ctx"]) & setting_names
            # the config file's model (pydantic) and the plan's protocols load only for a command that runs,
            # not for --help or the other commands
            from workbench.core.config import resolve

            resolved = resolve(command, flags, config=kwargs.get(CONFIG), typed=typed)
            return fn(**mine, settings=resolved)

        required = [p for p in own if p.default is inspect.Parameter.empty]  # e.g. typer.Context
        parameters = [*required, *added, _config_option(), *(p for p in own if p not in required)]
        # inspect.signature() (so typer) reads __signature__, which typeshed does not declare on functions
        command_fn.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        command_fn.__annotations__ = {p.name: p.annotation for p in parameters}
        del command_fn.__wrapped__  # typer must read the signature above, not the function's own
        return cast(F, command_fn)  # only typer calls it, by the signature set above

    return wrap
