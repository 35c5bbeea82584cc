"""Every client of the registry opts into the contract: a ClientContract class of tests/contract names it as its
`client_class`, against a real server. A client added to protocols/registry.py without one fails here, unless
NO_CONTRACT says why it cannot run one on this kind of host (its own tests check what it can). A client that
implements mkdir, is_dir or remove_tree also runs that call's mixin (tests/contract/scratch_contract.py) in one
of its contract classes."""

from __future__ import annotations

import importlib
import pkgutil

import tests.contract
from tests.contract.scratch_contract import IsDirContract, MkdirContract, RemoveTreeContract
from tests.contract.suite import ClientContract
from workbench.protocols import registry
from workbench.protocols.base import Client

# label -> why it has no ClientContract class (and where its checks are instead)
NO_CONTRACT = {
    "smb/cifs": "this kernel has no CIFS client; test_mount.py checks its command line, credentials and errors",
    "smb/mount_smbfs": "macOS only; test_mount.py checks its command line and credentials",
    "afp/mount_afp": "macOS only; its command line and login are checked by the unit tests",
    "afp/afp_speedtest": "copies no file of the run (its own data); test_afp_speedtest.py checks its rows",
}


def _concrete_contracts() -> list[type[ClientContract]]:
    for module in pkgutil.iter_modules(tests.contract.__path__):
        if module.name.startswith("test_"):
            importlib.import_module(f"tests.contract.{module.name}")
    found: list[type[ClientContract]] = []
    pending: list[type[ClientContract]] = [ClientContract]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__name__.startswith("Test"):  # what pytest collects: the concrete contract classes
            found.append(cls)
    return found


def test_every_registry_client_runs_the_contract() -> None:
    contracts = _concrete_contracts()
    unnamed = [cls.__qualname__ for cls in contracts if getattr(cls, "client_class", None) is None]
    assert not unnamed, f"contract classes that do not name their client_class: {unnamed}"
    covered = {f"{cls.client_class.protocol}/{cls.client_class.name}" for cls in contracts}  # type: ignore[attr-defined]
    labels = {entry.label for entry in registry.KNOWN_CLIENTS}
    missing = sorted(labels - covered - set(NO_CONTRACT))
    assert not missing, f"registry clients with no ClientContract class in tests/contract: {missing}"
    assert not covered - labels, f"contract classes for clients the registry does not know: {covered - labels}"
    assert not set(NO_CONTRACT) & covered, "a client with a contract class need not be excused"
    assert set(NO_CONTRACT) <= labels, "an excused client the registry no longer has"


MIXINS = {"mkdir": MkdirContract, "is_dir": IsDirContract, "remove_tree": RemoveTreeContract}


def test_every_scratch_call_a_client_implements_runs_its_mixin() -> None:
    contracts = _concrete_contracts()
    missing = []
    for entry in registry.KNOWN_CLIENTS:
        if entry.label in NO_CONTRACT:
            continue
        loaded = registry.load(entry)
        if isinstance(loaded, str):  # cannot load here: its contract classes fail or skip with the reason
            continue
        mine = [cls for cls in contracts if getattr(cls, "client_class", None) is loaded]
        for call, mixin in MIXINS.items():
            if getattr(loaded, call) is not getattr(Client, call) and not any(issubclass(c, mixin) for c in mine):
                missing.append(f"{entry.label} {call}")
    assert not missing, f"calls implemented but not run through their contract mixin: {missing}"
