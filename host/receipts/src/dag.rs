//! The receipt DAG: per-host hash chains, parent links across hosts, Lamport
//! order, and the merged order of several hosts' receipts.
//!
//! A receipt's edges are its `prev_hash` (the previous receipt of its host's
//! log) and its `parents`. In a valid DAG every parent is in the set or
//! declared outside it, every edge goes from a smaller Lamport clock to a
//! larger one (so there are no cycles), and each host's receipts form an
//! unbroken chain. The merged order sorts by (lamport, host_id, hash): a
//! topological order shared by every verifier.

use crate::hash::Digest;
use crate::receipt::Receipt;
use crate::view::Parents;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

/// A receipt with its hash.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    /// The receipt's hash.
    pub hash: Digest,
    /// The receipt.
    pub receipt: &'a Receipt,
}

/// What the chain and DAG checks read of a receipt.
pub(crate) trait Linked {
    fn hash(&self) -> Digest;
    fn host_id(&self) -> &str;
    fn seq(&self) -> u64;
    fn lamport(&self) -> u64;
    fn prev_hash(&self) -> Option<Digest>;
    fn parents(&self) -> Parents<'_>;
}

impl Linked for Node<'_> {
    fn hash(&self) -> Digest {
        self.hash
    }
    fn host_id(&self) -> &str {
        &self.receipt.host_id
    }
    fn seq(&self) -> u64 {
        self.receipt.seq
    }
    fn lamport(&self) -> u64 {
        self.receipt.lamport
    }
    fn prev_hash(&self) -> Option<Digest> {
        self.receipt.prev_hash
    }
    fn parents(&self) -> Parents<'_> {
        Parents::Slice(&self.receipt.parents)
    }
}

/// Where a host's chain segment starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainStart {
    /// The host.
    pub host_id: String,
    /// `seq` of the first receipt.
    pub first_seq: u64,
    /// `prev_hash` of the first receipt (null when `first_seq` is 0): the
    /// receipt before the segment, outside the set.
    pub prev_hash: Option<Digest>,
}

/// A problem with one receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// Index of the receipt in the slice checked.
    pub node: usize,
    /// What is wrong.
    pub problem: Problem,
}

/// What can be wrong in the DAG.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A receipt of another host in this host's chain.
    #[error("belongs to host {found}, not {expected}: a receipt from another log")]
    WrongHost {
        /// The chain's host.
        expected: String,
        /// The receipt's host.
        found: String,
    },
    /// `seq` skips ahead, and the skipped receipts are nowhere in the segment.
    #[error("seq {found} where {expected} was expected: {} missing (deleted)", missing(*expected, *found))]
    Missing {
        /// The expected seq.
        expected: u64,
        /// The seq found.
        found: u64,
    },
    /// `seq` skips ahead, and the expected receipt comes later.
    #[error(
        "seq {found} where {expected} was expected: receipt {expected} comes later (reordered)"
    )]
    Reordered {
        /// The expected seq.
        expected: u64,
        /// The seq found.
        found: u64,
    },
    /// `seq` goes back or repeats.
    #[error(
        "seq {found} where {expected} was expected: receipts out of order, repeated or inserted"
    )]
    OutOfOrder {
        /// The expected seq.
        expected: u64,
        /// The seq found.
        found: u64,
    },
    /// `prev_hash` does not name the previous receipt.
    #[error(
        "prev_hash is {found} but the previous receipt (seq {prev_seq}) hashes to {expected}: the hash chain is broken"
    )]
    ChainBroken {
        /// The previous receipt's seq.
        prev_seq: u64,
        /// Its hash.
        expected: Digest,
        /// What `prev_hash` says.
        found: String,
    },
    /// The first receipt does not continue where the segment is declared to start.
    #[error("prev_hash is {found}, but the segment is declared to follow {expected}")]
    StartMismatch {
        /// The declared start.
        expected: String,
        /// What `prev_hash` says.
        found: String,
    },
    /// The Lamport clock does not increase along the chain.
    #[error("lamport {lamport} is not above the previous receipt's {prev}")]
    ClockNotAfterPrev {
        /// This receipt's clock.
        lamport: u64,
        /// The previous receipt's.
        prev: u64,
    },
    /// The same receipt twice.
    #[error("the same receipt appears again at position {first}")]
    Duplicate {
        /// Where it appears first.
        first: usize,
    },
    /// A parent that is neither in the set nor declared outside it.
    #[error("parent {0} is neither in the pack nor declared outside it")]
    MissingParent(Digest),
    /// A parent with a clock not below the child's.
    #[error("lamport {lamport} is not above parent {parent}'s {parent_lamport}")]
    ClockNotAfterParent {
        /// The parent.
        parent: Digest,
        /// The parent's clock.
        parent_lamport: u64,
        /// This receipt's clock.
        lamport: u64,
    },
    /// A receipt on a cycle of links.
    #[error("is on a cycle of parent links")]
    Cycle,
}

fn missing(expected: u64, found: u64) -> String {
    if found == expected + 1 {
        format!("receipt {expected} is")
    } else {
        format!("receipts {expected} to {} are", found - 1)
    }
}

/// Checks one host's chain segment, `nodes` in the order stored: each
/// receipt belongs to the host, seqs run on from `start.first_seq` without a
/// gap, `prev_hash` names the previous receipt, and clocks increase.
pub fn check_chain(start: &ChainStart, nodes: &[Node<'_>]) -> Vec<Issue> {
    chain(start, nodes)
}

/// As [`check_chain`], for anything [`Linked`].
pub(crate) fn chain<N: Linked>(start: &ChainStart, nodes: &[N]) -> Vec<Issue> {
    let mut issues = Vec::new();
    let show = |d: Option<Digest>| d.map_or_else(|| "null".to_owned(), |d| d.to_string());
    let mut expected_seq = start.first_seq;
    // Where each seq appears last, to tell a reordered receipt from a
    // deleted one: made the first time a seq skips ahead.
    let mut last_at: Option<HashMap<u64, usize>> = None;
    for (i, node) in nodes.iter().enumerate() {
        let mut push = |problem| issues.push(Issue { node: i, problem });
        if node.host_id() != start.host_id {
            push(Problem::WrongHost {
                expected: start.host_id.clone(),
                found: node.host_id().to_owned(),
            });
        }
        let seq = node.seq();
        if seq > expected_seq {
            let last_at = last_at.get_or_insert_with(|| {
                nodes
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (n.seq(), i))
                    .collect()
            });
            if last_at.get(&expected_seq).is_some_and(|&j| j > i) {
                push(Problem::Reordered {
                    expected: expected_seq,
                    found: seq,
                });
            } else {
                push(Problem::Missing {
                    expected: expected_seq,
                    found: seq,
                });
            }
        } else if seq < expected_seq {
            push(Problem::OutOfOrder {
                expected: expected_seq,
                found: seq,
            });
        }
        match i.checked_sub(1).map(|p| &nodes[p]) {
            None => {
                if node.prev_hash() != start.prev_hash {
                    push(Problem::StartMismatch {
                        expected: show(start.prev_hash),
                        found: show(node.prev_hash()),
                    });
                }
            }
            Some(prev) => {
                if node.prev_hash() != Some(prev.hash()) {
                    push(Problem::ChainBroken {
                        prev_seq: prev.seq(),
                        expected: prev.hash(),
                        found: show(node.prev_hash()),
                    });
                }
                if node.lamport() <= prev.lamport() {
                    push(Problem::ClockNotAfterPrev {
                        lamport: node.lamport(),
                        prev: prev.lamport(),
                    });
                }
            }
        }
        expected_seq = seq.max(expected_seq) + 1;
    }
    issues
}

/// Checks the links of all `nodes` (every host): no receipt twice, every
/// parent in `nodes` or in `external`, every parent's clock below its
/// child's, and no cycle through `parents` and `prev_hash` links.
pub fn check_graph(nodes: &[Node<'_>], external: &HashSet<Digest>) -> Vec<Issue> {
    graph(nodes, external)
}

/// As [`check_graph`], for anything [`Linked`].
pub(crate) fn graph<N: Linked + Sync>(nodes: &[N], external: &HashSet<Digest>) -> Vec<Issue> {
    // The first node of each hash: one map per part of the hashes (by their
    // first byte), the parts made in parallel, each in node order.
    let parts = crate::par::runs(nodes.len());
    let part_of = |hash: &Digest| usize::from(hash.0[0]) % parts;
    let part_ids: Vec<usize> = (0..parts).collect();
    let made = crate::par::map_each(&part_ids, |&part| {
        let mut index: HashMap<Digest, usize> = HashMap::with_capacity(nodes.len() / parts + 1);
        let mut duplicates = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            let hash = node.hash();
            if part_of(&hash) != part {
                continue;
            }
            match index.entry(hash) {
                Entry::Occupied(first) => duplicates.push(Issue {
                    node: i,
                    problem: Problem::Duplicate {
                        first: *first.get(),
                    },
                }),
                Entry::Vacant(slot) => {
                    slot.insert(i);
                }
            }
        }
        (index, duplicates)
    });
    let mut index = Vec::with_capacity(parts);
    let mut issues = Vec::new();
    for (part, duplicates) in made {
        index.push(part);
        issues.extend(duplicates);
    }
    issues.sort_by_key(|issue| issue.node);
    let find = |hash: &Digest| index[part_of(hash)].get(hash).copied();
    let unique = issues.is_empty();
    // Edges parent -> child inside the set, found in parallel over runs of
    // nodes. If every one goes from a smaller clock to a larger one there
    // can be no cycle; only otherwise is the cycle search run.
    let run = || (Vec::<Issue>::new(), Vec::<(usize, usize)>::new(), true);
    let (_, runs) = crate::par::map_init(nodes, run, |(issues, edges, ordered), i, node| {
        let lamport = node.lamport();
        for parent in node.parents().iter() {
            match find(&parent) {
                Some(p) => {
                    edges.push((p, i));
                    let parent_lamport = nodes[p].lamport();
                    if lamport <= parent_lamport {
                        *ordered = false;
                        issues.push(Issue {
                            node: i,
                            problem: Problem::ClockNotAfterParent {
                                parent,
                                parent_lamport,
                                lamport,
                            },
                        });
                    }
                }
                None if external.contains(&parent) => {}
                None => issues.push(Issue {
                    node: i,
                    problem: Problem::MissingParent(parent),
                }),
            }
        }
        let prev = match node.prev_hash() {
            // With no hash twice, the node before is the only one with its hash.
            Some(h) if unique && i > 0 && nodes[i - 1].hash() == h => Some(i - 1),
            Some(h) => find(&h),
            None => None,
        };
        if let Some(p) = prev {
            edges.push((p, i));
            // The chain check reports it; here it only means "look for cycles".
            *ordered &= lamport > nodes[p].lamport();
        }
    });
    let mut edges = Vec::new();
    let mut ordered = true;
    for (run_issues, run_edges, run_ordered) in runs {
        issues.extend(run_issues);
        edges.extend(run_edges);
        ordered &= run_ordered;
    }
    if !ordered {
        issues.extend(cycles(nodes.len(), &edges).into_iter().map(|node| Issue {
            node,
            problem: Problem::Cycle,
        }));
    }
    issues
}

/// Nodes on (or behind) a cycle: what Kahn's algorithm never frees.
fn cycles(n: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut indegree = vec![0usize; n];
    let mut start = vec![0usize; n + 1];
    for &(p, c) in edges {
        indegree[c] += 1;
        start[p + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut children = vec![0usize; edges.len()];
    let mut fill = start.clone();
    for &(p, c) in edges {
        children[fill[p]] = c;
        fill[p] += 1;
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    while let Some(p) = ready.pop() {
        for &c in &children[start[p]..start[p + 1]] {
            indegree[c] -= 1;
            if indegree[c] == 0 {
                ready.push(c);
            }
        }
    }
    (0..n).filter(|&i| indegree[i] > 0).collect()
}

/// The merged order of several hosts' receipts: indices into `nodes` sorted
/// by (lamport, host_id, hash).
pub fn merge_order(nodes: &[Node<'_>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&nodes[a], &nodes[b]);
        (x.receipt.lamport, &x.receipt.host_id, x.hash).cmp(&(
            y.receipt.lamport,
            &y.receipt.host_id,
            y.hash,
        ))
    });
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    struct TestNode {
        hash: Digest,
        lamport: u64,
        prev: Option<Digest>,
        parents: Vec<Digest>,
    }

    impl Linked for TestNode {
        fn hash(&self) -> Digest {
            self.hash
        }
        fn host_id(&self) -> &str {
            "h"
        }
        fn seq(&self) -> u64 {
            0
        }
        fn lamport(&self) -> u64 {
            self.lamport
        }
        fn prev_hash(&self) -> Option<Digest> {
            self.prev
        }
        fn parents(&self) -> Parents<'_> {
            Parents::Slice(&self.parents)
        }
    }

    /// The check in one pass, one map, as it was first written.
    fn one_pass(nodes: &[TestNode], external: &HashSet<Digest>) -> Vec<Issue> {
        let mut issues = Vec::new();
        let mut index: HashMap<Digest, usize> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            if let Some(&first) = index.get(&node.hash) {
                issues.push(Issue {
                    node: i,
                    problem: Problem::Duplicate { first },
                });
            } else {
                index.insert(node.hash, i);
            }
        }
        let mut edges = Vec::new();
        let mut ordered = true;
        for (i, node) in nodes.iter().enumerate() {
            for &parent in &node.parents {
                match index.get(&parent) {
                    Some(&p) => {
                        edges.push((p, i));
                        let parent_lamport = nodes[p].lamport;
                        if node.lamport <= parent_lamport {
                            ordered = false;
                            issues.push(Issue {
                                node: i,
                                problem: Problem::ClockNotAfterParent {
                                    parent,
                                    parent_lamport,
                                    lamport: node.lamport,
                                },
                            });
                        }
                    }
                    None if external.contains(&parent) => {}
                    None => issues.push(Issue {
                        node: i,
                        problem: Problem::MissingParent(parent),
                    }),
                }
            }
            if let Some(&p) = node.prev.as_ref().and_then(|h| index.get(h)) {
                edges.push((p, i));
                ordered &= node.lamport > nodes[p].lamport;
            }
        }
        if !ordered {
            issues.extend(cycles(nodes.len(), &edges).into_iter().map(|node| Issue {
                node,
                problem: Problem::Cycle,
            }));
        }
        issues
    }

    #[test]
    fn the_graph_check_in_parallel_finds_what_one_pass_finds() {
        let hash_of = |i: usize| Digest::of(&i.to_le_bytes());
        let chain = |n: usize| -> Vec<TestNode> {
            (0..n)
                .map(|i| TestNode {
                    hash: hash_of(i),
                    lamport: i as u64 + 1,
                    prev: i.checked_sub(1).map(hash_of),
                    parents: i.checked_sub(8).map(hash_of).into_iter().collect(),
                })
                .collect()
        };
        let external = HashSet::from([Digest::of(b"external")]);
        let n = 10_000;
        let good = chain(n);
        assert_eq!(graph(&good, &external), Vec::new());
        let mut bad = chain(n);
        bad[5000].hash = bad[4000].hash;
        bad[7000].hash = bad[10].hash;
        bad[6000].parents.push(Digest::of(b"missing"));
        bad[6001].parents.push(Digest::of(b"external"));
        bad[3000].lamport = 1;
        bad[9000].parents.push(hash_of(9500));
        bad[9999].prev = Some(Digest::of(b"nowhere"));
        let found = graph(&bad, &external);
        assert_eq!(found, one_pass(&bad, &external));
        assert!(
            found.iter().any(|i| i.problem == Problem::Cycle)
                && found
                    .iter()
                    .any(|i| matches!(i.problem, Problem::Duplicate { .. }))
                && found
                    .iter()
                    .any(|i| matches!(i.problem, Problem::MissingParent(_))),
            "{found:?}"
        );
        // Without duplicates, prev_hash naming the node before is found without a lookup.
        let mut clocks = chain(n);
        clocks[4321].lamport = 0;
        assert_eq!(graph(&clocks, &external), one_pass(&clocks, &external));
    }
}
