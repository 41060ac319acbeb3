//! The sandbox workloads, shared by the `execution` bench and the `workload`
//! example (which callgrind counts): one copy of what is measured.

use async_trait::async_trait;
use executor_sandbox::{CallContext, Policy, PolicyCall, ToolOutcome, Tools};
use serde_json::Value;

/// A host tool that returns its arguments; `w.*` needs approval.
pub struct Echo;

#[async_trait]
impl Tools for Echo {
    fn validate(&self, _: &str, _: &Value) -> Result<(), String> {
        Ok(())
    }
    fn policy(&self, call: &PolicyCall<'_>) -> Policy {
        if call.path.starts_with("w.") {
            Policy::NeedsApproval { message: "write?".into(), rule: "writes".into() }
        } else {
            Policy::run_by_default()
        }
    }
    fn effect(&self, _: &str) -> Option<executor_core::Effect> {
        None
    }
    async fn call(&self, _: &str, args: Value, _: &CallContext) -> ToolOutcome {
        Ok(args)
    }
    async fn search(&self, request: Value) -> ToolOutcome {
        Ok(request)
    }
    async fn describe(&self, request: Value) -> ToolOutcome {
        Ok(request)
    }
}

const W1: &str = "return 1 + 2";
const W2: &str = "let s = 0; for (let i = 0; i < 100000; i++) s += i % 7; return s";
const W3: &str = "const items = []; for (let i = 0; i < 1000; i++) items.push({id: i, name: 'item ' + i, tags: ['a', 'b', 'c']});\n\
                  return JSON.parse(JSON.stringify(items)).length";
const W4: &str = "for (let i = 0; i < 20; i++) await tools.echo({i}); return 'done'";

/// Each workload with the bench's label (its short name first: `W1`..`W4`).
pub const ALL: [(&str, &str); 4] =
    [("W1 return 1 + 2", W1), ("W2 loop 100k", W2), ("W3 1000 objects JSON", W3), ("W4 20 tool calls", W4)];
