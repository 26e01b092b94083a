"""The machine's memory and disk counters read from /proc (gputui.telemetry.machine_counters):
the figures psutil gives, from one read each; the /proc layouts psutil knows."""

from __future__ import annotations

import os

import psutil
import pytest

from gputui.telemetry import machine_counters
from gputui.telemetry.machine_counters import SECTOR_BYTES, read_disk_bytes, read_memory

LINUX = os.path.exists("/proc/meminfo")

# /proc/meminfo as Linux 6.x writes it (the keys used, among others), in kB
MEMINFO = b"""MemTotal:       131900364 kB
MemFree:         2171604 kB
MemAvailable:   120712936 kB
Buffers:          520024 kB
Cached:         113020504 kB
SwapCached:            0 kB
Active:         52133112 kB
SwapTotal:       8388604 kB
SwapFree:        8126460 kB
HugePages_Total:       0
"""
# /proc/diskstats (Documentation/admin-guide/iostats.rst gives the fields): a whole NVMe disk (20 fields, Linux 5.5+) and its partition, a loop
# device (18 fields, 4.18+), an old 14-field disk, and a partition's 7-field line (before 2.6.25)
DISKSTATS = b"""259       0 nvme0n1 1000 0 2000 10 300 0 4000 20 0 30 30 0 0 0 0 0 0
259       1 nvme0n1p1 900 0 1800 10 290 0 3900 20 0 30 30 0 0 0 0 0 0
   7       0 loop0 10 0 20 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
   8       0 sda 5 0 40 0 6 0 80 0 0 0 0
   8       1 sda1 5 40 6 80
"""


def test_memory_is_read_as_free_and_psutil_read_it(tmp_path):
    (tmp_path / "meminfo").write_bytes(MEMINFO)
    memory = read_memory(str(tmp_path))
    assert memory is not None
    assert memory.total == 131900364 * 1024 and memory.available == 120712936 * 1024
    assert memory.used == memory.total - memory.available
    assert memory.swap_total == 8388604 * 1024 and memory.swap_used == (8388604 - 8126460) * 1024


def test_a_kernel_without_memavailable_estimates_it(tmp_path):
    (tmp_path / "meminfo").write_bytes(b"MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 200 kB\n")
    memory = read_memory(str(tmp_path))
    assert memory is not None and memory.available == 350 * 1024 and memory.swap_total == 0


def test_disks_count_whole_disks_once_not_their_partitions(tmp_path):
    (tmp_path / "diskstats").write_bytes(DISKSTATS)
    block = tmp_path / "block"
    for disk in ("nvme0n1", "loop0", "sda"):
        (block / disk).mkdir(parents=True)
    machine_counters._whole_disk.cache_clear()
    read, written = read_disk_bytes(str(tmp_path), str(block))
    assert read == (2000 + 20 + 40) * SECTOR_BYTES
    assert written == (4000 + 0 + 80) * SECTOR_BYTES


def test_without_the_files_nothing_is_made_up(tmp_path):
    assert read_memory(str(tmp_path)) is None
    assert read_disk_bytes(str(tmp_path), str(tmp_path)) is None


@pytest.mark.skipif(not LINUX, reason="reads this machine's /proc")
def test_this_machine_s_figures_are_psutil_s():
    memory, vm, sw = read_memory(), psutil.virtual_memory(), psutil.swap_memory()
    assert memory is not None
    assert memory.total == vm.total and memory.swap_total == sw.total
    assert abs(memory.available - vm.available) < 64 * 2**20  # read a moment apart
    assert abs(memory.swap_used - sw.used) < 64 * 2**20
    # Between two of psutil's readings, since the disks keep counting meanwhile (other tests
    # read and write): a read psutil made after ours once saw 16 KiB more.
    before = psutil.disk_io_counters(perdisk=False)
    disk = read_disk_bytes()
    after = psutil.disk_io_counters(perdisk=False)
    if before is None or after is None:
        pytest.skip("no disks here")
    assert disk is not None
    assert before.read_bytes <= disk[0] <= after.read_bytes, (before.read_bytes, disk[0], after.read_bytes)
    assert before.write_bytes <= disk[1] <= after.write_bytes, (before.write_bytes, disk[1], after.write_bytes)
