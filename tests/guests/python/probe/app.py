"""A hostile Python guest: each task does one thing named by
`inputs.action` that its manifest may not grant, and reports what Python
saw (`{"ok": false, "error": ...}`) instead of failing, so that a test can
assert the exact error and the host's receipts.
"""

# socket encodes host names with the idna codec, which componentize-py
# bundles only when imported.
import encodings.idna  # noqa: F401
import os
import socket

import hcp_guest
from hcp_guest import Failure, Task, artifacts, checkpoints, log


def attempt(action: str, inputs: dict):
    if action == "read":
        with open(inputs["path"], "rb") as f:
            return f.read().decode("utf-8", errors="replace")
    if action == "list":
        return sorted(os.listdir(inputs["path"]))
    if action == "write":
        with open(inputs["path"], "w") as f:
            f.write("written by a hostile guest")
        return "written"
    if action == "connect":
        with socket.create_connection((inputs["host"], inputs["port"]), timeout=5):
            return "connected"
    if action == "socket":
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.connect((inputs["host"], inputs["port"]))
            return "connected"
    if action == "lookup":
        return [a[4][0] for a in socket.getaddrinfo(inputs["host"], 80)]
    if action == "artifact":
        return artifacts.create(inputs["name"], "text/plain", "probe")
    if action == "environ":
        return dict(os.environ)
    if action == "checkpoint":
        saved = checkpoints.save("phase-1", {"done": 3})
        return {"id": saved, "state": checkpoints.load(saved)}
    if action == "warn":
        hcp_guest.warning("half of the input was empty")
        return "warned"
    if action == "fail":
        raise Failure.input(
            "the input names no file",
            phase="reading",
            step=2,
            recoverable=True,
            partial_outputs={"read": 0},
        )
    raise ValueError(f"unknown action {action!r}")


def probe(task: Task, inputs: dict) -> dict:
    action = inputs["action"]
    try:
        value = attempt(action, inputs)
    except (OSError, hcp_guest.HostError) as e:
        log.warn("refused", action=action, error=type(e).__name__)
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    return {"ok": True, "value": value}


WitWorld = hcp_guest.capability(probe)
