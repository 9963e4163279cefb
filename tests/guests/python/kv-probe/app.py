"""The key-value probe in Python (the world `with-keyvalue`), as the Rust
one in `tests/guests/kv-probe`: `inputs.steps` is a list of
`wasi:keyvalue` calls (`{"op": "set", "bucket": "b", "key": "k",
"value": "v"}`, ...), done in order on buckets opened as named;
`outputs.results` has each call's answer (`{"ok": ...}` or `{"err":
"access-denied" | "no-such-store" | "other: ..."}`), so that tests can
assert the host's answers, hostile ones included.
"""

from componentize_py_types import Err

import hcp_guest
from hcp_guest import Task
from wit_world.imports import atomics, store


def error(e: Err) -> dict:
    v = e.value
    if isinstance(v, store.Error_NoSuchStore):
        return {"err": "no-such-store"}
    if isinstance(v, store.Error_AccessDenied):
        return {"err": "access-denied"}
    if isinstance(v, store.Error_Other):
        return {"err": f"other: {v.value}"}
    return {"err": f"unexpected: {v!r}"}


def call(op: str, bucket: store.Bucket, s: dict):
    key = s.get("key", "")
    if op == "open":
        return None
    if op == "get":
        v = bucket.get(key)
        return None if v is None else v.decode("utf-8", errors="replace")
    if op == "set":
        # `value` as text, or `size` bytes of `x`.
        value = b"x" * s["size"] if "size" in s else s.get("value", "").encode()
        bucket.set(key, value)
        return None
    if op == "delete":
        bucket.delete(key)
        return None
    if op == "exists":
        return bucket.exists(key)
    if op == "list":
        return bucket.list_keys(None).keys
    if op == "increment":
        return atomics.increment(bucket, key, s.get("delta", 1))
    raise ValueError(f"unknown op {op!r}")


def step(s: dict) -> dict:
    try:
        with store.open(s.get("bucket", "")) as bucket:
            return {"ok": call(s["op"], bucket, s)}
    except Err as e:
        return error(e)


def run(task: Task, inputs: dict) -> dict:
    return {"results": [step(s) for s in inputs.get("steps", [])]}


WitWorld = hcp_guest.capability(run)
