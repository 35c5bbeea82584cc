"""A far host running `workbench serve` measures its own crypto costs (GET /ctl/crypto-cost)."""

from __future__ import annotations

from tests.serve_fixtures import ServeRunner
from workbench.protocols.control import Control
from workbench.shared.cryptocost import ALGORITHMS, CryptoCosts


def test_serve_answers_its_own_costs_per_byte(served: ServeRunner) -> None:
    with Control(served.target()) as control:
        answer = control.crypto_costs()
    costs = CryptoCosts.from_json(answer)
    assert costs is not None, answer
    assert sorted(costs.cpu_s_per_byte) == sorted(ALGORITHMS)
    assert all(1e-12 < v < 1e-6 for v in costs.cpu_s_per_byte.values())


def test_a_far_host_without_the_call_is_not_known(served: ServeRunner) -> None:
    with Control(served.target()) as control:
        control.base = control.base.replace("/ctl/", "/nothing-here/")  # as an older serve answers: 404
        assert control.crypto_costs() is None
