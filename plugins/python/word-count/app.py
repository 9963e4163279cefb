"""word-count: counts the lines, words and bytes of every file in a
directory the manifest grants, returns the counts, and writes them as a
CSV artifact.

The host gives the component nothing but what ``manifest.json`` grants:
here one directory, read-only, seen by the guest at ``/data``. Reading
anywhere else fails as if the path did not exist, and every call the
component makes (each file opened, each log line, the artifact) is decided
by the host's policy and recorded in a receipt.
"""

import os

import hcp_guest
from hcp_guest import Failure, Task, artifacts, log


def count_text(name: str, data: bytes) -> dict:
    """The counts of one file: lines as ``wc -l`` plus an unterminated
    last line, words separated by whitespace, bytes."""
    text = data.decode("utf-8", errors="replace")
    lines = text.count("\n") + (0 if text == "" or text.endswith("\n") else 1)
    return {"name": name, "lines": lines, "words": len(text.split()), "bytes": len(data)}


def csv_field(text: str) -> str:
    """A CSV field: quoted when it holds a comma, a quote or a line break."""
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def count(task: Task, inputs: dict) -> dict:
    directory = inputs["directory"]
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        raise Failure.unavailable(f"cannot read {directory}: {e.strerror} (is it granted?)")
    files = []
    for name in names:
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise Failure.unavailable(f"{path}: {e.strerror}")
        counts = count_text(name, data)
        log.info("counted", file=name, words=counts["words"])
        files.append(counts)
    total = {
        "name": "total",
        **{k: sum(f[k] for f in files) for k in ("lines", "words", "bytes")},
    }
    csv = "file,lines,words,bytes\n" + "".join(
        f"{csv_field(c['name'])},{c['lines']},{c['words']},{c['bytes']}\n"
        for c in files + [total]
    )
    # The host stores the artifact, content-addressed, and answers its URI.
    report = artifacts.create("word-count.csv", "text/csv", csv)
    log.info(f"{len(files)} files, {total['words']} words")
    return {"files": files, "total": total, "report": report}


# The class componentize-py exports as the world's `run`.
WitWorld = hcp_guest.capability(count)
