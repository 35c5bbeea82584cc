"""The lab's work that a run session asks for (workbench.core.session.LabSide): build the lab and run in it, its
stock daemons' runs, a fleet of its client hosts, a story's variants. The core sits below the lab, so the command
line hands `LAB` to the session."""

from __future__ import annotations

from workbench.core.observe import Recorder, RunObserver
from workbench.core.results import Run
from workbench.core.session import DriveFleet
from workbench.core.settings import Settings
from workbench.lab import scenarios
from workbench.lab.run import (
    LabRequest,
    Present,
    lab_request,
    run_fleet_lab,
    run_lab,
    run_stock_lab,
    validate_request,
)


class _LabSide:
    """The lab's work a run session asks for (workbench.core.session.LabSide): the core sits below the lab, so
    the command line hands this over."""

    def request(self, settings: Settings) -> LabRequest:
        return lab_request(settings)

    def validate(self, request: LabRequest) -> None:
        validate_request(request)

    def run(self, request: LabRequest, recorder: Recorder, observer: RunObserver, label: str | None) -> Run:
        return run_lab(request, recorder, observer, label)

    def run_stock(self, request: LabRequest, present: Present, observer: RunObserver, label: str | None) -> list[Run]:
        return run_stock_lab(request, present, observer, label)

    def run_fleet(self, request: LabRequest, clients: int, drive: DriveFleet, observer: RunObserver) -> Run:
        return run_fleet_lab(request, clients, drive, observer)

    def variants(self, name: str, settings: Settings, quick: bool) -> list[tuple[str, LabRequest]]:
        planned = scenarios.requests(scenarios.find(name), settings, set(settings.given), quick)
        return [(variant.name, request) for variant, request in planned]


LAB = _LabSide()
