use std::sync::Arc;
use std::time::Instant;
struct T;
#[async_trait::async_trait]
impl executor_sandbox::Tools for T {
    fn policy(&self, _: &str, _: &serde_json::Value) -> executor_sandbox::Policy {
        executor_sandbox::Policy::Run
    }
    async fn call(
        &self,
        _: &str,
        a: serde_json::Value,
        _: &executor_sandbox::CallContext,
    ) -> executor_sandbox::ToolOutcome {
        Ok(a)
    }
    async fn search(&self, a: serde_json::Value) -> executor_sandbox::ToolOutcome {
        Ok(a)
    }
    async fn describe(&self, a: serde_json::Value) -> executor_sandbox::ToolOutcome {
        Ok(a)
    }
}
fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let _g = rt.enter();
    let n = 20000u32;
    let tools: Arc<dyn executor_sandbox::Tools> = Arc::new(T);
    let sb = executor_sandbox::Sandbox::new(Default::default());
    for (name, code) in [("W1", "return 1 + 2")] {
        let t = Instant::now();
        for _ in 0..n {
            rt.block_on(sb.run(
                executor_sandbox::Segment::start(
                    executor_core::ExecutionId::parse("x").unwrap(),
                    code,
                    executor_core::Timestamp::from_millis(0),
                    1,
                ),
                tools.clone(),
            ));
        }
        println!("run {name}: {:?}", t.elapsed() / n);
    }
}
