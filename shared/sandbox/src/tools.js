// The `tools` global: a proxy that turns tools.a.b.c(args) into a host call of
// "a.b.c". Loaded from bytecode the first time code touches `tools`; the
// built-ins it uses were captured by the prelude before any user code ran.
// Returns the root and forget(), which drops the nodes made since (between
// executions). No trap lets code change a node, so nodes carry nothing from
// one execution to the next.
export function build(hostCall, waiters, { stringify, PromiseCtor, ProxyCtor, MapCtor, WeakMapCtor, toPrimitive }) {
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
  // One handler for every node; a node's path is looked up by its proxy target.
  const paths = new WeakMapCtor();
  const nodes = new MapCtor();
  const node = (path) => {
    let proxy = nodes.get(path);
    if (proxy === undefined) {
      const target = () => {};
      paths.set(target, path);
      proxy = new ProxyCtor(target, handler);
      nodes.set(path, proxy);
    }
    return proxy;
  };
  const handler = {
    get(target, prop) {
      if (typeof prop === "symbol") return prop === toPrimitive ? () => HINT : undefined;
      if (prop === "then") return undefined;
      if (prop === "toString" || prop === "toJSON") return () => HINT;
      const path = paths.get(target);
      return node(path === "" ? prop : path + "." + prop);
    },
    apply(target, _, args) {
      const path = paths.get(target);
      if (path === "") throw new TypeError("tools is not a function. " + HINT);
      return call(path, args[0]);
    },
    has: () => false,
    set: () => false,
    defineProperty: () => false,
    deleteProperty: () => false,
    preventExtensions: () => false,
    setPrototypeOf: () => false,
    ownKeys: (target) => (paths.get(target) === "" ? ["search", "describe"] : []),
    getOwnPropertyDescriptor: (target, prop) =>
      paths.get(target) === "" && (prop === "search" || prop === "describe")
        ? { value: node(prop), writable: false, enumerable: true, configurable: true }
        : undefined,
    getPrototypeOf: () => null,
  };
  const root = node("");
  const forget = () => {
    nodes.clear();
    nodes.set("", root);
  };
  return [root, forget];
}
