"""pyproject.toml's package list against the folders on disk.

setuptools installs only the packages it is told about: a folder added under workbench/, protocols/ or
fixtures/ but missing from [tool.setuptools] packages is left out of the wheel, and the editable install
the tests use does not notice. protocols/ and fixtures/ install as workbench.protocols and
workbench.fixtures (package-dir), so nothing but `workbench` lands in site-packages.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The folders on disk and the import name each installs as.
MAPPED_FOLDERS = {"workbench": "workbench", "protocols": "workbench.protocols", "fixtures": "workbench.fixtures"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _packages_on_disk() -> set[str]:
    found = set()
    for folder, import_name in MAPPED_FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join((import_name, *rel.parts)))
    return found


def test_package_dir_maps_protocols_and_fixtures_into_workbench() -> None:
    setuptools = _pyproject()["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"workbench.protocols": "protocols", "workbench.fixtures": "fixtures"}


def test_package_list_is_every_folder_with_an_init() -> None:
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    on_disk = _packages_on_disk()
    assert not on_disk - listed, f"packages on disk missing from pyproject.toml: {sorted(on_disk - listed)}"
    assert not listed - on_disk, f"pyproject.toml lists packages with no folder: {sorted(listed - on_disk)}"
    assert all(name == "workbench" or name.startswith("workbench.") for name in listed)


def test_every_folder_with_modules_is_a_package() -> None:
    # A folder of modules without __init__.py would be a namespace package: importable from the work
    # tree, absent from the wheel.
    missing = []
    for folder in MAPPED_FOLDERS:
        for module in (ROOT / folder).rglob("*.py"):
            if not (module.parent / "__init__.py").exists():
                missing.append(str(module.parent.relative_to(ROOT)))
    assert not missing, f"folders with modules but no __init__.py: {sorted(set(missing))}"


def test_distribution_name_and_command() -> None:
    project = _pyproject()["project"]
    # `workbench` on PyPI is an unrelated project; the command and the import package keep the name.
    assert project["name"] == "filecopy-workbench"
    assert project["scripts"] == {"workbench": "workbench.cli.app:main"}
