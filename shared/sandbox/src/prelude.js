// Installed into every fresh context before the user's code runs. It receives
// the host functions, keeps them in this closure (the code never sees them) and
// returns the two hooks the engine uses: deliver() and finish().
(function (hostCall, hostLog, hostNow, seedHi, seedLo) {
  "use strict";
  const g = globalThis;
  const RealDate = Date;
  const RealError = Error;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const ProxyCtor = Proxy;
  const MapCtor = Map;
  const PromiseCtor = Promise;
  const toPrimitive = Symbol.toPrimitive;

  // Sources of non-determinism and host reach that code mode does not offer.
  for (const name of ["WeakRef", "FinalizationRegistry", "SharedArrayBuffer", "Atomics"]) {
    delete g[name];
  }

  // Date: the pinned clock of the journal.
  function PinnedDate(...args) {
    if (!new.target) return new RealDate(hostNow()).toString();
    return args.length === 0 ? new RealDate(hostNow()) : new RealDate(...args);
  }
  PinnedDate.prototype = RealDate.prototype;
  PinnedDate.now = () => hostNow();
  PinnedDate.parse = RealDate.parse;
  PinnedDate.UTC = RealDate.UTC;
  Object.defineProperty(RealDate.prototype, "constructor", { value: PinnedDate, writable: true, configurable: true });
  g.Date = PinnedDate;

  // Math.random: sfc32 seeded from the snapshot's seed.
  let a = seedHi >>> 0, b = seedLo >>> 0, c = (seedHi ^ 0x9e3779b9) >>> 0, d = (seedLo ^ 0x85ebca6b) >>> 0;
  const next = () => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    let t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    t = (t + d) | 0;
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  for (let i = 0; i < 12; i++) next();
  Math.random = next;

  // console.* into the execution's logs.
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
  g.console = console;

  // tools: a proxy that turns tools.a.b.c(args) into a host call of "a.b.c".
  const waiters = new MapCtor();
  const HINT = "tools: find tools with `await tools.search({ query })`, read a tool's TypeScript types with " +
    "`await tools.describe.tool({ path })`, then call it as `await tools.<path>(args)`";
  const call = (path, args) => new PromiseCtor((resolve, reject) => {
    let json;
    try {
      json = args === undefined ? undefined : stringify(args);
    } catch (e) {
      throw new TypeError("arguments of tools." + path + " must be JSON data: " + e.message);
    }
    waiters.set(hostCall(path, json), [resolve, reject]);
  });
  const node = (path) => new ProxyCtor(() => {}, {
    get(_, prop) {
      if (typeof prop === "symbol") return prop === toPrimitive ? () => HINT : undefined;
      if (prop === "then") return undefined;
      if (prop === "toString" || prop === "toJSON") return () => HINT;
      return node(path === "" ? prop : path + "." + prop);
    },
    apply(_, __, args) {
      if (path === "") throw new TypeError("tools is not a function. " + HINT);
      return call(path, args[0]);
    },
    has: () => false,
    set: () => false,
    defineProperty: () => false,
    deleteProperty: () => false,
    ownKeys: () => (path === "" ? ["search", "describe"] : []),
    getOwnPropertyDescriptor: (_, prop) =>
      path === "" && (prop === "search" || prop === "describe")
        ? { value: node(prop), writable: false, enumerable: true, configurable: true }
        : undefined,
    getPrototypeOf: () => null,
  });
  Object.defineProperty(g, "tools", { value: node(""), writable: false, enumerable: false, configurable: false });

  class ApprovalDeclinedError extends RealError {}
  ApprovalDeclinedError.prototype.name = "ApprovalDeclinedError";

  // kind: 0 = value (JSON), 1 = Error (message), 2 = declined (message).
  const deliver = (step, kind, payload) => {
    const waiter = waiters.get(step);
    waiters.delete(step);
    if (kind === 0) waiter[0](parse(payload));
    else waiter[1](kind === 2 ? new ApprovalDeclinedError(payload) : new RealError(payload));
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
})
