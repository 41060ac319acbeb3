//! The structure the code promises a newcomer, checked: `docs/architecture.md`
//! names only files, types and functions that exist, and the service,
//! sandbox and catalog crates keep their rooms small (no function over 100
//! lines, no file over 600). Markdown is read with pulldown-cmark, Rust with
//! syn, so a change of formatting cannot fool either check.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::Visit;

const MAX_FUNCTION_LINES: usize = 100;
const MAX_FILE_LINES: usize = 600;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the tests crate is in the workspace").to_path_buf()
}

/// Every `.rs` file under `dir`, `target` and `node_modules` left out.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if path.is_dir() && !matches!(name, "target" | "node_modules" | ".git" | "cdk.out") {
            rust_files(&path, found);
        } else if name.ends_with(".rs") {
            found.push(path);
        }
    }
}

/// Every Rust file of the workspace, by its path from the root.
fn workspace_files(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for dir in ["shared", "functions", "cli", "tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.iter().map(|f| f.strip_prefix(root).expect("under the root").display().to_string()).collect()
}

/// A path from the root, or the tail of one (a file named beside its crate, as `tests/x.rs`).
fn known_file(files: &[String], code: &str) -> bool {
    files.iter().any(|f| f == code || f.ends_with(&format!("/{code}")))
}

fn parse(path: &Path) -> syn::File {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// The names each type (struct, enum, trait) answers to as `Type::name`:
/// its methods and associated functions in any `impl`, a trait's own
/// functions, an enum's variants, a struct's fields.
#[derive(Default)]
struct Names {
    of_type: HashMap<String, HashSet<String>>,
}

impl Names {
    fn add(&mut self, ty: String, name: String) {
        self.of_type.entry(ty).or_default().insert(name);
    }
}

fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(path) => path.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if let Some(ty) = type_name(&item.self_ty) {
            for inner in &item.items {
                if let syn::ImplItem::Fn(f) = inner {
                    self.add(ty.clone(), f.sig.ident.to_string());
                }
            }
        }
        syn::visit::visit_item_impl(self, item);
    }

    fn visit_item_trait(&mut self, item: &'ast syn::ItemTrait) {
        for inner in &item.items {
            if let syn::TraitItem::Fn(f) = inner {
                self.add(item.ident.to_string(), f.sig.ident.to_string());
            }
        }
        syn::visit::visit_item_trait(self, item);
    }

    fn visit_item_struct(&mut self, item: &'ast syn::ItemStruct) {
        let ty = item.ident.to_string();
        self.of_type.entry(ty.clone()).or_default();
        for field in &item.fields {
            if let Some(name) = &field.ident {
                self.add(ty.clone(), name.to_string());
            }
        }
        syn::visit::visit_item_struct(self, item);
    }

    fn visit_item_enum(&mut self, item: &'ast syn::ItemEnum) {
        for variant in &item.variants {
            self.add(item.ident.to_string(), variant.ident.to_string());
        }
        syn::visit::visit_item_enum(self, item);
    }
}

/// The inline code of a Markdown file.
fn code_spans(markdown: &str) -> Vec<String> {
    pulldown_cmark::Parser::new(markdown)
        .filter_map(|event| match event {
            pulldown_cmark::Event::Code(code) => Some(code.to_string()),
            _ => None,
        })
        .collect()
}

/// `Type::name` with both parts plain identifiers (not `a::b::c`, not a call).
fn type_and_name(code: &str) -> Option<(&str, &str)> {
    let (ty, name) = code.split_once("::")?;
    let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let is_type = ty.chars().next().is_some_and(|c| c.is_ascii_uppercase());
    (ident(ty) && ident(name) && is_type).then_some((ty, name))
}

/// What a page's inline code names that the code does not have: a `.rs`
/// file, or `Type::name` (a method, variant or field) of a type of ours. In
/// the architecture map every file is named from the root and every
/// `Type::name` must be ours.
fn missing_names(page: &str, names: &Names, files: &[String], strict: bool) -> Vec<String> {
    let mut missing = Vec::new();
    for code in code_spans(page) {
        if code.ends_with(".rs") && !code.contains(' ') {
            // The map names every file from the root; other pages may name one beside its crate.
            let known = if strict { files.contains(&code) } else { known_file(files, &code) };
            if !known {
                missing.push(format!("file {code}"));
            }
        } else if let Some((ty, name)) = type_and_name(&code) {
            match names.of_type.get(ty) {
                Some(known) if known.contains(name) => {}
                None if !strict => {}
                _ => missing.push(format!("{ty}::{name}")),
            }
        }
    }
    missing
}

#[test]
fn the_docs_name_what_exists() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["shared", "functions", "cli", "tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut names = Names::default();
    for file in &files {
        names.visit_file(&parse(file));
    }
    let relative = workspace_files(&root);
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    assert!(pages.len() > 10, "the docs are where they were: {}", pages.len());
    let mut missing = Vec::new();
    for page in &pages {
        let shown = page.strip_prefix(&root).expect("under the root").display().to_string();
        let text = std::fs::read_to_string(page).expect("readable");
        let strict = shown == "docs/architecture.md";
        missing.extend(missing_names(&text, &names, &relative, strict).into_iter().map(|m| format!("{shown}: {m}")));
    }
    assert!(missing.is_empty(), "the docs name what the code does not have: {missing:#?}");
}

/// Every function with a body, and the lines it spans.
struct Functions {
    found: Vec<(String, usize)>,
}

impl Functions {
    fn add(&mut self, name: &syn::Ident, span: Span) {
        self.found.push((name.to_string(), span.end().line - span.start().line + 1));
    }
}

impl<'ast> Visit<'ast> for Functions {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.add(&f.sig.ident, f.span());
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.add(&f.sig.ident, f.span());
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if f.default.is_some() {
            self.add(&f.sig.ident, f.span());
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[test]
fn service_sandbox_and_catalog_keep_functions_and_files_small() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["shared/service/src", "shared/sandbox/src", "shared/catalog/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "the crates' sources are where they were: {}", files.len());
    let mut over = Vec::new();
    for file in &files {
        let shown = file.strip_prefix(&root).expect("under the root").display().to_string();
        let lines = std::fs::read_to_string(file).expect("readable").lines().count();
        if lines > MAX_FILE_LINES {
            over.push(format!("{shown}: {lines} lines"));
        }
        let mut functions = Functions { found: Vec::new() };
        functions.visit_file(&parse(file));
        for (name, lines) in functions.found {
            if lines > MAX_FUNCTION_LINES {
                over.push(format!("{shown}: fn {name} is {lines} lines"));
            }
        }
    }
    assert!(
        over.is_empty(),
        "split these by what they do (at most {MAX_FUNCTION_LINES} lines a function, {MAX_FILE_LINES} a file): \
         {over:#?}"
    );
}

/// The first segment of every path a file names (`http::Request` -> `http`).
struct PathRoots {
    found: HashSet<String>,
}

impl<'ast> Visit<'ast> for PathRoots {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        if let Some(first) = path.segments.first() {
            self.found.insert(first.ident.to_string());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_use_tree(&mut self, tree: &'ast syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                self.found.insert(path.ident.to_string());
            }
            syn::UseTree::Name(name) => {
                self.found.insert(name.ident.to_string());
            }
            _ => {}
        }
        syn::visit::visit_use_tree(self, tree);
    }
}

#[test]
fn the_application_knows_no_http() {
    let root = root();
    let mut files = Vec::new();
    rust_files(&root.join("shared/service/src/application"), &mut files);
    assert!(files.len() > 10, "the application's files are where they were: {}", files.len());
    let mut leaks = Vec::new();
    for file in &files {
        let mut roots = PathRoots { found: HashSet::new() };
        roots.visit_file(&parse(file));
        for edge in ["http", "http_body_util", "rmcp", "http_edge"] {
            if roots.found.contains(edge) {
                leaks.push(format!("{} uses {edge}", file.strip_prefix(&root).expect("under the root").display()));
            }
        }
    }
    assert!(leaks.is_empty(), "the HTTP edge belongs in shared/service/src/http_edge: {leaks:#?}");
}
