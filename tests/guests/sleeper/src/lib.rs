//! Sleeps `inputs.ms` milliseconds (none without it), then echoes its
//! inputs: a slow task that does not burn a core.

use hcp_guest::{Failure, Task};
use serde_json::Value;

fn sleep_then_echo(_task: &Task, inputs: Value) -> Result<Value, Failure> {
    if let Some(ms) = inputs.get("ms").and_then(Value::as_u64) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    Ok(inputs)
}

hcp_guest::export_capability!(sleep_then_echo);
