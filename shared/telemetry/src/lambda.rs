//! The Lambda functions' invocation layer, around the runtime's own service
//! (which hands the answer back to the Runtime API before it returns):
//!
//! - each invocation runs in a `lambda.invocation` span whose fields
//!   (`requestId`, `xrayTraceId`, `coldStart`) are on every log line it writes;
//! - the invocation's sampled X-Ray trace (`_X_AMZN_TRACE_ID`, handed to us
//!   as the invocation context's trace id) is the current OpenTelemetry
//!   context, so entry spans without a W3C parent of their own join it;
//! - after the answer is delivered, [`Telemetry::flush`] writes the metrics
//!   and exports the spans, bounded, before the next invocation is fetched
//!   (Lambda may freeze the process as soon as it asks for one).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use lambda_runtime::tower::{Layer, Service};
use lambda_runtime::{Error, LambdaInvocation};
use opentelemetry::context::FutureExt;
use tracing::Instrument;
use tracing::field::Empty;

use crate::{LAMBDA_TARGET, Telemetry, xray_parent};

impl Telemetry {
    /// The layer to add to the Lambda runtime: `Runtime::new(handler).layer(telemetry.invocations())`.
    pub fn invocations(&self) -> Invocations {
        Invocations { telemetry: self.clone() }
    }
}

#[derive(Clone)]
pub struct Invocations {
    telemetry: Telemetry,
}

impl<S> Layer<S> for Invocations {
    type Service = InvocationService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        InvocationService { inner, telemetry: self.telemetry.clone(), cold: true }
    }
}

pub struct InvocationService<S> {
    inner: S,
    telemetry: Telemetry,
    cold: bool,
}

impl<S> Service<LambdaInvocation> for InvocationService<S>
where
    S: Service<LambdaInvocation, Response = (), Error = Error>,
    S::Future: 'static,
{
    type Response = ();
    type Error = Error;
    // The runtime polls its invocations in place, so they need not be `Send`.
    type Future = Pin<Box<dyn Future<Output = Result<(), Error>>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, invocation: LambdaInvocation) -> Self::Future {
        let context = &invocation.context;
        let cold = std::mem::replace(&mut self.cold, false);
        let span = tracing::info_span!(
            target: LAMBDA_TARGET,
            "lambda.invocation",
            requestId = %context.request_id,
            xrayTraceId = Empty,
            coldStart = cold,
        );
        if let Some(header) = &context.xray_trace_id {
            span.record("xrayTraceId", header.as_str());
        }
        let parent = context.xray_trace_id.as_deref().and_then(xray_parent).unwrap_or_default();
        let answered = span.in_scope(|| self.inner.call(invocation));
        let telemetry = self.telemetry.clone();
        Box::pin(async move {
            let result = answered.instrument(span).with_context(parent).await;
            telemetry.flush().await;
            result
        })
    }
}
