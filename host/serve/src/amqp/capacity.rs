//! How much work a host takes from the broker at once: `--amqp-prefetch N`
//! is both the broker's prefetch window (deliveries not yet acknowledged)
//! and the number of AMQP tasks this host holds at once, from taking the
//! delivery to publishing the final answer. A task holds its place while it
//! is unacknowledged, queued for a slot or running; a task that waits for an
//! operator gives it back (it costs nothing while it waits), and so does one
//! answered at once (refused, malformed, a duplicate).
//!
//! Without this, acknowledging right after admission would let one host
//! drain a shared queue into its own store while the other hosts idle: the
//! broker refills the prefetch window on every acknowledgement. With it,
//! the host stops reading deliveries when it is full, the broker keeps the
//! rest in the queue, and another host takes them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The places of one connection's tasks.
#[derive(Debug, Clone)]
pub(super) struct Capacity {
    places: Arc<Semaphore>,
    held: Arc<Mutex<HashMap<String, OwnedSemaphorePermit>>>,
}

/// A place taken for a delivery not yet known as a task.
#[derive(Debug)]
pub(super) struct Place(OwnedSemaphorePermit);

impl Capacity {
    pub(super) fn new(places: u16) -> Self {
        Self {
            places: Arc::new(Semaphore::new(usize::from(places))),
            held: Arc::default(),
        }
    }

    /// Waits for a free place (the host is full until a task ends).
    pub(super) async fn take(&self) -> Place {
        Place(
            self.places
                .clone()
                .acquire_owned()
                .await
                .expect("the semaphore is never closed"),
        )
    }

    /// A task this host owns from an earlier connection (acknowledged, not
    /// answered yet) takes a place if one is free.
    pub(super) fn adopt(&self, task_id: &str) {
        if let Ok(permit) = self.places.clone().try_acquire_owned() {
            self.lock().insert(task_id.to_owned(), permit);
        }
    }

    /// The place stays taken until [`Capacity::release`] of `task_id`.
    pub(super) fn hold(&self, task_id: &str, place: Place) {
        self.lock().insert(task_id.to_owned(), place.0);
    }

    /// The task was answered for good: its place is free.
    pub(super) fn release(&self, task_id: &str) {
        self.lock().remove(task_id);
    }

    /// Places free now.
    #[cfg(test)]
    fn free(&self) -> usize {
        self.places.available_permits()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, OwnedSemaphorePermit>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_full_host_takes_nothing_until_a_task_is_answered() {
        let capacity = Capacity::new(2);
        let a = capacity.take().await;
        let b = capacity.take().await;
        capacity.hold("task-a", a);
        capacity.hold("task-b", b);
        assert_eq!(capacity.free(), 0);
        // Full: the next delivery waits.
        let waiting = tokio::time::timeout(Duration::from_millis(50), capacity.take()).await;
        assert!(waiting.is_err(), "a third task was taken by a full host");
        // An unknown task's release frees nothing.
        capacity.release("task-x");
        assert_eq!(capacity.free(), 0);
        capacity.release("task-a");
        let c = tokio::time::timeout(Duration::from_secs(1), capacity.take())
            .await
            .expect("a place after a task was answered");
        // A place not held (the task was answered at once) is free again
        // when dropped.
        drop(c);
        assert_eq!(capacity.free(), 1);
        // Adopting takes a free place, and never waits when there is none.
        capacity.adopt("task-old");
        assert_eq!(capacity.free(), 0);
        capacity.adopt("task-older");
        assert_eq!(capacity.free(), 0);
        capacity.release("task-old");
        assert_eq!(capacity.free(), 1);
    }
}
