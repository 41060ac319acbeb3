//! The MCP Lambda bootstrap: wire the store, the tools and the host; hand each
//! API Gateway event to `executor_mcp_function::handle`.

use std::convert::Infallible;
use std::sync::Arc;

use executor_catalog::Catalog;
use executor_sandbox::{Limits, Sandbox};
use executor_service::{Host, HostConfig};
use executor_store::{DynamoStore, EventBridgeScheduler};
use lambda_http::{Error, Request, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let store = Arc::new(DynamoStore::from_env().await?);
    let scheduler = Arc::new(EventBridgeScheduler::from_env().await?);
    // API Gateway routes by host already; DNS-rebinding checks are for loopback.
    let config = HostConfig { allowed_hosts: None, ..HostConfig::default() }.with_env(|n| std::env::var(n).ok())?;
    let catalog = Catalog::load(None).await?;
    let namespaces: Vec<String> = catalog.namespaces().into_iter().map(|n| n.namespace).collect();
    let host = Host::new(store, Arc::new(catalog), &namespaces, Sandbox::new(Limits::default()), scheduler, config);
    lambda_http::run(service_fn(move |request: Request| {
        let host = host.clone();
        async move { Ok::<_, Infallible>(executor_mcp_function::handle(&host, request).await) }
    }))
    .await
}
