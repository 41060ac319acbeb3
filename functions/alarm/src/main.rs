//! The alarm Lambda bootstrap: the services composed from the environment
//! (the store, the scheduler and, when events are on, the event outbox); each
//! Scheduler payload goes to `executor_alarm_function::handle`.

use std::sync::Arc;

use executor_core::{Clock, SystemClock};
use executor_sandbox::{Limits, Sandbox};
use executor_scheduler::EventBridgeScheduler;
use executor_service::HostConfig;
use executor_store::DynamoStore;
use executor_telemetry::Telemetry;
use lambda_runtime::{Error, LambdaEvent, Runtime, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let telemetry = Telemetry::lambda("alarm")?;
    let store = Arc::new(DynamoStore::from_env().await?);
    let scheduler = Arc::new(EventBridgeScheduler::from_env().await?);
    let config = HostConfig::default().with_env(|n| std::env::var(n).ok())?.connect_events().await?;
    // It runs no code: the sandbox is never used.
    let alarms = executor_service::compose(store, Sandbox::new(Limits::default()), scheduler, &config).alarms;
    let handler = service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let alarms = alarms.clone();
        async move {
            let now = SystemClock.now();
            let decision = executor_alarm_function::handle(&alarms, event.payload, now).await?;
            Ok::<_, Error>(serde_json::json!({ "decision": format!("{decision:?}") }))
        }
    });
    Runtime::new(handler).layer(telemetry.invocations()).run().await
}
