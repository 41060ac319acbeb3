//! One QuickJS runtime and context running one execution segment, driven
//! synchronously: run jobs until the code blocks, hand out the tool calls it
//! issued, deliver their outcomes, repeat. Everything here stays on one thread.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rquickjs::function::Opt;
use rquickjs::module::WriteOptions;
use rquickjs::promise::PromiseState;
use rquickjs::{
    CatchResultExt, CaughtError, Context, Ctx, Function, Module, Object, Persistent, Promise, Runtime, Value,
};

use crate::{Limits, SandboxError, Stop};
use host::Host;
pub(crate) use host::IssuedCall;
use meter::Meter;
use plain_json::Plain;

mod host;
mod json_parse;
mod meter;
mod plain_json;

const PRELUDE: &str = include_str!("prelude.js");
const TOOLS: &str = include_str!("tools.js");

/// The JavaScript modules as QuickJS bytecode. Compiling them is most of a
/// context's set-up time, and the bytecode is the same for every context of
/// this process.
struct Bytecode {
    prelude: Vec<u8>,
    tools: Vec<u8>,
}

fn bytecode() -> Result<&'static Bytecode, String> {
    static BYTECODE: OnceLock<Result<Bytecode, String>> = OnceLock::new();
    let compiled = BYTECODE.get_or_init(|| {
        let runtime = Runtime::new().map_err(|e| e.to_string())?;
        let context = new_context(&runtime).map_err(|e| e.to_string())?;
        context.with(|ctx| {
            let compile = |name: &str, source: &str| {
                let options = WriteOptions { strip_source: true, strip_debug: true, ..WriteOptions::default() };
                Module::declare(ctx.clone(), name, source).and_then(|m| m.write(options)).map_err(|e| e.to_string())
            };
            Ok(Bytecode { prelude: compile("prelude", PRELUDE)?, tools: compile("tools", TOOLS)? })
        })
    });
    compiled.as_ref().map_err(Clone::clone)
}

/// Evaluate one of our modules in `ctx` and take its export `name`.
fn load<'js, T: rquickjs::FromJs<'js>>(ctx: &Ctx<'js>, bytecode: &[u8], name: &str) -> rquickjs::Result<T> {
    // SAFETY: the bytes were written by `Module::write` of this same QuickJS build
    // in this process (`bytecode()`), so they are valid bytecode.
    let module = unsafe { Module::load(ctx.clone(), bytecode) }?;
    let (module, evaluated) = module.eval()?;
    evaluated.finish::<()>()?;
    module.get(name)
}

/// The globals code mode offers. Left out: typed arrays (costly to set up, and
/// tool data is JSON), WeakRef/FinalizationRegistry (GC timing would break
/// replay), performance timers and DOMException.
fn new_context(runtime: &Runtime) -> rquickjs::Result<Context> {
    use rquickjs::context::intrinsic::{Date, Eval, Json, MapSet, Promise, Proxy, RegExp, RegExpCompiler};
    Context::builder()
        .with::<Date>()
        .with::<Eval>()
        .with::<RegExpCompiler>()
        .with::<RegExp>()
        .with::<Json>()
        .with::<Proxy>()
        .with::<MapSet>()
        .with::<Promise>()
        .build(runtime)
}

/// What the awaiting promise of a call receives.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Delivery {
    /// Resolves with this value, given as JSON text.
    Json(String),
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

/// A context with the globals and the prelude installed and no execution's
/// state in it (fresh, or reset after one): what every execution starts from,
/// made ahead of time when it can be.
struct Prepared {
    // Declared first so they drop before the context and runtime they live in.
    hooks: Hooks,
    context: Context,
    runtime: Runtime,
    host: Rc<RefCell<Host>>,
    /// Executions this context has run.
    uses: u32,
    /// The class id of ordinary objects, for [`plain_json`].
    object_class: u32,
}

/// The prelude's functions the engine calls (prelude.js).
struct Hooks {
    deliver: Persistent<Function<'static>>,
    finish: Persistent<Function<'static>>,
    reset: Persistent<Function<'static>>,
}

/// An execution's engine after its answer, waiting to be reset or freed.
struct Finished {
    // Declared first so it drops before the context and runtime it lives in.
    main: Option<Persistent<Promise<'static>>>,
    prepared: Prepared,
    /// Ended cleanly: its context (or at least its runtime) may be kept.
    reusable: bool,
    /// The JavaScript time it took: a short run cannot have left much garbage.
    cpu_used: Duration,
}

/// What a finished engine leaves for the next execution.
enum Spare {
    /// Its context, reset.
    Context(Prepared),
    /// Its runtime, for a fresh context.
    Runtime(Runtime),
}

thread_local! {
    /// The context the next execution on this thread starts from.
    static READY: RefCell<Option<Prepared>> = const { RefCell::new(None) };
    /// The last finished engine on this thread, freed at the next [`tidy`].
    static FINISHED: RefCell<Option<Finished>> = const { RefCell::new(None) };
}

/// The most an execution allocates before its first garbage collection.
const GC_THRESHOLD_MAX: usize = 8 << 20;

/// A runtime holding more than this once its context is gone is not kept.
const SPARE_MAX_BYTES: usize = 1 << 20;

/// A context runs at most this many executions; a fresh one bounds whatever a
/// long-lived context could accumulate (interned strings, shapes).
const CONTEXT_USES_MAX: u32 = 1000;

/// After a run of more JavaScript time than this, or every `GC_EVERY` runs,
/// the reset context is collected: the cycles a run leaves behind would
/// otherwise be collected, and paid for, inside a later execution.
const GC_AFTER_CPU: Duration = Duration::from_millis(1);
const GC_EVERY: u32 = 64;

thread_local! {
    /// Fresh contexts made on this thread.
    static CREATED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many fresh contexts this thread has made: executions that ran in a
/// reset context did not add one.
pub fn contexts_created() -> u64 {
    CREATED.with(std::cell::Cell::get)
}

/// Creating a context and freeing it were nine tenths of a small execution
/// (docs/benchmarks.md), so a context is reset and reused when its execution
/// ended cleanly, and everything else happens here, between executions: reset
/// (or free) the engine of the execution that finished last on this thread,
/// and prepare the context the next one starts from. Hosts call it when a
/// worker thread is idle ([`crate::tokio_runtime`]), so none of it is on a
/// request's path; an execution that finds nothing prepared does it first itself.
pub fn tidy() {
    // An error here is met again, and reported, by the next execution.
    let _ = tidy_now();
}

fn tidy_now() -> Result<(), SandboxError> {
    let spare = FINISHED.with(|finished| finished.borrow_mut().take()).and_then(Finished::free);
    if READY.with(|ready| ready.borrow().is_some()) {
        return Ok(());
    }
    let prepared = match spare {
        Some(Spare::Context(prepared)) => prepared,
        Some(Spare::Runtime(runtime)) => prepare(Some(runtime))?,
        None => prepare(None)?,
    };
    READY.with(|ready| *ready.borrow_mut() = Some(prepared));
    Ok(())
}

impl Finished {
    /// Left for the next [`tidy`]; freed now if it hit a limit (`tripped`),
    /// with the heap it may have grown.
    fn set_aside(self, tripped: bool) {
        if tripped {
            return drop(self);
        }
        FINISHED.with(|slot| *slot.borrow_mut() = Some(self));
    }

    /// The context reset for the next execution if it ended cleanly and the
    /// reset leaves nothing of it; otherwise the context freed, and the runtime
    /// kept if it is clean enough.
    fn free(self) -> Option<Spare> {
        let Self { main, mut prepared, reusable, cpu_used } = self;
        drop(main);
        if !reusable || prepared.runtime.is_job_pending() {
            return None;
        }
        prepared.uses += 1;
        if prepared.uses < CONTEXT_USES_MAX && prepared.reset() {
            if cpu_used > GC_AFTER_CPU || prepared.uses % GC_EVERY == 0 {
                prepared.runtime.run_gc();
            }
            return Some(Spare::Context(prepared));
        }
        let Prepared { hooks, context, runtime, .. } = prepared;
        drop((hooks, context));
        runtime.run_gc();
        let size = usize::try_from(runtime.memory_usage().malloc_size).unwrap_or(usize::MAX);
        (size < SPARE_MAX_BYTES).then_some(Spare::Runtime(runtime))
    }
}

impl Prepared {
    /// Forget the last execution (prelude.js `reset`): true if nothing of it
    /// is left for the next one to see.
    fn reset(&self) -> bool {
        self.context.with(|ctx| {
            let Some(keys) = own_key_count(&ctx, &ctx.globals()) else { return false };
            let reset = self.hooks.reset.clone().restore(&ctx).and_then(|reset| reset.call::<_, bool>((keys,)));
            reset.catch(&ctx).unwrap_or(false)
        })
    }
}

/// How many own keys (strings and symbols, as `Reflect.ownKeys`) `object`
/// has, counted without building the array of them: that array was three
/// quarters of a reset, which nearly always only needs to know that no
/// global was added. `None` if QuickJS could not list them (out of memory).
fn own_key_count(ctx: &Ctx<'_>, object: &Object<'_>) -> Option<u32> {
    let (raw_ctx, raw_object) = (ctx.as_raw().as_ptr(), object.as_raw());
    let (mut keys, mut count) = (std::ptr::null_mut(), 0u32);
    let flags = (rquickjs::qjs::JS_GPN_STRING_MASK | rquickjs::qjs::JS_GPN_SYMBOL_MASK) as i32;
    // SAFETY: `object` is a live value of `ctx`; on success QuickJS hands us
    // `count` entries, freed here and nowhere else.
    unsafe {
        if rquickjs::qjs::JS_GetOwnPropertyNames(raw_ctx, &mut keys, &mut count, raw_object, flags) < 0 {
            return None;
        }
        rquickjs::qjs::JS_FreePropertyEnum(raw_ctx, keys, count);
    }
    Some(count)
}

/// A context ready for code, in `runtime` if given (a fresh one otherwise).
/// Its limits and its host state are set when an execution takes it.
fn prepare(runtime: Option<Runtime>) -> Result<Prepared, SandboxError> {
    let internal = |e: rquickjs::Error| SandboxError::Internal { message: e.to_string() };
    keep_heap_top();
    let runtime = match runtime {
        Some(runtime) => runtime,
        None => Runtime::new().map_err(internal)?,
    };
    let context = new_context(&runtime).map_err(internal)?;
    CREATED.with(|created| created.set(created.get() + 1));
    let host = Rc::new(RefCell::new(Host::new(0, 0.0, &Limits::default())));
    let (hooks, object_class) = context.with(|ctx| -> Result<_, SandboxError> {
        let object_class = plain_json::object_class(&ctx).map_err(internal)?;
        let hooks = install_prelude(&ctx, &host, object_class).map_err(|e| SandboxError::Internal { message: e })?;
        let hook = |name: &str| -> Result<Persistent<Function<'static>>, SandboxError> {
            let hook: Function = hooks.get(name).map_err(|e| SandboxError::Internal { message: e.to_string() })?;
            Ok(Persistent::save(&ctx, hook))
        };
        let hooks = Hooks { deliver: hook("deliver")?, finish: hook("finish")?, reset: hook("reset")? };
        // `tools` is built on first use (prelude.js); nearly every execution
        // uses it, and here, ahead of the request, building it costs nothing.
        ctx.globals().get::<_, Value>("tools").map_err(internal)?;
        Ok((hooks, object_class))
    })?;
    Ok(Prepared { hooks, context, runtime, host, uses: 0, object_class })
}

/// glibc gives the top of the heap back to the kernel whenever more than 128 KiB
/// of it is free, and an execution that builds and drops a few MiB (strings
/// growing, JSON text) crosses that mark hundreds of times: a `brk` and fresh
/// zeroed pages each time, a third of W3's time (see docs/benchmarks.md). Keep
/// up to 8 MiB free at the top (1 MiB of slack each time the heap grows) and
/// serve blocks up to 4 MiB from the heap; setting these also stops glibc from
/// moving the thresholds itself. Process-wide, set once: memory an execution
/// frees is reused by later allocations, as the 128 KiB below the mark always was.
fn keep_heap_top() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static TUNED: std::sync::Once = std::sync::Once::new();
        TUNED.call_once(|| {
            // SAFETY: mallopt only sets allocator parameters; it is safe to call at
            // any time, from any thread.
            unsafe {
                libc::mallopt(libc::M_TOP_PAD, 1 << 20);
                libc::mallopt(libc::M_TRIM_THRESHOLD, 8 << 20);
                libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20);
            }
        });
    }
}

pub(crate) struct Engine {
    // Declared first so it drops before the context it lives in.
    /// The code's promise, once [`Engine::begin`] has called it.
    main: Option<Persistent<Promise<'static>>>,
    prepared: Prepared,
    meter: Rc<RefCell<Meter>>,
    limits: Limits,
}

impl Engine {
    /// The prepared context (made now if none is) under the execution's
    /// limits. `relocate_after`: see [`Engine::relocating`].
    pub fn new(
        seed: u64,
        pinned_now: f64,
        limits: &Limits,
        wall_deadline: Instant,
        stop: Stop,
        relocate_after: Option<Duration>,
    ) -> Result<Self, SandboxError> {
        let prepared = match READY.with(|ready| ready.borrow_mut().take()) {
            Some(prepared) => prepared,
            None => {
                tidy_now()?;
                READY.with(|ready| ready.borrow_mut().take()).expect("tidy_now prepares a context")
            }
        };
        *prepared.host.borrow_mut() = Host::new(seed, pinned_now, limits);
        let runtime = &prepared.runtime;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(limits.stack_bytes);
        // QuickJS first collects at 256 KiB, then at 1.5 times what survived:
        // an execution that builds a few MiB of data would collect several
        // times on the way, when reference counts free most of it at its end.
        runtime.set_gc_threshold((limits.memory_bytes / 8).min(GC_THRESHOLD_MAX));
        let meter = Rc::new(RefCell::new(Meter {
            cpu_used: Duration::ZERO,
            running_since: None,
            cpu_limit: limits.cpu,
            wall_deadline,
            wall_limit: limits.wall_clock,
            stop,
            tripped: None,
            relocate_after,
            relocating: false,
        }));
        let (interrupt_meter, interrupt_host) = (meter.clone(), prepared.host.clone());
        let call_bytes = limits.call_bytes;
        runtime.set_interrupt_handler(Some(Box::new(move || {
            let mut meter = interrupt_meter.borrow_mut();
            if interrupt_host.borrow().calls_over {
                meter.tripped.get_or_insert(SandboxError::CallBytesLimit { limit: call_bytes });
            }
            meter.check()
        })));
        Ok(Self { main: None, prepared, meter, limits: limits.clone() })
    }

    /// Call the code's async function: it runs until its first `await`.
    pub fn begin(&mut self, js: &str) -> Result<(), SandboxError> {
        let started = self.meter.borrow_mut().start();
        let called = self.prepared.context.with(|ctx| -> Result<_, SandboxError> {
            let classify = |e| classify(&self.meter, e, &self.limits);
            let main: Function = ctx.eval(js).catch(&ctx).map_err(classify)?;
            let promise: Promise = main.call(()).catch(&ctx).map_err(classify)?;
            Ok(Persistent::save(&ctx, promise))
        });
        self.meter.borrow_mut().stop(started);
        self.main = Some(called?);
        Ok(())
    }

    /// The run went past its `relocate_after` budget and was stopped there
    /// (every error since is that stop's): start it over off the worker.
    pub fn relocating(&self) -> bool {
        self.meter.borrow().relocating
    }
    /// Run queued promise jobs until the code blocks on something.
    pub fn run_jobs(&mut self) -> Result<(), SandboxError> {
        let started = self.meter.borrow_mut().start();
        let result = loop {
            match self.prepared.runtime.execute_pending_job() {
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
        // Calls dropped since the last interrupt check end the run all the same.
        if self.prepared.host.borrow().calls_over {
            let limit = self.limits.call_bytes;
            self.meter.borrow_mut().tripped.get_or_insert(SandboxError::CallBytesLimit { limit });
        }
        if let Some(tripped) = self.meter.borrow().tripped.clone() {
            return Err(tripped);
        }
        result
    }

    pub fn state(&self) -> MainState {
        let started = self.meter.borrow_mut().start();
        let state = self.prepared.context.with(|ctx| {
            let restored = self.main.clone().ok_or(rquickjs::Error::Unknown).and_then(|main| main.restore(&ctx));
            let main = match restored {
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
                            // Plain data has no function, BigInt or Symbol for finish() to refuse.
                            match plain_json::text(&ctx, &value, self.prepared.object_class)? {
                                Plain::Text(json) => Ok(json),
                                Plain::Undefined => Ok("null".to_owned()),
                                Plain::No => {
                                    self.prepared.hooks.finish.clone().restore(&ctx)?.call::<_, String>((value,))
                                }
                            }
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
        let mut host = self.prepared.host.borrow_mut();
        host.issued_bytes = 0;
        std::mem::take(&mut host.issued)
    }

    pub fn set_pinned_now(&mut self, millis: f64) {
        self.prepared.host.borrow_mut().pinned_now = millis;
    }

    /// Settle the promise of `step`; the code continues at the next `run_jobs`.
    pub fn deliver(&mut self, step: u32, delivery: Delivery) -> Result<(), SandboxError> {
        let (kind, payload) = match delivery {
            Delivery::Json(json) => (0, json),
            Delivery::Error(message) => (1, message),
            Delivery::Declined(message) => (2, message),
        };
        let started = self.meter.borrow_mut().start();
        let delivered = self.prepared.context.with(|ctx| {
            let result = self
                .prepared
                .hooks
                .deliver
                .clone()
                .restore(&ctx)
                .and_then(|deliver| deliver.call::<_, ()>((step, kind, payload)));
            result.catch(&ctx).map_err(|e| classify(&self.meter, e, &self.limits))
        });
        self.meter.borrow_mut().stop(started);
        delivered
    }

    /// The console output. The engine is reset or freed at the next [`tidy`]
    /// (its context kept if it ended cleanly: `reusable`), so the answer need
    /// not wait for it.
    pub fn into_logs(self, reusable: bool) -> Vec<String> {
        let logs = self.prepared.host.borrow_mut().logs.take_lines();
        let Self { main, prepared, meter, .. } = self;
        prepared.runtime.set_interrupt_handler(None);
        let (tripped, cpu_used) = {
            let meter = meter.borrow();
            (meter.tripped.is_some(), meter.cpu_used)
        };
        Finished { main, prepared, reusable: reusable && !tripped, cpu_used }.set_aside(tripped);
        logs
    }
}

fn install_prelude<'js>(ctx: &Ctx<'js>, host: &Rc<RefCell<Host>>, object_class: u32) -> Result<Object<'js>, String> {
    let fail = |e: rquickjs::Error| format!("installing the sandbox globals failed: {e}");
    let json: Object = ctx.globals().get("JSON").map_err(fail)?;
    json.set("stringify", plain_json::stringify(ctx, object_class).map_err(fail)?).map_err(fail)?;
    let calls = host.clone();
    let host_call = Function::new(ctx.clone(), move |path: String, args: Opt<Option<String>>| -> u32 {
        calls.borrow_mut().issue(path, args.0.flatten())
    })
    .map_err(fail)?;
    let logs = host.clone();
    let host_log = Function::new(ctx.clone(), move |level: String, line: String| {
        logs.borrow_mut().logs.push(&level, &line);
    })
    .map_err(fail)?;
    let clock = host.clone();
    let host_now = Function::new(ctx.clone(), move || clock.borrow().pinned_now).map_err(fail)?;
    let random = host.clone();
    let host_random = Function::new(ctx.clone(), move || random.borrow_mut().random.next_f64()).map_err(fail)?;
    let bytecode = bytecode()?;
    let host_load_tools = Function::new(ctx.clone(), move |ctx: Ctx<'js>| -> rquickjs::Result<Function<'js>> {
        load(&ctx, &bytecode.tools, "build")
    })
    .map_err(fail)?;
    let host_parse = json_parse::host_parse(ctx).map_err(fail)?;
    let prelude: Function = load(ctx, &bytecode.prelude, "install").map_err(fail)?;
    prelude.call((host_call, host_log, host_now, host_random, host_load_tools, host_parse)).map_err(fail)
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
