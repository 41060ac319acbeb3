//! One QuickJS runtime and context running one execution segment, driven
//! synchronously: run jobs until the code blocks, hand out the tool calls it
//! issued, deliver their outcomes, repeat. Everything here stays on one thread.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rquickjs::function::Opt;
use rquickjs::promise::PromiseState;
use rquickjs::{CatchResultExt, CaughtError, Context, Ctx, Function, Object, Persistent, Promise, Runtime, Value};
use serde_json::Value as Json;

use crate::logs::Logs;
use crate::{Limits, SandboxError};

const PRELUDE: &str = include_str!("prelude.js");

/// A tool call the code issued and is awaiting.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IssuedCall {
    pub step: u32,
    pub path: String,
    pub args: Json,
}

/// What the awaiting promise of a call receives.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Delivery {
    /// Resolves with this JSON value.
    Value(Json),
    /// Rejects with an `Error`.
    Error(String),
    /// Rejects with an `ApprovalDeclinedError`.
    Declined(String),
}

pub(crate) enum MainState {
    Pending,
    /// The returned value as JSON.
    Completed(String),
    Failed(SandboxError),
}

/// State shared between the host functions inside the context and the engine.
struct Host {
    issued: Vec<IssuedCall>,
    next_step: u32,
    pinned_now: f64,
    logs: Logs,
}

/// CPU time spent in JavaScript, and the wall-clock deadline. Checked by
/// QuickJS's interrupt handler, which cannot be caught by the code.
struct Meter {
    cpu_used: Duration,
    running_since: Option<Instant>,
    cpu_limit: Duration,
    wall_deadline: Instant,
    tripped: Option<SandboxError>,
}

impl Meter {
    fn check(&mut self) -> bool {
        let now = Instant::now();
        let running = self.running_since.map_or(Duration::ZERO, |since| now - since);
        if self.cpu_used + running > self.cpu_limit {
            self.tripped.get_or_insert(SandboxError::CpuLimit { limit: self.cpu_limit });
        } else if now > self.wall_deadline {
            self.tripped.get_or_insert(SandboxError::WallClockLimit);
        }
        self.tripped.is_some()
    }
}

pub(crate) struct Engine {
    // Declared first so they drop before the context and runtime they live in.
    hooks: Persistent<Object<'static>>,
    main: Persistent<Promise<'static>>,
    context: Context,
    runtime: Runtime,
    host: Rc<RefCell<Host>>,
    meter: Rc<RefCell<Meter>>,
    limits: Limits,
}

impl Engine {
    /// A fresh runtime and context with the globals installed, the code's async
    /// function called (so it runs until its first `await`).
    pub fn start(
        js: &str,
        seed: u64,
        pinned_now: f64,
        limits: &Limits,
        wall_deadline: Instant,
    ) -> Result<Self, SandboxError> {
        let internal = |e: rquickjs::Error| SandboxError::Internal { message: e.to_string() };
        let runtime = Runtime::new().map_err(internal)?;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(limits.stack_bytes);
        let meter = Rc::new(RefCell::new(Meter {
            cpu_used: Duration::ZERO,
            running_since: None,
            cpu_limit: limits.cpu,
            wall_deadline,
            tripped: None,
        }));
        let interrupt_meter = meter.clone();
        runtime.set_interrupt_handler(Some(Box::new(move || interrupt_meter.borrow_mut().check())));
        let context = Context::full(&runtime).map_err(internal)?;
        let host = Rc::new(RefCell::new(Host {
            issued: Vec::new(),
            next_step: 0,
            pinned_now,
            logs: Logs::new(limits.log_bytes),
        }));

        let started = meter.borrow_mut().start();
        let installed = context.with(|ctx| -> Result<_, SandboxError> {
            let hooks = install_prelude(&ctx, &host, seed).map_err(|e| SandboxError::Internal { message: e })?;
            let main: Function = ctx.eval(js).catch(&ctx).map_err(|e| classify(&meter, e, limits))?;
            let promise: Promise = main.call(()).catch(&ctx).map_err(|e| classify(&meter, e, limits))?;
            Ok((Persistent::save(&ctx, hooks), Persistent::save(&ctx, promise)))
        });
        meter.borrow_mut().stop(started);
        let (hooks, main) = installed?;
        Ok(Self { hooks, main, context, runtime, host, meter, limits: limits.clone() })
    }

    /// Run queued promise jobs until the code blocks on something.
    pub fn run_jobs(&mut self) -> Result<(), SandboxError> {
        let started = self.meter.borrow_mut().start();
        let result = loop {
            match self.runtime.execute_pending_job() {
                Ok(true) => continue,
                Ok(false) => break Ok(()),
                Err(job) => {
                    let (meter, limits) = (&self.meter, &self.limits);
                    let error = job
                        .0
                        .with(|ctx| classify(meter, CaughtError::from_error(&ctx, rquickjs::Error::Exception), limits));
                    break Err(error);
                }
            }
        };
        self.meter.borrow_mut().stop(started);
        if let Some(tripped) = self.meter.borrow().tripped.clone() {
            return Err(tripped);
        }
        result
    }

    pub fn state(&self) -> MainState {
        let started = self.meter.borrow_mut().start();
        let state = self.context.with(|ctx| {
            let main = match self.main.clone().restore(&ctx) {
                Ok(main) => main,
                Err(e) => return MainState::Failed(SandboxError::Internal { message: e.to_string() }),
            };
            match main.state() {
                PromiseState::Pending => MainState::Pending,
                PromiseState::Rejected => {
                    let error = match main.result::<Value>() {
                        Some(Err(e)) => CaughtError::from_error(&ctx, e),
                        _ => CaughtError::Error(rquickjs::Error::Unknown),
                    };
                    MainState::Failed(classify(&self.meter, error, &self.limits))
                }
                PromiseState::Resolved => {
                    let serialised =
                        main.result::<Value>().and_then(Result::ok).ok_or(rquickjs::Error::Unknown).and_then(|value| {
                            let finish: Function = self.hooks.clone().restore(&ctx)?.get("finish")?;
                            finish.call::<_, String>((value,))
                        });
                    match serialised.catch(&ctx) {
                        Ok(json) => MainState::Completed(json),
                        Err(error) => MainState::Failed(match classify(&self.meter, error, &self.limits) {
                            SandboxError::Uncaught { message } => SandboxError::ResultNotSerializable { message },
                            other => other,
                        }),
                    }
                }
            }
        });
        self.meter.borrow_mut().stop(started);
        state
    }

    /// The calls issued since the last time, in step order.
    pub fn take_issued(&mut self) -> Vec<IssuedCall> {
        std::mem::take(&mut self.host.borrow_mut().issued)
    }

    pub fn set_pinned_now(&mut self, millis: f64) {
        self.host.borrow_mut().pinned_now = millis;
    }

    /// Settle the promise of `step`; the code continues at the next `run_jobs`.
    pub fn deliver(&mut self, step: u32, delivery: Delivery) -> Result<(), SandboxError> {
        let (kind, payload) = match delivery {
            Delivery::Value(json) => (0, json.to_string()),
            Delivery::Error(message) => (1, message),
            Delivery::Declined(message) => (2, message),
        };
        let started = self.meter.borrow_mut().start();
        let delivered = self.context.with(|ctx| {
            let result = self.hooks.clone().restore(&ctx).and_then(|hooks| {
                let deliver: Function = hooks.get("deliver")?;
                deliver.call::<_, ()>((step, kind, payload))
            });
            result.catch(&ctx).map_err(|e| classify(&self.meter, e, &self.limits))
        });
        self.meter.borrow_mut().stop(started);
        delivered
    }

    pub fn into_logs(self) -> Vec<String> {
        let Self { hooks, main, context, runtime, host, .. } = self;
        drop((hooks, main));
        drop((context, runtime));
        Rc::try_unwrap(host).map(|h| h.into_inner().logs.into_lines()).unwrap_or_default()
    }
}

impl Meter {
    fn start(&mut self) -> Instant {
        let now = Instant::now();
        self.running_since = Some(now);
        now
    }

    fn stop(&mut self, started: Instant) {
        self.cpu_used += started.elapsed();
        self.running_since = None;
    }
}

fn install_prelude<'js>(ctx: &Ctx<'js>, host: &Rc<RefCell<Host>>, seed: u64) -> Result<Object<'js>, String> {
    let fail = |e: rquickjs::Error| format!("installing the sandbox globals failed: {e}");
    let calls = host.clone();
    let host_call = Function::new(ctx.clone(), move |path: String, args: Opt<String>| -> u32 {
        let mut host = calls.borrow_mut();
        let step = host.next_step;
        host.next_step += 1;
        let args = args.0.and_then(|json| serde_json::from_str(&json).ok()).unwrap_or(Json::Null);
        host.issued.push(IssuedCall { step, path, args });
        step
    })
    .map_err(fail)?;
    let logs = host.clone();
    let host_log = Function::new(ctx.clone(), move |level: String, line: String| {
        logs.borrow_mut().logs.push(&level, &line);
    })
    .map_err(fail)?;
    let clock = host.clone();
    let host_now = Function::new(ctx.clone(), move || clock.borrow().pinned_now).map_err(fail)?;
    let prelude: Function = ctx.eval(PRELUDE).map_err(fail)?;
    prelude.call((host_call, host_log, host_now, (seed >> 32) as u32, seed as u32)).map_err(fail)
}

/// Turn a JavaScript exception into the error the client sees.
fn classify(meter: &Rc<RefCell<Meter>>, error: CaughtError<'_>, limits: &Limits) -> SandboxError {
    if let Some(tripped) = meter.borrow().tripped.clone() {
        return tripped;
    }
    // When even the error object cannot be allocated QuickJS throws `null`; by
    // the time the rejection is seen the heap may be freed again, so a thrown
    // `null` counts as exhaustion (code that throws null itself is told so).
    if let CaughtError::Value(v) = &error
        && v.is_null()
    {
        return SandboxError::MemoryLimit { limit: limits.memory_bytes };
    }
    let (name, message) = match &error {
        CaughtError::Exception(e) => {
            (e.as_object().get::<_, String>("name").unwrap_or_else(|_| "Error".into()), e.message().unwrap_or_default())
        }
        CaughtError::Value(v) => ("".into(), value_text(v)),
        CaughtError::Error(e) => ("".into(), e.to_string()),
    };
    if message.contains("out of memory") || matches!(error, CaughtError::Error(rquickjs::Error::Allocation)) {
        return SandboxError::MemoryLimit { limit: limits.memory_bytes };
    }
    if message.contains("stack overflow") || message.contains("Maximum call stack size exceeded") {
        return SandboxError::StackLimit { limit: limits.stack_bytes };
    }
    if name == "ApprovalDeclinedError" {
        return SandboxError::Declined { message };
    }
    let message = if name.is_empty() { message } else { format!("{name}: {message}") };
    SandboxError::Uncaught { message }
}

fn value_text(value: &Value<'_>) -> String {
    if let Some(s) = value.as_string() {
        return s.to_string().unwrap_or_default();
    }
    value
        .ctx()
        .json_stringify(value.clone())
        .ok()
        .flatten()
        .and_then(|s| s.to_string().ok())
        .unwrap_or_else(|| format!("{value:?}"))
}
