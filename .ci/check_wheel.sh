#!/usr/bin/env bash
# Packaging check; .ci/run calls it after ./setup.sh, which installs build and twine into .venv:
#   1. build the sdist, and the wheel from that sdist, from a copy of the work tree (setuptools writes
#      an egg-info and build/ next to the sources it builds: none of that may land in the repo);
#   2. twine check both;
#   3. install PyPI's unrelated `fixtures` into a fresh venv, then our wheel beside it: both import,
#      `workbench --help` runs, and our wheel put only `workbench/` and its dist-info into
#      site-packages (pip would silently overwrite a top-level `fixtures` or `protocols` of ours).
# Everything happens in one temporary directory, removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
py="$repo/.venv/bin/python"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The files git would commit (tracked, plus new ones not ignored), as they are in the work tree.
mkdir "$tmp/src"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$tmp/src"

echo "check_wheel: building sdist and wheel"
"$py" -m build -q --outdir "$tmp/dist" "$tmp/src" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
shopt -s nullglob
sdists=("$tmp"/dist/*.tar.gz)
wheels=("$tmp"/dist/*.whl)
if ((${#sdists[@]} != 1 || ${#wheels[@]} != 1)); then
  echo "check_wheel: expected one sdist and one wheel, got: $(ls "$tmp/dist")" >&2
  exit 1
fi
wheel=${wheels[0]}
"$py" -m twine check --strict "${sdists[0]}" "$wheel"

echo "check_wheel: $(basename "$wheel") holds:"
"$py" - "$wheel" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for name in names:
    print("  " + name)
tops = sorted({n.split("/")[0] for n in names})
if [t for t in tops if not t.endswith(".dist-info")] != ["workbench"] or len(tops) != 2:
    sys.exit(f"check_wheel: the wheel's top-level entries are {tops}, expected workbench and its dist-info")
# package data, not a module: only [tool.setuptools.package-data] brings it along
if "workbench/core/run_schema.json" not in names:
    sys.exit("check_wheel: the wheel lacks workbench/core/run_schema.json (the run document's JSON Schema)")
EOF

echo "check_wheel: installing PyPI's fixtures, then the wheel, into a fresh venv"
"$py" -m venv "$tmp/venv"
vpy="$tmp/venv/bin/python"
"$vpy" -m pip install -qq fixtures
"$vpy" -m pip install -qq "$wheel"
"$vpy" -m pip check

"$tmp/venv/bin/workbench" --help >"$tmp/help.txt" || { cat "$tmp/help.txt"; exit 1; }
grep -q "Usage: workbench" "$tmp/help.txt" || { echo "check_wheel: workbench --help printed no usage" >&2; exit 1; }

# Run from the temp dir so the repo's own folders cannot be imported instead of site-packages.
(cd "$tmp" && "$vpy" - <<'EOF'
import importlib.metadata as md
import sys
import sysconfig
from pathlib import Path

import fixtures  # PyPI's: test fixtures for unittest (testtools)
import workbench.fixtures
import workbench.protocols.registry  # noqa: F401  (the mapped protocols/ folder, with its imports)

site = Path(sysconfig.get_paths()["purelib"]).resolve()
errors = []
if not hasattr(fixtures, "Fixture") or Path(fixtures.__file__).resolve().parent != site / "fixtures":
    errors.append(f"`import fixtures` is not PyPI's fixtures: {fixtures.__file__}")
if Path(workbench.fixtures.__file__).resolve().parent != site / "workbench" / "fixtures":
    errors.append(f"workbench.fixtures imported from {workbench.fixtures.__file__}")

# What our distribution installed, from its RECORD: inside site-packages only workbench/ and the dist-info.
ours = md.distribution("filecopy-workbench")
tops = set()
for f in ours.files or []:
    path = Path(ours.locate_file(f)).resolve()
    if path.is_relative_to(site):
        tops.add(path.relative_to(site).parts[0])
dist_info = f"filecopy_workbench-{ours.version}.dist-info"
if tops != {"workbench", dist_info}:
    errors.append(f"our wheel installed {sorted(tops)} into site-packages, expected workbench and {dist_info}")
# `fixtures/` in site-packages must be wholly PyPI's (a clash would have overwritten its files).
theirs = {str(f) for f in md.distribution("fixtures").files or []}
for path in (site / "fixtures").rglob("*.py"):
    if str(path.relative_to(site)) not in theirs:
        errors.append(f"{path} is not in PyPI fixtures' RECORD")
if (site / "protocols").exists():
    errors.append("a top-level protocols/ is in site-packages")
# the JSON Schema loads from the installed package, as a user's script would load it
from workbench.core.schema import SCHEMA, json_schema

if json_schema().get("properties", {}).get("schema", {}).get("const") != SCHEMA:
    errors.append("workbench.core.schema.json_schema() does not describe the current schema")

print("check_wheel: site-packages holds " + ", ".join(sorted(p.name for p in site.iterdir())))
print(f"check_wheel: ours {sorted(tops)}; fixtures {md.version('fixtures')} from {fixtures.__file__}")
if errors:
    sys.exit("check_wheel: " + "\n".join(errors))
EOF
)

# The build ran on a copy: nothing of it may be in the repo.
for leftover in build dist; do
  [[ ! -e $repo/$leftover ]] || { echo "check_wheel: the build left $leftover in the repo" >&2; exit 1; }
done
echo "check_wheel: ok"
