//! Echoes its inputs as its outputs.

use hcp_guest::{Failure, Task};
use serde_json::Value;

fn echo(_task: &Task, inputs: Value) -> Result<Value, Failure> {
    Ok(inputs)
}

hcp_guest::export_capability!(echo);
