"""The rules, one module per family; :func:`make_rules` lists them in the order they
are judged.  Every rule class and the shared pieces stay importable from here
(``from gputui.diagnosis.rules import Thermal``)."""

from __future__ import annotations

from gputui.diagnosis.rules.base import GIB, MIB, SEVERITIES, THERMAL_REASONS, Description, Observation, Rule, RuleFinding, RuleScope
from gputui.diagnosis.rules.busy import Idle, LaunchBound
from gputui.diagnosis.rules.clocks import HwSlowdown, PowerCap, Thermal
from gputui.diagnosis.rules.co_tenant import CoTenant
from gputui.diagnosis.rules.hardware import FailingHardware
from gputui.diagnosis.rules.headroom import Headroom
from gputui.diagnosis.rules.host_contention import HostContention
from gputui.diagnosis.rules.input import InputBound
from gputui.diagnosis.rules.memory import HostMemory, OutOfMemory, VramFull
from gputui.diagnosis.rules.pcie import PCIE_LANE_BPS, PcieLink, PcieTraffic, link_bps
from gputui.diagnosis.rules.python_loop import PythonBound

__all__ = [
    "GIB",
    "MIB",
    "SEVERITIES",
    "THERMAL_REASONS",
    "PCIE_LANE_BPS",
    "RuleFinding",
    "Rule",
    "RuleScope",
    "Description",
    "Observation",
    "link_bps",
    "make_rules",
    "InputBound",
    "PythonBound",
    "Thermal",
    "PowerCap",
    "HwSlowdown",
    "VramFull",
    "HostMemory",
    "OutOfMemory",
    "LaunchBound",
    "Idle",
    "PcieLink",
    "PcieTraffic",
    "HostContention",
    "FailingHardware",
    "Headroom",
    "CoTenant",
]


def make_rules() -> list[Rule]:
    return [
        InputBound(),
        PythonBound(),
        Thermal(),
        PowerCap(),
        HwSlowdown(),
        VramFull(),
        HostMemory(),
        OutOfMemory(),
        LaunchBound(),
        Idle(),
        PcieLink(),
        PcieTraffic(),
        HostContention(),
        FailingHardware(),
        Headroom(),
        CoTenant(),
    ]
