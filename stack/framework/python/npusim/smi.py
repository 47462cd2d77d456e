"""npusim.smi(): what `npu-smi info` shows, for the simulated device (docs/python.md, "smi")."""

from __future__ import annotations

import json
import sys


def _table(s) -> str:
    util = s["aicore_util"]
    util_text = "-" if util is None else f"{100.0 * util:.1f}"
    used_mb = s["hbm_used_bytes"] / 2**20
    cap_mb = s["hbm_capacity_bytes"] / 2**20
    rule = "+" + "-" * 26 + "+" + "-" * 17 + "+" + "-" * 40 + "+"
    lines = [
        "+" + "-" * 85 + "+",
        f"| npusim-smi {__import__('npusim').__version__:<10} simulated device{'':<47}|",
        rule,
        f"| {'NPU  Name':<24} | {'Health':<15} | {'AICore(%)  Tasks  Device time(us)':<38} |",
        f"| {'Chip':<24} | {'Cores':<15} | {'HBM-Usage(MB)':<38} |",
        rule.replace("-", "="),
        f"| {s['device']:<4} {s['name']:<19} | {s['health']:<15} | {util_text:<10} {s['tasks']:<6} {s['device_time_us']:<20.3f} |",
        f"| {0:<24} | {s['ai_cores']:<15} | {f'{used_mb:.1f} / {cap_mb:.0f}':<38} |",
        rule,
    ]
    return "\n".join(lines)


def smi(print_table: bool = True, file=None, save: str | None = None):
    """The device's status: name, health, AI cores, AICore utilisation of the last call, tasks run, device time,
    HBM in use and capacity (bytes). Prints an npu-smi-like table unless print_table is False; with save, also
    writes the status as JSON to that file. Returns the status (a Report)."""
    from . import device

    s = device().status()
    if print_table:
        print(_table(s), file=file or sys.stdout)
    if save:
        with open(save, "w") as f:
            json.dump(s, f, indent=2)
    return s
