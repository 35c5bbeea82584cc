"""How closely the lab's emulated link matches each preset: idle RTT, goodput ratio, emulator CPU.

Usage: python bench/bench_lab_link.py [PRESET ...] [--seconds S] [--mtu N]   (root; a few seconds per preset)
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.lab import PRESETS, Lab, expected_goodput_bits_per_s, measure
from workbench.shared.errors import WorkbenchError


def bench(name: str, seconds: float, mtu: int | None) -> None:
    spec = PRESETS[name] if mtu is None else dataclasses.replace(PRESETS[name], mtu=mtu)
    with Lab(spec) as lab:
        rtts = [measure.idle_rtt_ms(lab.hosts, lab.emulator, 20) for _ in range(3)]
        before = lab.forwarder_stats()
        # a long path needs time to leave slow start before the measured window
        warmup = min(3.0, max(1.0, spec.rtt_ms / 10))
        got = lab.measure_goodput_bits_per_s(seconds=seconds, warmup=warmup)
        after = lab.forwarder_stats()
        info = lab.describe()
    expected = expected_goodput_bits_per_s(spec.rate_bits_per_s, spec.mtu)
    cpu = (after["cpu_seconds"] - before["cpu_seconds"]) / (after["wall_seconds"] - before["wall_seconds"])
    print(
        f"{name:8} mtu {spec.mtu:5}  RTT asked {spec.rtt_ms:6.2f} ms  measured {' '.join(f'{r:.3f}' for r in rtts)}"
        f"  goodput {got / 1e6:7.1f} / {expected / 1e6:7.1f} Mbit/s = {got / expected:.3f}"
        f"  emulator {cpu:.0%} of a core  drops {after['drops'] - before['drops']}"
    )
    for note in info["notes"]:
        print(f"{'':8} note: {note}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("presets", nargs="*", help=f"some of {', '.join(PRESETS)} (default: all)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured window per preset (max 10)")
    parser.add_argument("--mtu", type=int, default=None)
    args = parser.parse_args()
    unknown = [p for p in args.presets if p not in PRESETS]
    if unknown:
        parser.error(f"unknown preset {unknown[0]!r}: choose from {', '.join(PRESETS)}")
    try:
        for name in args.presets or PRESETS:
            bench(name, min(args.seconds, 10.0), args.mtu)
    except WorkbenchError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
