"""The plots of the HTML report (workbench.cli.plots) on a lab run made of plain values: each is well-formed SVG
with the elements its data calls for (a line per copy, a shaded span per stall where the stall was, the
reference lines, a dot per copy), ids that no other plot of the page uses, and None when there is nothing to draw.
"""

from __future__ import annotations

import re
import threading
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from tests.report_runs import LINK_GOODPUT_BYTES_PER_S, RAW_TCP_UP_BYTES_PER_S, SWEEP, lab_run, without_intervals
from workbench.cli import plots
from workbench.core.results import INTERVAL_S, Result, Run, Sample

SVG = "{http://www.w3.org/2000/svg}"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"


def parse(svg: str | None) -> ET.Element:
    assert svg is not None
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def group(root: ET.Element, gid: str) -> ET.Element:
    """The element whose id is `gid` (ids carry the plot's prefix: matched by their end)."""
    found = [e for e in root.iter() if e.get("id", "").endswith(gid)]
    assert len(found) == 1, (gid, [e.get("id") for e in found])
    return found[0]


def ids_ending(root: ET.Element, pattern: str) -> list[str]:
    return [e.get("id", "") for e in root.iter() if re.search(pattern, e.get("id", ""))]


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def rect_x(element: ET.Element) -> tuple[float, float]:
    """The left and right x of the first rectangle path inside `element`."""
    path = next(e for e in element.iter(f"{SVG}path") if e.get("d"))
    xs = [float(x) for x in re.findall(r"[ML] ([-\d.]+) [-\d.]+", path.get("d", ""))]
    return min(xs), max(xs)


def x_ticks(root: ET.Element) -> list[tuple[float, float]]:
    """(x in the SVG, the value its label reads) of each tick of the x axis."""
    ticks = []
    for tick in (e for e in root.iter() if re.search(r"-xtick_\d+$", e.get("id", ""))):
        mark = next(tick.iter(f"{SVG}use"))
        label = next(tick.iter(f"{SVG}text"))
        ticks.append((float(mark.get("x", "nan")), float(label.text or "nan")))
    assert len(ticks) >= 2, ticks
    return ticks


def row_index(run: Run, label: str, direction: str, file_set: str) -> int:
    for i, r in enumerate(run.results):
        if (r.label, r.direction, r.file_set) == (label, direction, file_set):
            return i
    raise AssertionError(f"no row {label} {direction} {file_set}")


@pytest.fixture(scope="module")
def run() -> Run:
    return lab_run()


def test_time_plot_has_a_line_per_copy_the_references_and_the_stall_where_it_was(run: Run) -> None:
    index = row_index(run, "http/aiohttp", "upload", "128M")
    row = run.results[index]
    stalls = [(n, s.stalls) for n, s in enumerate(row.samples, 1) if s.stalls]
    assert len(stalls) == 1  # the made-up run stalls in one copy: what is drawn must follow it
    root = parse(plots.throughput_over_time(run, index))

    assert sorted(ids_ending(root, r"-copy-\d+$")) == sorted(f"wb-time-{index}-copy-{n}" for n in range(1, 4))
    group(root, "-raw-tcp")
    group(root, "-link-goodput")
    said = texts(root)
    assert f"raw TCP {RAW_TCP_UP_BYTES_PER_S * 8 / 1e6:,.0f} Mbit/s" in said
    assert f"link goodput {LINK_GOODPUT_BYTES_PER_S * 8 / 1e6:,.0f} Mbit/s" in said
    assert "Mbit/s" in said and "stall" in said
    assert any(t.endswith("(s)") for t in said)

    # the shaded span sits where the stall was, on the time axis (0 .. the longest copy's intervals)
    (n, [(first, length)]) = stalls[0]
    span = rect_x(group(root, f"-stall-{n}-0"))
    (x0, s0), *_, (x1, s1) = x_ticks(root)  # the time axis as its tick labels read
    scale = (x1 - x0) / (s1 - s0)
    assert span[0] == pytest.approx(x0 + (first * INTERVAL_S - s0) * scale, abs=0.5)
    assert span[1] == pytest.approx(x0 + ((first + length) * INTERVAL_S - s0) * scale, abs=0.5)
    assert ids_ending(root, r"-stall-") == [f"wb-time-{index}-stall-{n}-0"]


def test_time_plot_of_a_row_without_stalls_shades_nothing(run: Run) -> None:
    index = row_index(run, "http/aiohttp", "download", "128M")
    assert not run.results[index].stall_count
    root = parse(plots.throughput_over_time(run, run.results[index]))  # a row given as itself, not its index

    assert ids_ending(root, "stall") == []
    assert "stall" not in texts(root)
    assert len(ids_ending(root, r"-copy-\d+$")) == len(run.results[index].good_samples)


def test_time_plot_draws_only_the_reference_lines_it_has(run: Run) -> None:
    index = row_index(run, "smb/pysmb", "download", "128M")
    bare = replace(run, link=None, baseline=replace(run.baseline, down_bytes_per_s=None), explanation=None)
    root = parse(plots.throughput_over_time(bare, index))

    assert ids_ending(root, "raw-tcp") == [] and ids_ending(root, "link-goodput") == []
    assert len(ids_ending(root, r"-copy-\d+$")) == 3


def test_time_plot_leaves_out_failed_copies_and_is_none_without_intervals(run: Run) -> None:
    index = row_index(run, "smb/pysmb", "upload", "128M")
    row = run.results[index]
    broken = (row.samples[0], replace(row.samples[1], error="connection reset"), row.samples[2])
    partly = replace(run, results=(*run.results[:index], replace(row, samples=broken), *run.results[index + 1 :]))
    root = parse(plots.throughput_over_time(partly, index))
    assert sorted(ids_ending(root, r"-copy-\d+$")) == [f"wb-time-{index}-copy-1", f"wb-time-{index}-copy-3"]

    assert plots.throughput_over_time(without_intervals(run), index) is None
    failed = row_index(run, "smb/smbprotocol", "upload", "128M")
    assert plots.throughput_over_time(run, failed) is None
    with pytest.raises(IndexError):
        plots.throughput_over_time(run, len(run.results))


def test_the_last_interval_counts_only_the_part_the_copy_lasted() -> None:
    # 250 ms: two whole intervals and half of a third, at 1 MB/s throughout
    times, rates = plots.copy_timeline(Sample(250_000, 0.25, intervals=(100_000, 100_000, 50_000)))
    assert times == pytest.approx([0, 0.1, 0.2, 0.25])
    assert rates == pytest.approx([1e6, 1e6, 1e6])
    # a copy over in 5 ms has its own rate, not 5 ms of bytes spread over 100 ms
    times, rates = plots.copy_timeline(Sample(2_000_000, 0.005, intervals=(2_000_000,)))
    assert times == pytest.approx([0, 0.005]) and rates == pytest.approx([4e8])
    # a sliver of a last interval (clocks a moment apart) is taken as a quarter interval: no spike
    _, rates = plots.copy_timeline(Sample(201_000, 0.2001, intervals=(100_000, 100_000, 1_000)))
    assert rates[-1] == pytest.approx(1_000 / (INTERVAL_S / 4))
    # seconds that disagree with the intervals: whole intervals
    times, rates = plots.copy_timeline(Sample(300_000, 5.0, intervals=(100_000, 100_000, 100_000)))
    assert times[-1] == pytest.approx(0.3) and rates == pytest.approx([1e6] * 3)
    assert plots.copy_timeline(Sample(1, 0.1)) == ([], [])


def test_time_plots_go_to_stalled_rows_and_each_clients_largest_file(run: Run) -> None:
    chosen = plots.time_plot_rows(run)
    picked = {(run.results[i].label, run.results[i].direction, run.results[i].file_set) for i in chosen}

    assert picked == {
        ("http/aiohttp", "upload", "128M"),  # stalled, and the largest
        ("http/aiohttp", "download", "128M"),
        ("smb/pysmb", "download", "128M"),
        ("smb/pysmb", "upload", "128M"),
        ("sftp/paramiko", "upload", "100x64K"),  # no single-file set: its largest set
        ("sftp/paramiko", "download", "100x64K"),
    }
    assert chosen == sorted(chosen)
    # a row that stalls is drawn even when it is not its client's largest, and first when the cap bites
    stalled = row_index(run, "http/aiohttp", "upload", "16M")
    row = run.results[stalled]
    stalling = replace(row.samples[0], intervals=(9, 9, 9, 9, 0, 0, 0, 0, 0, 9, 9, 9, 9))
    assert stalling.stalls
    changed = replace(run, results=tuple(replace(row, samples=(stalling,)) if r is row else r for r in run.results))
    assert stalled in plots.time_plot_rows(changed)
    capped = plots.time_plot_rows(changed, limit=2)
    assert len(capped) == 2 and stalled in capped
    assert plots.time_plot_rows(without_intervals(run)) == []
    # copies over within a few intervals draw no curve: such rows get no time plot
    short = replace(
        run,
        results=tuple(
            replace(r, samples=tuple(replace(s, intervals=s.intervals[:4]) for s in r.samples)) for r in run.results
        ),
    )
    assert plots.time_plot_rows(short) == []


def test_spread_has_a_dot_per_copy_and_a_median_per_row_by_client(run: Run) -> None:
    root = parse(plots.spread_by_client(run))
    drawn = [r for r in run.results if r.good_samples]

    for row in drawn:
        slug = re.sub(r"[^A-Za-z0-9_-]+", "-", f"{row.direction}-{row.label}-{row.file_set}")
        dots = group(root, f"-copies-{slug}")
        assert len(list(dots.iter(f"{SVG}use"))) == len(row.good_samples)
        median = group(root, f"-median-{slug}")
        assert len(list(median.iter(f"{SVG}use"))) == 1
    assert len(ids_ending(root, "-copies-")) == len(drawn) < len(run.results)  # the failed row has no dots
    said = texts(root)
    for label in {r.label for r in drawn}:
        assert said.count(label) == 1  # one line per client, named once (the panels share it)
    assert "smb/smbprotocol" not in said
    assert "upload" in said and "download" in said
    assert "MB/s" in said and "MB/s (log)" not in said  # 3.9 to 62 MB/s: a linear axis
    assert group(root, "-raw-tcp-upload") is not None and group(root, "-raw-tcp-download") is not None


def test_spread_goes_log_when_rates_span_a_wide_range_and_is_none_without_copies(run: Run) -> None:
    slow = Result("sftp", "openssh", "upload", "1000x4K", 1000 * 4096, 1000, (Sample(1000 * 4096, 8.0, files=1000),))
    wide = replace(run, results=(*run.results, slow), explanation=None)
    root = parse(plots.spread_by_client(wide))
    assert "MB/s (log)" in texts(root)

    failed_only = replace(run, results=tuple(r for r in run.results if not r.good_samples), explanation=None)
    assert failed_only.results
    assert plots.spread_by_client(failed_only) is None


def test_window_sweep_shows_measured_against_predicted_in_kib(run: Run) -> None:
    root = parse(plots.window_sweep(run))

    assert len(list(group(root, "-measured").iter(f"{SVG}use"))) == len(SWEEP)
    assert len(list(group(root, "-predicted").iter(f"{SVG}use"))) == len(SWEEP)
    said = texts(root)
    for point in SWEEP:
        assert f"{point['window_bytes'] // 1024}" in said
    assert "TCP window (KiB)" in said and "MB/s" in said

    assert plots.window_sweep(replace(run, window_sweep=None)) is None
    assert plots.window_sweep(replace(run, window_sweep=())) is None


def test_files_per_s_has_a_bar_per_small_file_row_and_is_none_without_one(run: Run) -> None:
    root = parse(plots.files_per_s(run))
    small = [r for r in run.results if r.files > 1 and r.files_per_s]
    assert len(small) == 4

    for row in small:
        slug = re.sub(r"[^A-Za-z0-9_-]+", "-", f"{row.direction}-{row.label}-{row.file_set}")
        group(root, f"-bar-{slug}")
        assert len(list(group(root, f"-copies-{slug}").iter(f"{SVG}use"))) == len(row.good_samples)
    assert len(ids_ending(root, "-bar-")) == len(small)
    said = texts(root)
    assert "files/s" in said and "http/aiohttp 100x64K" in said and "sftp/paramiko 100x64K" in said
    assert "smb/pysmb 128M" not in said  # single files are not small-file sets

    singles = replace(run, results=tuple(r for r in run.results if r.files <= 1), explanation=None)
    assert plots.files_per_s(singles) is None


def all_plots(run: Run) -> dict[str, str]:
    drawn = {f"time-{i}": plots.throughput_over_time(run, i) for i in plots.time_plot_rows(run)}
    drawn |= {"spread": plots.spread_by_client(run), "sweep": plots.window_sweep(run), "files": plots.files_per_s(run)}
    assert all(svg is not None for svg in drawn.values())
    return {name: svg for name, svg in drawn.items() if svg is not None}


def test_plots_of_one_page_share_no_id_and_refer_only_to_their_own(run: Run) -> None:
    seen: set[str] = set()
    for name, svg in all_plots(run).items():
        root = parse(svg)
        ids = [e.get("id") for e in root.iter() if e.get("id")]
        assert len(ids) == len(set(ids)), name
        assert not seen & set(ids), (name, seen & set(ids))
        seen |= set(ids)
        refs = re.findall(r"url\(#([^)]+)\)", svg) + [
            e.get(XLINK_HREF, "")[1:] for e in root.iter() if e.get(XLINK_HREF)
        ]
        assert refs and set(refs) <= set(ids), name  # clip paths and markers: each found in this very plot
        assert not svg.startswith("<?xml") and "<!DOCTYPE" not in svg and "<metadata" not in svg
        assert "@font-face" not in svg and "url(http" not in svg  # text as text, fonts the reader has


def test_drawing_is_the_same_from_several_threads(run: Run) -> None:
    expected = all_plots(run)
    results: list[dict[str, str]] = []
    threads = [threading.Thread(target=lambda: results.append(all_plots(run))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2
    assert all(drawn == expected for drawn in results)
