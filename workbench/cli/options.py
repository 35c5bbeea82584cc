"""Typer options made from the settings table (workbench.core.settings), so `run` and `lab` declare none of
them: a command decorated with `with_settings("run")` gets one option per setting before its own options,
and receives their values together, by name, in its `settings` argument."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar, cast

import typer

from workbench.core.settings import Setting, for_command

F = TypeVar("F", bound=Callable[..., Any])


def _option(command: str, setting: Setting) -> inspect.Parameter:
    # a list option's default stays None ("not given"): typer cannot tell a given empty list from none
    is_list = typing.get_origin(setting.type) is list or any(
        typing.get_origin(a) is list for a in typing.get_args(setting.type)
    )
    value = None if is_list else setting.default_for(command)
    info = typer.Option(setting.flag, help=setting.help_for(command))
    return inspect.Parameter(
        setting.name, inspect.Parameter.KEYWORD_ONLY, default=value, annotation=Annotated[setting.type, info]
    )


def with_settings(command: str) -> Callable[[F], F]:
    """Add the settings of `command` ("run" or "lab") as options; the decorated function takes `settings`."""

    def wrap(fn: F) -> F:
        own = [p for name, p in inspect.signature(fn).parameters.items() if name != "settings"]
        hints = typing.get_type_hints(fn, include_extras=True)
        # keyword-only (typer passes every value by name), so the settings can come before the command's own
        # options in --help, as `run` always listed them
        kw = inspect.Parameter.KEYWORD_ONLY
        own = [p.replace(annotation=hints.get(p.name, p.annotation), kind=kw) for p in own]
        added = [_option(command, s) for s in for_command(command)]
        own_names = {p.name for p in own}

        @functools.wraps(fn)
        def command_fn(**kwargs: Any) -> Any:
            mine = {k: v for k, v in kwargs.items() if k in own_names}
            return fn(**mine, settings={k: v for k, v in kwargs.items() if k not in own_names})

        required = [p for p in own if p.default is inspect.Parameter.empty]  # e.g. typer.Context
        parameters = [*required, *added, *(p for p in own if p not in required)]
        # inspect.signature() (so typer) reads __signature__, which typeshed does not declare on functions
        command_fn.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        command_fn.__annotations__ = {p.name: p.annotation for p in parameters}
        del command_fn.__wrapped__  # typer must read the signature above, not the function's own
        return cast(F, command_fn)  # only typer calls it, by the signature set above

    return wrap
