// Installed into every fresh context before the user's code runs (compiled to
// bytecode once per process). install() receives the host functions, keeps them
// in its closure (the code never sees them) and returns the two hooks the engine
// uses: deliver() and finish(). `console` and `tools` are built on first use,
// which for `tools` is when the engine prepares the context, ahead of any
// request; `console`, which few executions use, only if the code touches it.
export function install(hostCall, hostLog, hostNow, hostRandom, hostLoadTools) {
  const g = globalThis;
  const RealDate = Date;
  const RealError = Error;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const defineProperty = Object.defineProperty;

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
    return console;
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
  lazy("tools", () => hostLoadTools()(hostCall, waiters, intrinsics));

  // Made on first use: most executions never see a decline.
  let Declined;
  const declined = (message) => {
    if (!Declined) {
      Declined = class ApprovalDeclinedError extends RealError {};
      Declined.prototype.name = "ApprovalDeclinedError";
    }
    return new Declined(message);
  };

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

  return { deliver, finish };
}
