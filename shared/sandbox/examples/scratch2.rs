use std::time::Instant;
use rquickjs::context::intrinsic::*;
use rquickjs::module::WriteOptions;
use rquickjs::{Function, Module};
fn ctx(rt: &rquickjs::Runtime) -> rquickjs::Context {
    rquickjs::Context::builder().with::<Date>().with::<Eval>().with::<RegExpCompiler>().with::<RegExp>().with::<Json>().with::<Proxy>().with::<MapSet>().with::<Promise>().build(rt).unwrap()
}
fn bytecode(src: &str) -> Vec<u8> {
    let rt = rquickjs::Runtime::new().unwrap();
    let c = ctx(&rt);
    c.with(|ctx| Module::declare(ctx, "p", src).unwrap().write(WriteOptions { strip_source: true, strip_debug: true, ..Default::default() }).unwrap())
}
fn main() {
    let n = 5000u32;
    let trivial = bytecode("export function install(a, b, c, d, e) { return {}; }");
    let src = include_str!("../src/prelude.js");
    let lines: Vec<&str> = src.lines().collect();
    let cut = |a: usize, b: usize| -> String { lines.iter().enumerate().filter(|(i, _)| *i + 1 < a || *i + 1 >= b).map(|(_, l)| *l).collect::<Vec<_>>().join("\n") };
    let variants = [("current", src.to_string()), ("no builders", cut(41, 56).replace("lazy(\"tools\", () => {", "lazy(\"tools\", () => { return 1;")), ("no tools body", cut(62, 112))];
    let full = bytecode(src);
    let rt0 = rquickjs::Runtime::new().unwrap();
    for (name, v) in &variants {
        let bc = bytecode(v);
        let mut total = std::time::Duration::ZERO;
        for _ in 0..n {
            let c = ctx(&rt0);
            let t = Instant::now();
            c.with(|ctx| {
                let m = unsafe { Module::load(ctx.clone(), &bc) }.unwrap();
                let (m, p) = m.eval().unwrap();
                p.finish::<()>().unwrap();
                let f: Function = m.get("install").unwrap();
                let h = Function::new(ctx.clone(), || 1).unwrap();
                let _: rquickjs::Object = f.call((h.clone(), h.clone(), h, 1u32, 2u32)).unwrap();
            });
            total += t.elapsed();
        }
        println!("{name}: {:?}", total / n);
    }
    let rt = rquickjs::Runtime::new().unwrap();
    for (name, bc, call) in [("trivial load", &trivial, false), ("full load", &full, false), ("full load+install", &full, true)] {
        let mut total = std::time::Duration::ZERO;
        for _ in 0..n {
            let c = ctx(&rt);
            let t = Instant::now();
            c.with(|ctx| {
                let m = unsafe { Module::load(ctx.clone(), bc) }.unwrap();
                let (m, p) = m.eval().unwrap();
                p.finish::<()>().unwrap();
                let f: Function = m.get("install").unwrap();
                if call {
                    let h = Function::new(ctx.clone(), || 1).unwrap();
                    let _: rquickjs::Object = f.call((h.clone(), h.clone(), h, 1u32, 2u32)).unwrap();
                }
            });
            total += t.elapsed();
        }
        println!("{name}: {:?}", total / n);
    }
}
