"""Schedule traces: the primitive calls a schedule recorded (``schedule.trace``, a list of
plain records), replayed on a fresh schedule of the same program and stored as JSON.

>>> again = replay(create_schedule([C]), trace_from_json(trace_to_json(s.trace)))
"""
from __future__ import annotations

import json
from typing import Sequence

from tensorc.errors import ScheduleError
from tensorc.ir.schedule import Schedule


def replay(schedule: Schedule, trace: Sequence[dict]) -> Schedule:
    """Apply recorded primitive calls to a fresh schedule of the same program."""
    for rec in trace:
        prim = rec["prim"]
        if prim == "cache_write":
            schedule.cache_write(schedule[rec["stage"]].tensor, rec["scope"])
            continue
        if prim == "rfactor":
            schedule.rfactor(schedule[rec["stage"]].tensor, rec["factor"],
                             rec.get("blocked", False), rec.get("lane_first", False))
            continue
        if prim == "rfactor_axis":
            stage = schedule[rec["stage"]]
            schedule.rfactor_axis(stage.tensor, stage.op.reduce_axis[rec["axis"]])
            continue
        if prim == "cache_read":
            schedule.cache_read(schedule[rec["stage"]].tensor, rec["scope"],
                                [schedule[r].tensor for r in rec["readers"]])
            continue
        if prim == "pack":
            schedule.pack(schedule[rec["stage"]].tensor, rec["scope"],
                          [schedule[r].tensor for r in rec["readers"]], rec["axis"],
                          rec["factor"])
            continue
        stage = schedule[rec["stage"]]
        if prim == "split":
            stage.split(rec["var"], factor=rec["factor"], nparts=rec["nparts"],
                        shift_tail=rec.get("shift_tail", False))
        elif prim == "fuse":
            stage.fuse(*rec["vars"])
        elif prim == "reorder":
            stage.reorder(*rec["vars"])
        elif prim in ("vectorize", "parallel", "unroll", "overcompute"):
            getattr(stage, prim)(rec["var"])
        elif prim == "bind":
            stage.bind(rec["var"], rec["thread_axis"])
        elif prim == "compute_inline":
            stage.compute_inline()
        elif prim == "compute_root":
            stage.compute_root()
        elif prim == "compute_at":
            stage.compute_at(schedule[rec["parent"]], rec["var"])
        elif prim == "compute_if":
            stage.compute_if(schedule[rec["flag"]].tensor)
        elif prim == "prefetch":
            along = (schedule[rec["along_stage"]], rec["along_var"]) if "along_stage" in rec \
                else None
            stage.prefetch(schedule[rec["tensor"]].tensor, rec["var"], rec["offset"], along,
                           rec.get("level", 1))
        else:
            raise ScheduleError(f"unknown schedule primitive {prim!r} in trace")
    return schedule


def trace_to_json(trace: Sequence[dict]) -> str:
    return json.dumps(list(trace))


def trace_from_json(text: str) -> list[dict]:
    return json.loads(text)
