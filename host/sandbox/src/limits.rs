//! Memory, table and instance limits of one task, enforced by wasmtime's
//! resource-limiter hook. Memory is bounded in total over all linear memories
//! of the component, and a refused growth is remembered so the trap it leads
//! to is reported as what it is.

use hcp_contracts::manifest::Limits;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;

/// Live guest resources one task may hold at once: every entry of its
/// resource table (open descriptors, sockets, streams, pollables, name
/// lookups, HTTP requests and responses). A task at the limit gets an error
/// (`new-socket-limit` for a socket) or, where the interface has none,
/// fails `execution_error` saying so; the host's own descriptors stay
/// bounded.
pub const MAX_TABLE_ENTRIES: usize = 512;

/// The resource table of one task, capped at [`MAX_TABLE_ENTRIES`].
pub(crate) fn task_table() -> ResourceTable {
    let mut table = ResourceTable::new();
    table.set_max_capacity(MAX_TABLE_ENTRIES);
    table
}

/// The limiter of one task's store.
#[derive(Debug)]
pub(crate) struct TaskLimiter {
    memory_limit: u64,
    memory_used: u64,
    table_elements: u64,
    instances: usize,
    /// A growth this limiter refused: (desired total bytes, limit).
    pub(crate) memory_refused: Option<u64>,
    pub(crate) table_refused: Option<u64>,
}

impl TaskLimiter {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            memory_limit: limits.memory_bytes,
            memory_used: 0,
            table_elements: limits.table_elements,
            instances: usize::try_from(limits.instances).unwrap_or(usize::MAX),
            memory_refused: None,
            table_refused: None,
        }
    }

    pub(crate) fn memory_limit(&self) -> u64 {
        self.memory_limit
    }
}

impl ResourceLimiter for TaskLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current) as u64;
        let total = self.memory_used.saturating_add(growth);
        if total > self.memory_limit {
            self.memory_refused = Some(total);
            return Ok(false);
        }
        self.memory_used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired as u64 > self.table_elements {
            self.table_refused = Some(desired as u64);
            return Ok(false);
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        self.instances.saturating_mul(4)
    }

    fn memories(&self) -> usize {
        self.instances
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_bounded_in_total() {
        let mut l = TaskLimiter::new(&Limits {
            memory_bytes: 100,
            ..Limits::DEFAULT
        });
        assert!(l.memory_growing(0, 60, None).expect("ok"));
        assert!(l.memory_growing(0, 30, None).expect("ok"));
        assert!(!l.memory_growing(30, 41, None).expect("ok"));
        assert_eq!(l.memory_refused, Some(101));
        assert!(l.memory_growing(30, 40, None).expect("ok"));
    }
}
