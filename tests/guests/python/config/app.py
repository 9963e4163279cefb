"""A Python guest of `wasi:config/store` (world `configured`): reads the
keys `inputs.get` names and, with `inputs.get_all`, every key, and answers
what it got, values included (the host must withhold a secret's value from
the answer); a refusal is reported, not raised."""

import hcp_guest
from hcp_guest import Task
from componentize_py_types import Err
from wit_world.imports import store


def error(e) -> dict:
    value = e.value if isinstance(e, Err) else e
    kind = "upstream" if isinstance(value, store.Error_Upstream) else "io"
    return {"ok": False, kind: value.value}


def read(task: Task, inputs: dict) -> dict:
    got = {}
    for key in inputs.get("get", []):
        try:
            got[key] = {"ok": True, "value": store.get(key)}
        except Err as e:
            got[key] = error(e)
    out = {"get": got}
    if inputs.get("get_all"):
        try:
            out["get_all"] = {"ok": True, "pairs": [list(p) for p in store.get_all()]}
        except Err as e:
            out["get_all"] = error(e)
    return out


WitWorld = hcp_guest.capability(read)
