#!/usr/bin/env python3
"""Submit an HCP task_submit over AMQP and print the host's answers.

A caller harness as seed 000 describes it: authenticated by the broker
(its RabbitMQ user, which callers.json maps to a caller with `amqp_user`),
publishing the seed's JSON to `hcp.tasks.<capability>` with `user_id` and
`reply_to`, and reading the answers (first task_accepted / task_rejected or
a job_status, then task_completed / task_failed) from its own reply queue,
named in its broker user's namespace (`<user>.replies-<uuid>`, where the
host answers it), and keeping only answers whose `user_id` is the host's
broker user (the broker vouches for it, so another broker user cannot
forge one).

    pip install pika==1.4.4
    python3 examples/amqp_caller.py \\
        --url amqp://harness-local-01:PASSWORD@127.0.0.1:5672/%2f \\
        plugins/document-analysis/examples/task_submit.json

Exit status: 0 when the task completed, 1 when it was rejected or failed,
2 on a usage or connection error.
"""

import argparse
import json
import sys
import urllib.parse
import uuid

import pika

FINAL = {"task_completed", "task_failed", "task_rejected"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help="a task_submit JSON file")
    parser.add_argument("--url", required=True, help="amqp://USER:PASSWORD@HOST:PORT/VHOST")
    parser.add_argument("--message-id", help="override the file's message_id")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for answers")
    parser.add_argument(
        "--host-user",
        default="hcp-host",
        help="the host's broker user: answers from anyone else are dropped (default hcp-host)",
    )
    args = parser.parse_args()

    try:
        with open(args.task, encoding="utf-8") as f:
            message = json.load(f)
    except (OSError, ValueError) as e:
        print(f"amqp_caller: cannot read {args.task}: {e}", file=sys.stderr)
        return 2
    if args.message_id:
        message["message_id"] = args.message_id
    message.setdefault("message_id", str(uuid.uuid4()))
    capability = message.get("payload", {}).get("capability")
    if not capability:
        print("amqp_caller: the task names no payload.capability", file=sys.stderr)
        return 2

    params = pika.URLParameters(args.url)
    user = urllib.parse.unquote(urllib.parse.urlparse(args.url).username or "guest")
    try:
        connection = pika.BlockingConnection(params)
    except pika.exceptions.AMQPError as e:
        print(f"amqp_caller: cannot connect: {e!r}", file=sys.stderr)
        return 2
    channel = connection.channel()
    channel.confirm_delivery()
    # The host answers only into the caller's own namespace: <user>.<name>.
    reply_to = channel.queue_declare(
        queue=f"{user}.replies-{uuid.uuid4()}", exclusive=True
    ).method.queue

    try:
        channel.basic_publish(
            exchange="",
            routing_key=f"hcp.tasks.{capability}",
            body=json.dumps(message).encode(),
            properties=pika.BasicProperties(
                content_type="application/json",
                delivery_mode=2,
                user_id=user,
                reply_to=reply_to,
            ),
            mandatory=True,
        )
    except pika.exceptions.UnroutableError:
        print(
            f"amqp_caller: no queue hcp.tasks.{capability}: no host serving it has connected",
            file=sys.stderr,
        )
        return 2

    status = 1
    seen = set()
    for method, props, body in channel.consume(
        reply_to, auto_ack=True, inactivity_timeout=args.timeout
    ):
        if method is None:
            print(f"amqp_caller: no answer within {args.timeout} s", file=sys.stderr)
            status = 2
            break
        if props.correlation_id != message["message_id"]:
            continue
        # Only the host's answers: the broker refuses a user_id that is not
        # the publisher's login, so any other broker user's message is not.
        if props.user_id != args.host_user:
            print(
                f"amqp_caller: dropped a message from broker user {props.user_id!r}",
                file=sys.stderr,
            )
            continue
        # A host that died after the broker took an answer may publish it
        # again (x-hcp-redelivered); every copy has the answer's message_id.
        if props.message_id in seen:
            continue
        seen.add(props.message_id)
        headers = props.headers or {}
        answer = json.loads(body)
        kind = answer.get("type", "job_status")
        # x-hcp-lamport: send it back (same header) with a next task to any
        # host to order that task's receipts after these.
        print(
            json.dumps(
                {
                    "type": kind,
                    "host": headers.get("x-hcp-host-id"),
                    "lamport": headers.get("x-hcp-lamport"),
                    "answer": answer,
                }
            ),
            flush=True,
        )
        if kind in FINAL:
            status = 0 if kind == "task_completed" else 1
            break
    channel.cancel()
    connection.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
