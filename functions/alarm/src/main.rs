//! The alarm Lambda bootstrap: wire the store, the scheduler and the alarm
//! handler (and the event outbox, when events are on); hand each Scheduler payload to `executor_alarm_function::handle`.

use std::sync::Arc;

use executor_core::{Clock, SystemClock};
use executor_scheduler::EventBridgeScheduler;
use executor_service::{Alarms, Events, HostConfig};
use executor_store::DynamoStore;
use executor_telemetry::Telemetry;
use lambda_runtime::{Error, LambdaEvent, Runtime, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let telemetry = Telemetry::lambda("alarm")?;
    let store = Arc::new(DynamoStore::from_env().await?);
    let scheduler = Arc::new(EventBridgeScheduler::from_env().await?);
    let config = HostConfig::default().with_env(|n| std::env::var(n).ok())?.connect_events().await?;
    // Its events (Session Destroyed) carry no approval link.
    let events = config.event_sink.map(|sink| Events::new(store.clone(), sink, Arc::new(SystemClock), None));
    let alarms = Arc::new(Alarms::new(store.clone(), store, scheduler, config.timeouts).with_events(events));
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
