"""A Python guest built for the world `capability`: componentize-py makes
it import every interface of that world, `instrument` and `hid` included,
though it never calls them. Granted neither, it is refused before it is
compiled."""

import hcp_guest
from hcp_guest import Task


def noop(task: Task, inputs: dict) -> dict:
    return {}


WitWorld = hcp_guest.capability(noop)
