// Installed into every fresh context before the user's code runs (compiled to
// bytecode once per process). install() receives the host functions, keeps them
// in its closure (the code never sees them), locks the context's built-ins down
// and returns the hooks the engine uses: deliver(), finish() and reset().
// `console` and `tools` are built on first use, which for `tools` is when the
// engine prepares the context, ahead of any request; `console`, which few
// executions use, only if the code touches it.
//
// A context runs many executions one after another (engine.rs), so nothing one
// leaves may reach the next: every object reachable from the globals or from
// syntax is frozen here (as SES's lockdown does), the globals the context
// starts with can be neither replaced nor deleted, and reset() removes the
// globals an execution added, or says the context cannot be reused.
export function install(hostCall, hostLog, hostNow, hostRandom, hostLoadTools, hostParse) {
  const g = globalThis;
  const RealDate = Date;
  const RealError = Error;
  // The engine's own JSON.stringify (engine/plain_json.rs), already installed.
  const stringify = JSON.stringify;
  const quickjsParse = JSON.parse;
  const { defineProperty, freeze, getOwnPropertyDescriptors, getPrototypeOf, isExtensible, isFrozen } = Object;
  const { ownKeys, getOwnPropertyDescriptor, deleteProperty } = Reflect;

  // Date: the pinned clock of the journal.
  function PinnedDate(...args) {
    if (!new.target) return new RealDate(hostNow()).toString();
    return args.length === 0 ? new RealDate(hostNow()) : new RealDate(...args);
  }
  PinnedDate.prototype = RealDate.prototype;
  PinnedDate.now = hostNow;
  PinnedDate.parse = RealDate.parse;
  PinnedDate.UTC = RealDate.UTC;
  defineProperty(RealDate.prototype, "constructor", { value: PinnedDate, writable: true, configurable: true });
  g.Date = PinnedDate;

  // JSON.parse: a string without a reviver is read by the host
  // (engine/json_parse.rs), which answers undefined for any text it leaves to
  // QuickJS's own (so errors are QuickJS's SyntaxErrors); a reviver, or a
  // value that is not a string, goes to QuickJS's own as well.
  const parse = {
    parse(text, reviver) {
      if (reviver === undefined && typeof text === "string") {
        const value = hostParse(text);
        if (value !== undefined) return value;
      }
      return quickjsParse(text, reviver);
    },
  }.parse;
  JSON.parse = parse;

  // Math.random: the seeded generator of the journal.
  Math.random = hostRandom;

  const lazy = (name, build) => {
    let value;
    defineProperty(g, name, {
      get: () => (value === undefined ? (value = build()) : value),
      set: () => {},
      enumerable: false,
      configurable: false,
    });
  };

  // console.* into the execution's logs.
  lazy("console", () => {
    const show = (v) => {
      if (typeof v === "string") return v;
      if (v instanceof RealError) return v.name + ": " + v.message;
      try {
        const s = stringify(v);
        return s === undefined ? String(v) : s;
      } catch (_) {
        return String(v);
      }
    };
    const console = {};
    for (const level of ["log", "info", "warn", "error", "debug"]) {
      console[level] = (...args) => { hostLog(level, args.map(show).join(" ")); };
    }
    return harden([console], true)[0];
  });

  // tools: built from its own module on first use (tools.js).
  const waiters = new Map();
  const intrinsics = {
    stringify,
    PromiseCtor: Promise,
    ProxyCtor: Proxy,
    MapCtor: Map,
    WeakMapCtor: WeakMap,
    toPrimitive: Symbol.toPrimitive,
  };
  let forgetTools = () => {};
  lazy("tools", () => {
    const [root, forget] = hostLoadTools()(hostCall, waiters, intrinsics);
    forgetTools = forget;
    return root;
  });

  const Declined = class ApprovalDeclinedError extends RealError {};
  Declined.prototype.name = "ApprovalDeclinedError";
  const declined = (message) => new Declined(message);

  // kind: 0 = value (JSON), 1 = Error (message), 2 = declined (message).
  const deliver = (step, kind, payload) => {
    const waiter = waiters.get(step);
    waiters.delete(step);
    if (kind === 0) waiter[0](parse(payload));
    else waiter[1](kind === 2 ? declined(payload) : new RealError(payload));
  };

  const finish = (value) => {
    if (value === undefined) return "null";
    const out = stringify(value, (key, v) => {
      const at = key === "" ? "" : " at key \"" + key + "\"";
      if (typeof v === "function") throw new TypeError("the result contains a function" + at + "; return plain data");
      if (typeof v === "bigint") throw new TypeError("the result contains a BigInt" + at + "; convert it with String() or Number()");
      if (typeof v === "symbol") throw new TypeError("the result contains a Symbol" + at + "; return plain data");
      return v;
    });
    return out === undefined ? "null" : out;
  };

  // Error's two accessors are the only state a frozen built-in would still
  // hold (the context's stack-trace limit and formatter, any value, a function
  // even; and QuickJS's limit setter leaks the value it replaces, which its
  // runtime's free then aborts on): fixed at their defaults instead.
  defineProperty(RealError, "stackTraceLimit", { value: RealError.stackTraceLimit, writable: false, configurable: false });
  defineProperty(RealError, "prepareStackTrace", { value: undefined, writable: false, configurable: false });

  // Objects that syntax reaches without a global naming them.
  const hidden = [
    async function () {}, function* () {}, async function* () {}, RealDate, Declined,
    [][Symbol.iterator](), new Map().entries(), new Set().values(), ""[Symbol.iterator](), "a".matchAll(/a/g),
  ];
  if (typeof Iterator === "function" && Iterator.from && Iterator.prototype.map) {
    hidden.push(Iterator.from({ next: () => ({ done: true }) }), [].values().map((x) => x));
  }
  harden([g, ...hidden]);
  // The globals stay, unreplaceable; what an execution adds, reset() removes.
  for (const key of ownKeys(g)) {
    const d = getOwnPropertyDescriptor(g, key);
    if (d.configurable) defineProperty(g, key, "value" in d ? { writable: false, configurable: false } : { configurable: false });
  }
  const globals = new Set(ownKeys(g));
  const globalsProto = getPrototypeOf(g);

  // After an execution: forget its waiters and tools, delete the globals it
  // added. False if the context cannot start the next one clean. The host
  // counts the global's own keys (`keyCount`): the globals cannot be
  // deleted, so as many as at the start means none was added.
  const reset = (keyCount) => {
    waiters.clear();
    forgetTools();
    if (getPrototypeOf(g) !== globalsProto || !isExtensible(g)) return false;
    if (keyCount === globals.size) return true;
    const keys = ownKeys(g);
    if (keys.length > globals.size + 1000) return false;
    for (const key of keys) {
      if (!globals.has(key) && !deleteProperty(g, key)) return false;
    }
    return true;
  };

  return { deliver, finish, reset };

  // Freeze every object reachable from `roots` (properties, accessors,
  // prototypes), the global object itself left extensible; for an object
  // built after the lock-down (`console`), up to the frozen built-ins. A writable built-in
  // property that code commonly sets on its own objects (`this.name = ...` in
  // an Error subclass, `o.toString = ...`) becomes an accessor whose setter
  // defines the property on the object assigned to, so freezing does not
  // break those assignments (SES calls this the override mistake).
  function harden(roots, afterLockdown = false) {
    const seen = new Set();
    const stack = [...roots];
    const push = (v) => {
      if ((typeof v === "object" && v !== null) || typeof v === "function") stack.push(v);
    };
    while (stack.length > 0) {
      const o = stack.pop();
      if (seen.has(o) || (afterLockdown && isFrozen(o))) continue;
      seen.add(o);
      const descriptors = getOwnPropertyDescriptors(o);
      for (const key of ownKeys(descriptors)) {
        const d = descriptors[key];
        if (o !== g && d.writable && d.configurable && OVERRIDABLE.has(key)) tame(o, key, d);
        push(d.value);
        push(d.get);
        push(d.set);
      }
      push(getPrototypeOf(o));
      if (o !== g) freeze(o);
    }
    return roots;
  }

  function tame(o, key, d) {
    const value = d.value;
    defineProperty(o, key, {
      get() { return value; },
      set(v) {
        if (this === o) throw new TypeError("Cannot assign to read only property '" + String(key) + "' of a built-in");
        defineProperty(this, key, { value: v, writable: true, enumerable: true, configurable: true });
      },
      enumerable: d.enumerable,
      configurable: false,
    });
  }
}

const OVERRIDABLE = new Set(["constructor", "toString", "toLocaleString", "valueOf", "toJSON", "name", "message"]);
