"""The measured roofline: its cache (where it lives, what it records, when it is not trusted),
the plausibility check against the instruction set, and the short-run measurement's filter of
runs that lost their core. The measurements themselves are replaced by fakes wherever a test
would otherwise depend on how busy the machine is."""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tensorc.runtime import machine, microbench
from tensorc.runtime.cache_dir import cache_root
from tensorc.runtime.cpu_limits import Cache, IsaBound, bound_from, data_caches
from tensorc.runtime.machine import MemoryLevel, Roofline, machine_roofline
from tensorc.runtime.microbench import Best

BOUND = IsaBound(80.0, "32 FLOP/cycle (test) x 2.50 GHz (test)", headroom=1.5)
CACHES = [Cache(1, 32 << 10), Cache(2, 512 << 10), Cache(3, 32 << 20, sharing=2)]


class FakeMachine:
    """Stands in for the microbenchmarks: fixed figures, and a count of measurements."""

    def __init__(self, peak: float = 90.0, bandwidth: float = 15.0, clean: int = 20):
        self.peak, self.bandwidth, self.clean = peak, bandwidth, clean
        self.caches = {1: 200.0, 2: 90.0, 3: 45.0}      # GB/s of one thread, by level
        self.peaks = self.bandwidths = 0

    def measure_peak(self, target, threads: int = 1) -> Best:
        self.peaks += 1
        return Best(self.peak * threads, self.clean, microbench.RUNS)

    def measure_bandwidth(self, target, threads: int = 1, l3_bytes: int = 0) -> Best:
        self.bandwidths += 1
        return Best(self.bandwidth * threads, self.clean, microbench.RUNS)

    def measure_cache_bandwidth(self, target, cache: Cache, threads: int = 1) -> Best:
        return Best(self.caches[cache.level] * threads, self.clean, microbench.RUNS)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeMachine:
    monkeypatch.setenv("TENSORC_CACHE_DIR", str(tmp_path / "cache"))
    fake = FakeMachine()
    monkeypatch.setattr(microbench, "measure_peak", fake.measure_peak)
    monkeypatch.setattr(microbench, "measure_bandwidth", fake.measure_bandwidth)
    monkeypatch.setattr(microbench, "measure_cache_bandwidth", fake.measure_cache_bandwidth)
    monkeypatch.setattr(machine, "isa_bound", lambda target: BOUND)
    monkeypatch.setattr(machine, "data_caches", lambda: CACHES)
    return fake


def _cached_entries() -> dict:
    data = json.loads(machine.cache_file().read_text())
    assert data["format"] == machine.CACHE_FORMAT
    return data["entries"]


def _rewrite_entry(**changes) -> None:
    """Change fields of the (only) cached entry."""
    data = json.loads(machine.cache_file().read_text())
    (key,) = data["entries"]
    data["entries"][key].update(changes)
    machine.cache_file().write_text(json.dumps(data))


def test_cache_root_prefers_tensorc_cache_dir_then_xdg(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TENSORC_CACHE_DIR", str(tmp_path / "own"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "own"
    monkeypatch.delenv("TENSORC_CACHE_DIR")
    assert cache_root() == tmp_path / "xdg" / "tensorc"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "tensorc"


def test_the_test_session_caches_in_a_temporary_directory() -> None:
    root = cache_root()
    assert root != Path.home() / ".cache" / "tensorc"
    assert "tensorc-test-cache-" in str(root)


def test_first_call_measures_and_records_how(fake: FakeMachine) -> None:
    before = datetime.now(timezone.utc).replace(microsecond=0)
    roofline = machine_roofline(threads=1)
    assert (fake.peaks, fake.bandwidths) == (1, 1)
    assert roofline.source == "measured"
    assert (roofline.peak_gflops, roofline.bandwidth_gbs) == (90.0, 15.0)
    (entry,) = _cached_entries().values()
    assert entry["peak_gflops"] == 90.0 and entry["bandwidth_gbs"] == 15.0
    assert entry["method"] == machine.METHOD and "best of short runs" in entry["method"]
    assert entry["runs"] == 20
    assert entry["version"] == machine.__version__
    assert entry["isa_gflops"] == 80.0 and "FLOP/cycle" in entry["isa_basis"]
    measured_at = datetime.fromisoformat(entry["measured_at"])
    assert measured_at.utcoffset().total_seconds() == 0 and measured_at >= before
    assert "measured now" in roofline.provenance()
    assert f"{90 / 80:.0%} of 80.0 GFLOP/s" in roofline.provenance()


def test_a_trusted_cache_is_used_without_measuring(fake: FakeMachine) -> None:
    machine_roofline(threads=1)
    again = machine_roofline(threads=1)
    assert (fake.peaks, fake.bandwidths) == (1, 1)
    assert again.source == "cached" and again.peak_gflops == 90.0
    assert "cached in" in again.provenance() and "UTC" in again.provenance()


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"format": 2, "entries": 7}',
                                  '{"k/1": {"peak_gflops": 56.8, "bandwidth_gbs": 9.0, '
                                  '"threads": 1, "source": "measured"}}', ""])
def test_a_corrupt_or_old_cache_file_is_measured_again(fake: FakeMachine, text: str) -> None:
    path = machine.cache_file()
    path.parent.mkdir(parents=True)
    path.write_text(text)
    roofline = machine_roofline(threads=1)
    assert fake.peaks == 1 and roofline.source == "measured"
    assert roofline.peak_gflops == 90.0
    assert len(_cached_entries()) == 1       # rewritten in the current format


@pytest.mark.parametrize("changes", [{"peak_gflops": "fast"}, {"peak_gflops": -3.0},
                                     {"bandwidth_gbs": 0}, {"extra": 1}, {"runs": None}])
def test_a_malformed_entry_is_measured_again(fake: FakeMachine, changes: dict) -> None:
    machine_roofline(threads=1)
    _rewrite_entry(**changes)
    assert machine_roofline(threads=1).source == "measured"
    assert fake.peaks == 2


def test_a_cached_peak_ten_times_the_isa_bound_is_measured_again(fake: FakeMachine) -> None:
    machine_roofline(threads=1)
    _rewrite_entry(peak_gflops=800.0)
    roofline = machine_roofline(threads=1)
    assert fake.peaks == 2 and roofline.source == "measured"
    assert roofline.peak_gflops == 90.0          # the implausible figure is not kept
    assert "implausible" in roofline.remeasured and "10.0x" in roofline.remeasured
    assert "implausible" in roofline.provenance()


def test_a_cached_peak_far_below_the_isa_bound_is_measured_again(fake: FakeMachine) -> None:
    # the case: a peak cached while the test suite ran on both cores
    machine_roofline(threads=1)
    _rewrite_entry(peak_gflops=30.0)
    roofline = machine_roofline(threads=1)
    assert fake.peaks == 2 and roofline.peak_gflops == 90.0
    assert "busy machine" in roofline.remeasured


def test_a_cache_with_no_clean_run_or_from_another_version_is_measured_again(
        fake: FakeMachine) -> None:
    machine_roofline(threads=1)
    _rewrite_entry(runs=0)
    assert machine_roofline(threads=1).source == "measured"
    _rewrite_entry(version="0.0.1")
    assert "another tensorc" in machine_roofline(threads=1).remeasured
    _rewrite_entry(method="one long run")
    assert machine_roofline(threads=1).source == "measured"
    assert fake.peaks == 4


def test_two_threads_below_one_thread_is_measured_again(fake: FakeMachine) -> None:
    machine_roofline(threads=1)
    machine_roofline(threads=2)
    entries = _cached_entries()
    (two,) = [k for k in entries if k.endswith("/2")]
    entries[two]["bandwidth_gbs"] = 10.0          # below one thread's 15
    machine.cache_file().write_text(json.dumps({"format": 2, "entries": entries}))
    roofline = machine_roofline(threads=2)
    assert roofline.source == "measured" and roofline.bandwidth_gbs == 30.0
    assert "10.0 GB/s at 2 threads" in roofline.remeasured


def test_remeasure_keeps_the_better_of_cached_and_new(fake: FakeMachine) -> None:
    machine_roofline(threads=1)
    fake.peak, fake.bandwidth = 85.0, 20.0           # a busier moment, a quieter bus
    roofline = machine_roofline(threads=1, remeasure=True)
    assert fake.peaks == 2
    assert (roofline.peak_gflops, roofline.bandwidth_gbs) == (90.0, 20.0)


def test_remeasure_on_a_busy_machine_keeps_the_trusted_figures_trusted(fake) -> None:
    machine_roofline(threads=1)
    fake.peak, fake.clean = 60.0, 0                  # every run of the new measurement lost
    roofline = machine_roofline(threads=1, remeasure=True)
    assert roofline.peak_gflops == 90.0 and roofline.runs == 20 and not roofline.warning
    fake.clean = 20
    assert machine_roofline(threads=1).source == "cached"
    assert fake.peaks == 2


def test_a_busy_measurement_is_warned_and_not_trusted_later(
        fake: FakeMachine) -> None:
    fake.clean = 0
    roofline = machine_roofline(threads=1)
    assert "busy in every peak run" in roofline.warning
    assert "busy in every L1, L2, L3, DRAM copy run" in roofline.warning
    fake.clean = 20
    assert machine_roofline(threads=1).source == "measured"


def test_an_implausibly_low_fresh_peak_is_measured_twice_and_warned(fake: FakeMachine) -> None:
    fake.peak = 20.0
    roofline = machine_roofline(threads=1)
    assert fake.peaks == 2
    assert "25% of the instruction set's 80.0" in roofline.warning


def test_more_threads_than_cores_are_checked_against_the_cores(fake, monkeypatch) -> None:
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 2)
    fake.peak = 45.0                    # 4 threads x 45: two cores at 90 each
    roofline = machine_roofline(threads=4)
    assert roofline.isa_gflops == 160.0 and not roofline.warning and fake.peaks == 1


def test_unknown_cpus_skip_the_check_and_say_so(fake, monkeypatch) -> None:
    unknown = bound_from("vendor_id : GenuineIntel\ncpu family : 6\nmodel : 143\n"
                         "cpu MHz : 2000.0\n", None, True)
    assert not unknown.known and "no plausibility check" in unknown.basis
    assert unknown.verdict(1e6, 1) == ""
    monkeypatch.setattr(machine, "isa_bound", lambda target: unknown)
    machine_roofline(threads=1)
    _rewrite_entry(peak_gflops=800.0)
    roofline = machine_roofline(threads=1)
    assert roofline.source == "cached" and roofline.peak_gflops == 800.0
    assert "no plausibility check" in roofline.provenance()


@pytest.mark.parametrize("family, model, avx512, flops, name", [
    (26, 0x44, True, 64, "Zen 5"), (25, 0x11, True, 32, "Zen 4"), (25, 0x01, False, 32, "Zen 3"),
    (23, 0x31, False, 32, "Zen 2"), (23, 0x08, False, 16, "Zen:")])
def test_isa_bound_of_known_cores(family, model, avx512, flops, name) -> None:
    cpuinfo = (f"vendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: {model}\n"
               f"model name\t: AMD EPYC\ncpu MHz\t\t: 2445.402\n")
    bound = bound_from(cpuinfo, None, avx512)
    assert bound.gflops_per_core == pytest.approx(flops * 2.445402)
    assert name in bound.basis and "/proc/cpuinfo cpu MHz" in bound.basis
    # cpufreq's maximum clock, where there is one, is preferred to cpu MHz
    assert bound_from(cpuinfo, "3500000\n", avx512).gflops_per_core == pytest.approx(flops * 3.5)
    assert bound.verdict(10 * bound.gflops_per_core, 1).startswith(
        f"{10 * bound.gflops_per_core:.1f} GFLOP/s is 10.0x")
    assert bound.verdict(1.2 * bound.gflops_per_core * 2, 2) == ""


def test_runs_that_lose_their_core_are_dropped(monkeypatch) -> None:
    def spin(i: int) -> None:
        end = time.thread_time() + 0.0005
        while time.thread_time() < end:
            pass
    on_core = microbench.best_of_runs(1, spin, 1.0)
    assert on_core.clean >= microbench.MIN_CLEAN and on_core.runs >= microbench.RUNS
    # a thread that sleeps spends its run off the core, as a preempted one does
    monkeypatch.setattr(microbench, "MAX_RUNS", microbench.RUNS + 4)
    off_core = microbench.best_of_runs(2, lambda i: time.sleep(0.0005), 1.0)
    assert off_core.clean == 0 and off_core.runs == microbench.RUNS + 4
    assert off_core.rate > 0


def test_roofline_given_reads_as_given() -> None:
    assert Roofline(100.0, 20.0).provenance() == "given, not measured"


def test_the_memory_roof_has_a_level_per_cache_and_dram(fake: FakeMachine) -> None:
    one = machine_roofline(threads=1)
    assert one.levels == (MemoryLevel("L1", 32 << 10, 200.0), MemoryLevel("L2", 512 << 10, 90.0),
                          MemoryLevel("L3", 32 << 20, 45.0), MemoryLevel("DRAM", 0, 15.0))
    assert one.bandwidth_gbs == 15.0
    # private levels hold twice as much for two threads on two cores; the shared L3 does not
    two = machine_roofline(threads=2)
    assert [(x.name, x.capacity) for x in two.levels] == [
        ("L1", 64 << 10), ("L2", 1 << 20), ("L3", 32 << 20), ("DRAM", 0)]
    # the levels survive the cache
    assert machine_roofline(threads=1).levels == one.levels
    assert "L2 <=512 KB 90.0 GB/s" in one.provenance()


def test_a_working_sets_bound_is_taken_at_the_level_it_fits(fake: FakeMachine) -> None:
    roofline = machine_roofline(threads=1)
    for nbytes, name in [(1000, "L1"), (32 << 10, "L1"), ((32 << 10) + 1, "L2"),
                         (400 << 10, "L2"), (8 << 20, "L3"), (33 << 20, "DRAM")]:
        assert roofline.memory_level(nbytes).name == name
    # the bytes the faster levels hold move at their speed, the rest at the level's
    l1, l2, l3 = 32 << 10, 512 << 10, 32 << 20
    assert roofline.bound_seconds(0, 1000) == pytest.approx(1000 / 200e9)
    assert roofline.bound_seconds(0, 400 << 10) == pytest.approx(
        l1 / 200e9 + ((400 << 10) - l1) / 90e9)
    assert roofline.bound_seconds(0, 33 << 20) == pytest.approx(
        l1 / 200e9 + (l2 - l1) / 90e9 + (l3 - l2) / 45e9 + (1 << 20) / 15e9)
    # so the bound grows with the working set, without a jump at a level's edge
    sizes = [l1 - 1, l1, l1 + 1, l2, l2 + 1, l3, l3 + 1, 2 * l3]
    times = [roofline.memory_seconds(n) for n in sizes]
    assert times == sorted(times)
    assert roofline.memory_seconds(l2 + 1) == pytest.approx(roofline.memory_seconds(l2),
                                                            rel=1e-4)
    # compute still bounds a kernel with few bytes and many FLOPs
    assert roofline.bound_seconds(9e9, 1000) == pytest.approx(0.1)
    # a given roofline is one flat roof
    flat = Roofline(100.0, 20.0)
    assert flat.memory_level(1000) == MemoryLevel("memory", 0, 20.0)


def test_a_cache_level_measured_slower_than_the_level_behind_it_is_raised(fake) -> None:
    fake.caches[2] = 30.0                         # L2 disturbed, below L3's 45
    roofline = machine_roofline(threads=1)
    assert [x.gbs for x in roofline.levels] == [200.0, 45.0, 45.0, 15.0]


@pytest.mark.parametrize("levels", [None, [], "L1", [{"name": "L1", "capacity": 32768}],
                                    [{"name": "L1", "capacity": 32768, "gbs": -1.0}],
                                    [{"name": "L1", "capacity": "big", "gbs": 100.0}]])
def test_malformed_levels_are_measured_again(fake: FakeMachine, levels) -> None:
    machine_roofline(threads=1)
    _rewrite_entry(levels=levels)
    if levels == []:      # an empty list is well formed: one flat roof
        assert machine_roofline(threads=1).source == "cached"
    else:
        assert machine_roofline(threads=1).source == "measured"


def test_remeasure_keeps_each_levels_better_figure(fake: FakeMachine) -> None:
    machine_roofline(threads=1)
    fake.caches = {1: 150.0, 2: 120.0, 3: 45.0}
    levels = machine_roofline(threads=1, remeasure=True).levels
    assert [x.gbs for x in levels] == [200.0, 120.0, 45.0, 15.0]


def test_data_caches_come_from_sysfs(tmp_path: Path) -> None:
    for index, (level, kind, size, cpus) in enumerate([
            (1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"),
            (2, "Unified", "1024K", "0"), (3, "Unified", "32768K", "0-7,16-23")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, text in [("level", f"{level}\n"), ("type", f"{kind}\n"),
                           ("size", f"{size}\n"), ("shared_cpu_list", f"{cpus}\n")]:
            (folder / name).write_text(text)
    assert data_caches(tmp_path) == [Cache(1, 48 << 10), Cache(2, 1 << 20),
                                     Cache(3, 32 << 20, sharing=16)]
    assert data_caches(tmp_path / "missing") == []
    assert Cache(2, 1 << 20).capacity(4) == 4 << 20
    assert Cache(3, 32 << 20, sharing=16).capacity(4) == 32 << 20
