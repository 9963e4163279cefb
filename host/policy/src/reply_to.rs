//! Where the host may answer an AMQP message: its `reply_to` must be a
//! queue of the broker user that sent it. RabbitMQ checks a message's
//! `user_id` against the publishing connection's login, but not its
//! `reply_to`, so without this check one caller could have the host publish
//! answers (outputs it chose, under a `correlation_id` it chose) into
//! another caller's reply queue, or into the host's own task queues.
//!
//! The namespace of a broker user is, in this order:
//! - never a queue whose name starts with `hcp.` (the host's own);
//! - always `amq.rabbitmq.reply-to` (direct reply-to: the broker routes
//!   such an answer to the channel that published the message, under a
//!   name nobody else learns);
//! - the caller's `amqp_reply_to` in `callers.json`, a regular expression
//!   the whole queue name must match;
//! - otherwise `<user>.` followed by at least one character (also for a
//!   broker user that is nobody's caller: its refusal is answered there).
//!
//! A message without `user_id` has no namespace: nothing is published for
//! it.

use crate::PolicySet;

/// The longest `amqp_reply_to` pattern taken.
const MAX_PATTERN: usize = 1024;

/// The prefix of the host's own queues, never a reply queue.
pub const HOST_QUEUES: &str = "hcp.";

/// RabbitMQ's direct reply-to pseudo-queue (the broker rewrites it to
/// `amq.rabbitmq.reply-to.<key>` on publish).
pub const DIRECT_REPLY_TO: &str = "amq.rabbitmq.reply-to";

/// Compiles an `amqp_reply_to` pattern, anchored at both ends.
///
/// # Errors
///
/// Not a regular expression, or too long (the message says why).
pub fn compile(pattern: &str) -> Result<regex::Regex, String> {
    if pattern.is_empty() || pattern.len() > MAX_PATTERN {
        return Err(format!(
            "amqp_reply_to is a regular expression of 1 to {MAX_PATTERN} bytes"
        ));
    }
    let build = |text: &str| regex::RegexBuilder::new(text).size_limit(1 << 20).build();
    // Checked as written first, so that an error quotes the operator's text.
    build(pattern).map_err(|e| format!("amqp_reply_to is not a regular expression: {e}"))?;
    build(&format!("^(?:{pattern})$"))
        .map_err(|e| format!("amqp_reply_to is not a regular expression: {e}"))
}

/// Whether the host may answer a message of broker user `user` (its
/// `user_id`, which the broker checked) on `queue`. `Err` says why not.
///
/// # Errors
///
/// `queue` is outside the user's namespace (see the module doc).
pub fn allowed(policy: &PolicySet, user: Option<&str>, queue: &str) -> Result<(), String> {
    if queue.starts_with(HOST_QUEUES) {
        return Err(format!(
            "reply_to {queue:?}: queues named hcp.* are the host's own, never a reply queue"
        ));
    }
    if queue == DIRECT_REPLY_TO || queue.starts_with(&format!("{DIRECT_REPLY_TO}.")) {
        return Ok(());
    }
    let Some(user) = user else {
        return Err(format!(
            "reply_to {queue:?}: a message without user_id has no reply queue of its own"
        ));
    };
    let fits = match policy
        .caller_for_amqp_user(user)
        .and_then(|c| c.amqp_reply_to.as_ref())
    {
        Some(pattern) => pattern.is_match(queue),
        None => queue
            .strip_prefix(user)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|rest| !rest.is_empty()),
    };
    if fits {
        Ok(())
    } else {
        Err(format!(
            "reply_to {queue:?} is not a queue of broker user {user:?} (its amqp_reply_to in \
             callers.json, or by default {user}.<name>)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_matches_whole_names_only() {
        let p = compile(r"lab-(a|b)\.replies").expect("compiles");
        assert!(p.is_match("lab-a.replies"));
        assert!(!p.is_match("victim.lab-a.replies"));
        assert!(!p.is_match("lab-a.replies.more"));
        assert!(compile("(").is_err());
        assert!(compile("").is_err());
        assert!(compile(&"a".repeat(MAX_PATTERN + 1)).is_err());
    }

    /// The shipped policies, with `harness-local-01` as broker user
    /// `local` (default namespace) and `harness-alpha-001` as `alpha` with
    /// `amqp_reply_to` `results\.alpha-.*|hcp\..*`.
    fn policies() -> PolicySet {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies");
        let dir = tempfile::tempdir().expect("tempdir");
        for entry in std::fs::read_dir(&repo).expect("policies") {
            let entry = entry.expect("entry");
            if entry.file_type().expect("type").is_file() {
                std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copy");
            }
        }
        let path = dir.path().join("callers.json");
        let mut callers: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        for caller in callers["callers"].as_array_mut().expect("callers") {
            match caller["id"].as_str() {
                Some("harness-local-01") => caller["amqp_user"] = "local".into(),
                Some("harness-alpha-001") => {
                    caller["amqp_user"] = "alpha".into();
                    caller["amqp_reply_to"] = r"results\.alpha-.*|hcp\..*".into();
                }
                _ => {}
            }
        }
        std::fs::write(&path, callers.to_string()).expect("write");
        PolicySet::load(dir.path()).expect("the policies load")
    }

    #[test]
    fn a_reply_queue_is_the_senders_own() {
        let policy = policies();
        for (user, queue) in [
            (Some("local"), "local.replies"),
            (Some("local"), "local.a.b"),
            (Some("alpha"), "results.alpha-1"),
            // Nobody's caller: its refusal is answered in its own namespace.
            (Some("stranger"), "stranger.q"),
            (Some("local"), "amq.rabbitmq.reply-to"),
            (None, "amq.rabbitmq.reply-to.g1h2AA"),
        ] {
            assert_eq!(allowed(&policy, user, queue), Ok(()), "{user:?} {queue}");
        }
        for (user, queue, says) in [
            // Another caller's queue, a server-named one, a prefix alone.
            (Some("local"), "alpha.replies", "not a queue of broker user"),
            (
                Some("local"),
                "results.alpha-1",
                "not a queue of broker user",
            ),
            (Some("local"), "amq.gen-abc", "not a queue of broker user"),
            (Some("local"), "local.", "not a queue of broker user"),
            (
                Some("local"),
                "localx.replies",
                "not a queue of broker user",
            ),
            // A pattern of its own replaces the default.
            (Some("alpha"), "alpha.replies", "not a queue of broker user"),
            // The host's own queues, whatever a pattern says.
            (Some("local"), "hcp.tasks.document-analysis", "host's own"),
            (Some("alpha"), "hcp.tasks.document-analysis", "host's own"),
            (None, "local.replies", "without user_id"),
        ] {
            let e = allowed(&policy, user, queue).expect_err(queue);
            assert!(e.contains(says), "{user:?} {queue}: {e}");
        }
    }
}
