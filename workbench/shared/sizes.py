"""Size strings: '4K', '10M', '2G' (binary units) and small-file sets '1000x16K'."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from workbench.shared.errors import UsageError

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
_SET_RE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(.+)$")


def parse_size(text: str) -> int:
    """Parse '16K' / '1.5G' / '4096' into bytes (K/M/G/T are powers of 1024)."""
    match = _SIZE_RE.match(text)
    if not match:
        raise UsageError(f"malformed size {text!r}", "use a number with an optional K, M, G or T suffix, e.g. 16M")
    number, unit = match.groups()
    value = float(number) * _UNITS[unit.upper()]
    if value < 1 or value != int(value):
        raise UsageError(f"size {text!r} is not a whole number of bytes above zero", "e.g. 4K, 10M, 2G")
    return int(value)


def parse_sizes(text: str) -> list[int]:
    """Parse a comma-separated list of sizes."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise UsageError("empty size list", "give sizes like 1M,16M,256M")
    return [parse_size(p) for p in parts]


def small_set_words(words: Iterable[str]) -> list[str]:
    """The small-file sets given as words, each a set or several joined by commas (as sizes are), stripped; 'none'
    alone, or no word at all (a list already typed), means no set. Empty parts between commas are dropped, as
    parse_sizes drops them; words with nothing in them are refused."""
    given = [str(word) for word in words]
    parts = [part.strip() for word in given for part in word.split(",") if part.strip()]
    if given and not parts:
        raise UsageError("empty small-file set list", "give sets like 1000x16K, or 'none' for none")
    sets = [part for part in parts if part.lower() != "none"]
    if sets and len(sets) < len(parts):
        raise UsageError("'none' given beside small-file sets", "give 'none' alone, or only sets like 1000x16K")
    return sets


@dataclass(frozen=True)
class SmallSet:
    """A set of `count` files of `size` bytes each."""

    count: int
    size: int

    @property
    def name(self) -> str:
        return f"{self.count}x{format_size(self.size)}"

    @property
    def total(self) -> int:
        return self.count * self.size


def total_bytes(sizes: Iterable[int], small_sets: Iterable[SmallSet]) -> int:
    """The bytes of a plan's test files: one file of each size and every small-file set."""
    return sum(sizes) + sum(s.total for s in small_sets)


def parse_small_set(text: str) -> SmallSet:
    """Parse '1000x16K' into a SmallSet."""
    match = _SET_RE.match(text)
    if not match:
        raise UsageError(f"malformed small-file set {text!r}", "use COUNTxSIZE, e.g. 1000x16K")
    count = int(match.group(1))
    if count < 1:
        raise UsageError(f"small-file set {text!r} has no files", "use a count of at least 1")
    return SmallSet(count, parse_size(match.group(2)))


def format_size(n: int) -> str:
    """The shortest exact binary-suffixed form: 16777216 -> '16M', 1536 -> '1536' -> '1.5K'."""
    for unit in ("T", "G", "M", "K"):
        scale = _UNITS[unit]
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    for unit in ("T", "G", "M", "K"):
        scale = _UNITS[unit]
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return f"{n}B"



_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:bit|bps|b)?(?:/s)?\s*$", re.IGNORECASE)
_RATE_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_TIME_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|µs|ms|s)?\s*$", re.IGNORECASE)


def parse_rate(text: str) -> int:
    """Parse a link rate like '1gbit', '533mbit', '100M' into bits per second (decimal units, as links are named)."""
    match = _RATE_RE.match(text)
    if not match:
        raise UsageError(f"malformed rate {text!r}", "use e.g. 1gbit, 533mbit or 100mbit")
    value = float(match.group(1)) * _RATE_UNITS[match.group(2).lower()]
    if value < 1000:
        raise UsageError(f"rate {text!r} is below 1 kbit/s", "use e.g. 100mbit")
    return int(value)


def parse_duration_ms(text: str) -> float:
    """Parse '2.8ms', '40' (ms), '1s' or '500us' into milliseconds."""
    match = _TIME_RE.match(text)
    if not match:
        raise UsageError(f"malformed time {text!r}", "use e.g. 2.8ms, 40ms or 0.2ms")
    value = float(match.group(1))
    unit = (match.group(2) or "ms").lower()
    return value * {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3}[unit]
