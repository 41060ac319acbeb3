//! From what the model sent to what QuickJS runs: unwrap a fenced code block,
//! strip TypeScript types, and wrap the code as the body of an async function
//! so `return` and top-level `await` work.
//!
//! Types are stripped with oxc: a maintained, fast Rust toolchain (parser,
//! semantic analysis, transformer, codegen) whose TypeScript support tracks the
//! language closely, and which is far lighter than swc for this one job.

use std::path::Path;

use oxc::allocator::Allocator;
use oxc::codegen::Codegen;
use oxc::parser::{ParseOptions, Parser};
use oxc::semantic::SemanticBuilder;
use oxc::span::{GetSpan, SourceType};
use oxc::transformer::{TransformOptions, Transformer};

/// A syntax error, positioned in the code as the user sent it (1-based).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("syntax error at line {line}, column {column}: {message}")]
pub struct SyntaxError {
    pub message: String,
    pub line: u32,
    pub column: u32,
}

/// The code without a surrounding Markdown fence, and how many lines the fence
/// opener took (so positions can be reported in the original).
pub(crate) fn unfence(code: &str) -> (&str, u32) {
    let trimmed = code.trim();
    let Some(rest) = trimmed.strip_prefix("```") else { return (code, 0) };
    let Some(body_start) = rest.find('\n') else { return (code, 0) };
    let body = &rest[body_start + 1..];
    let Some(body) = body.trim_end().strip_suffix("```").map(str::trim_end) else { return (code, 0) };
    let leading = code[..code.len() - code.trim_start().len()].matches('\n').count() as u32;
    (body, leading + 1)
}

const PREFIX: &str = "(async function () {\n";
const SUFFIX: &str = "\n})";

/// Check the code against the size limits, then compile it.
pub(crate) fn prepare(code: &str, limits: &crate::Limits) -> Result<String, crate::SandboxError> {
    use crate::SandboxError;
    if code.len() > limits.code_bytes {
        return Err(SandboxError::CodeTooLarge { size: code.len(), limit: limits.code_bytes });
    }
    // Real code never nests brackets this deep; refuse it before parsing.
    let mut depth = 0usize;
    for byte in code.bytes() {
        match byte {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > limits.nesting_depth {
                    return Err(SandboxError::TooDeep { limit: limits.nesting_depth });
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    // oxc recurses once per nesting level and has no depth guard of its own, so
    // it runs on a stack sized for the worst case this much code can nest (one
    // level per byte, ~2 KiB a level unoptimised); untouched pages cost nothing.
    let stack = (64 << 10) + code.len() * 2048;
    Ok(stacker::maybe_grow(stack, stack, || compile(code))?)
}

/// JavaScript that evaluates to the async function holding the user's code.
pub(crate) fn compile(code: &str) -> Result<String, SyntaxError> {
    let (body, fence_lines) = unfence(code);
    let wrapped = format!("{PREFIX}{body}{SUFFIX}");
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, &wrapped, SourceType::ts().with_script(true))
        .with_options(ParseOptions { allow_return_outside_function: false, ..ParseOptions::default() })
        .parse();
    if let Some(error) = parsed.diagnostics.first() {
        let offset = error.labels.first().map_or(0, |l| l.offset() as usize);
        return Err(position(&wrapped, offset, fence_lines, error.message.to_string()));
    }
    let mut program = parsed.program;
    // The code must stay inside the function it is wrapped in: a statement
    // after it (`}); let x = 1; (async function () {`) would declare a global
    // that outlives the execution in the reused context.
    if let Some(outside) = program.body.get(1) {
        let offset = outside.span().start as usize;
        return Err(position(&wrapped, offset, fence_lines, "unexpected `}` that closes the code's function".into()));
    }
    let scoping = SemanticBuilder::new().with_enum_eval(true).build(&program).semantic.into_scoping();
    let transformed = Transformer::new(&allocator, Path::new("code.ts"), &TransformOptions::default())
        .build_with_scoping(scoping, &mut program);
    if let Some(error) = transformed.diagnostics.first() {
        let offset = error.labels.first().map_or(0, |l| l.offset() as usize);
        return Err(position(&wrapped, offset, fence_lines, error.message.to_string()));
    }
    // A second semantic pass, for what the TypeScript pass left: only worth it with a `let` about.
    if body.contains("let") {
        crate::let_as_var::lower(&allocator, &mut program);
    }
    Ok(Codegen::new().build(&program).code)
}

/// Line and column of `offset` in `wrapped`, translated back to the user's code.
fn position(wrapped: &str, offset: usize, fence_lines: u32, message: String) -> SyntaxError {
    let offset = offset.min(wrapped.len());
    let before = &wrapped[..offset];
    let line_in_wrapped = before.matches('\n').count() as u32; // 0-based; line 0 is the wrapper
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = wrapped[line_start..offset].chars().count() as u32 + 1;
    let line = line_in_wrapped.max(1) + fence_lines;
    SyntaxError { message, line, column }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_unwrapped() {
        let cases = [
            ("return 1", ("return 1", 0)),
            ("```js\nreturn 1\n```", ("return 1", 1)),
            ("```typescript\nconst a: number = 1;\nreturn a;\n```\n", ("const a: number = 1;\nreturn a;", 1)),
            ("\n\n```\nreturn 2\n```", ("return 2", 3)),
            ("```js return 1```", ("```js return 1```", 0)),
        ];
        for (input, expected) in cases {
            assert_eq!(unfence(input), expected, "{input:?}");
        }
    }

    #[test]
    fn typescript_is_stripped() {
        let js = compile(
            "interface P { x: number }\nconst p: P = { x: 1 } as P;\nconst id = <T,>(v: T): T => v;\nenum E { A = 2 }\nreturn id<number>(p.x) + E.A;",
        )
        .unwrap();
        assert!(!js.contains("interface") && !js.contains(": P"), "{js}");
    }

    #[test]
    fn syntax_errors_point_into_the_users_code() {
        let cases = [
            ("return 1 +;", 1, 11),
            ("const a = 1;\nconst b = ;\nreturn b", 2, 11),
            ("```js\nlet x = 1;\nlet y = ;\n```", 3, 9),
            // Closing the wrapper to declare a global is refused where the code steps outside.
            ("return 1 }); let x = 1; (async function () {", 1, 14),
        ];
        for (code, line, column) in cases {
            let error = compile(code).unwrap_err();
            assert_eq!((error.line, error.column), (line, column), "{code:?}: {error}");
        }
    }
}
