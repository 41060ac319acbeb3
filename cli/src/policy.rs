//! `executor policy`: a sources file's Cedar policies, tried without serving.
//! `schema` prints the schema they are validated against; `check` asks the
//! policy about one call, as `execute` would before making it, and prints
//! what it decided and which policies made the decision.
//!
//! The catalog is connected as `executor serve` connects it (documents read,
//! MCP tools listed, the policies validated), but no tool is called and no
//! store is opened: the owner's grants ("Always allow") are not read, so the
//! answer is the policy's alone. Per-owner OAuth sources need the store's
//! token key, so here they are unavailable and their tools cannot be checked.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Subcommand;
use executor_catalog::{Catalog, CatalogConfig, CatalogError, ConfigError};
use executor_core::{Principal, PrincipalError, ToolkitName, ToolkitNameError};
use executor_sandbox::{Allowance, CallCounts, Policy, PolicyCall, Tools};
use serde_json::{Value, json};

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("no sources file: pass --config FILE or set EXECUTOR_CONFIG (the file `executor serve` uses)")]
    NoConfig,
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A Cedar set with a mistake: its message starts `<file>:<line>:`.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("invalid --owner: {0}")]
    Owner(#[from] PrincipalError),
    #[error("invalid --toolkit: {0}")]
    ToolkitName(#[from] ToolkitNameError),
    #[error(
        "invalid --args: {0}; give the call's arguments as one JSON object, e.g. --args '{{\"owner\": \"acme\", \
         \"repo\": \"web\"}}'"
    )]
    Args(serde_json::Error),
    #[error(
        "--calls {calls} is fewer than --{other} {count}: --calls counts every call the execution made before this \
         one, those included; raise --calls or leave it out"
    )]
    Counts { calls: u32, other: &'static str, count: u32 },
    #[error("no toolkit `{name}` in the sources file; {known}")]
    UnknownToolkit { name: String, known: String },
    #[error(
        "no tool `{path}` in the catalog{near}; a tool's path is <namespace>.<group>.<name>, as tools.search \
         finds it (`executor policy schema` lists the namespaces)"
    )]
    UnknownTool { path: String, near: String },
    #[error(
        "tools.{path} is not in toolkit `{toolkit}` (its `tools` patterns leave it out: a call there is answered \
         unknown_tool); check it without --toolkit, or pick a tool of the toolkit"
    )]
    NotInToolkit { path: String, toolkit: String },
    #[error("cannot check tools.{path}: {message}; fix the source in the sources file and run the check again")]
    Unavailable { path: String, message: String },
    #[error(
        "tools.{path} would fail with invalid_arguments before any policy is asked: {message}; fix --args to match \
         the tool's arguments (tools.describe.tool shows them)"
    )]
    InvalidArguments { path: String, message: String },
}

#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Print the Cedar schema the policies are validated against (`[policy] cedar` and each toolkit's
    /// `cedar`), with the catalog's namespaces in its header. Connects the sources; calls no tool.
    Schema {
        /// Sources file (TOML, see executor.example.toml); default: `EXECUTOR_CONFIG`.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// What the policy decides for one call, before it would be made: run, approve or block, and the ids of
    /// the policies that decided. The policy alone; the owner's grants are not read. No tool is called.
    Check(CheckArgs),
}

/// `executor policy check`'s flags.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// Whose code makes the call (the Cedar principal): an API key's owner, or an OIDC identity as the
    /// server records it.
    #[arg(long, value_name = "NAME")]
    pub owner: String,
    /// The tool's path, e.g. github.issues.issues_create_comment (`tools.` in front is taken too).
    #[arg(long, value_name = "PATH")]
    pub tool: String,
    /// The call's arguments, one JSON object as the code passes them (`context.args`).
    #[arg(long, value_name = "JSON")]
    pub args: String,
    /// Ask through this toolkit's view (`[[toolkits]]` in the sources file), its own Cedar policies included.
    #[arg(long, value_name = "NAME")]
    pub toolkit: Option<String>,
    /// Calls the execution made before this one (`context.execution.calls`) [default: the larger of
    /// --writes and --calls-to-tool].
    #[arg(long, value_name = "N")]
    pub calls: Option<u32>,
    /// Those of them whose tool writes (`context.execution.writes`).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub writes: u32,
    /// Those of them to this same tool (`context.execution.calls_to_tool`).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub calls_to_tool: u32,
    /// Sources file (TOML, see executor.example.toml); default: `EXECUTOR_CONFIG`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl CheckArgs {
    /// The counts, `--calls` defaulting to the least the others allow.
    fn counts(&self) -> Result<CallCounts, PolicyError> {
        let calls = self.calls.unwrap_or(self.writes.max(self.calls_to_tool));
        for (other, count) in [("writes", self.writes), ("calls-to-tool", self.calls_to_tool)] {
            if calls < count {
                return Err(PolicyError::Counts { calls, other, count });
            }
        }
        Ok(CallCounts { calls, writes: self.writes, calls_to_tool: self.calls_to_tool })
    }
}

/// What `check` found: one line each for the decision, the policies that made it and, unless it runs, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// `run`, `approve` or `block`.
    pub decision: &'static str,
    /// The id the audit trail records: the deciding policies' ids, comma-separated, or the rule's.
    pub policies: String,
    /// The blocked reason, or the approval message's first line.
    pub reason: Option<String>,
}

impl From<Policy> for Checked {
    fn from(policy: Policy) -> Self {
        match policy {
            Policy::Run { by: Allowance::Rule(id) } => Self { decision: "run", policies: id, reason: None },
            // Not from the policy alone (grants are not read), but worded if a view ever says so.
            Policy::Run { by: Allowance::Grant(id) } => {
                Self { decision: "run", policies: format!("grant:{id}"), reason: None }
            }
            Policy::NeedsApproval { message, rule } => {
                let first = message.lines().next().unwrap_or_default().to_owned();
                Self { decision: "approve", policies: rule, reason: Some(first) }
            }
            Policy::Blocked { reason, rule } => Self { decision: "block", policies: rule, reason: Some(reason) },
            // Waits for a person too, like an approval.
            Policy::NeedsConnect { source, message } => {
                let first = message.lines().next().unwrap_or_default().to_owned();
                Self { decision: "approve", policies: format!("connect:{source}"), reason: Some(first) }
            }
        }
    }
}

impl fmt::Display for Checked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "decision: {}", self.decision)?;
        writeln!(f, "policies: {}", self.policies)?;
        match &self.reason {
            Some(reason) => writeln!(f, "reason: {reason}"),
            None => Ok(()),
        }
    }
}

/// Run `command`, printing what it found.
pub async fn run(command: PolicyCommand) -> Result<(), PolicyError> {
    match command {
        PolicyCommand::Schema { config } => {
            let text = schema(config).await?;
            // The declarations' file may end without one; a shell prompt should not follow on its line.
            let end = if text.ends_with('\n') { "" } else { "\n" };
            print!("{text}{end}");
        }
        PolicyCommand::Check(args) => print!("{}", check(args).await?),
    }
    Ok(())
}

/// `executor policy schema`: the catalog's Cedar schema. Without a sources
/// file it still prints the schema, naming no namespace.
pub async fn schema(config: Option<PathBuf>) -> Result<String, PolicyError> {
    let config = load(config, false)?;
    Ok(connect(&config).await?.cedar_schema())
}

/// `executor policy check`: what the policy decides for one call.
pub async fn check(args: CheckArgs) -> Result<Checked, PolicyError> {
    // Every flag is checked before the sources are connected, which may take a while.
    let owner = Principal::parse(args.owner.as_str())?;
    let call_args: Value = serde_json::from_str(&args.args).map_err(PolicyError::Args)?;
    let toolkit = args.toolkit.as_deref().map(ToolkitName::parse).transpose()?;
    let before = args.counts()?;
    let config = load(args.config, true)?;
    if let Some(name) = &toolkit
        && !config.toolkits.iter().any(|t| t.name == *name)
    {
        return Err(unknown_toolkit(name, &config));
    }
    let catalog = connect(&config).await?;
    if config.cedar.is_none() {
        eprintln!("executor: note: the sources file sets no `[policy] cedar`: the sources' rules decide");
    }
    let path = args.tool.strip_prefix("tools.").unwrap_or(&args.tool);
    known(&catalog, path).await?;
    let view: Arc<dyn Tools> = match &toolkit {
        Some(name) => {
            let views = Catalog::toolkit_views(&catalog, &config.toolkits);
            let view = views.into_iter().find(|v| v.name() == name).expect("the sources file has the toolkit");
            // Outside its patterns the view lets any call "run": the call itself would then say there is no tool.
            if view.effect(path).is_none() {
                return Err(PolicyError::NotInToolkit { path: path.to_owned(), toolkit: name.to_string() });
            }
            Arc::new(view)
        }
        None => catalog,
    };
    view.validate(path, &call_args)
        .map_err(|message| PolicyError::InvalidArguments { path: path.to_owned(), message })?;
    let call =
        PolicyCall { owner: Some(&owner), toolkit: toolkit.as_ref(), before, ..PolicyCall::new(path, &call_args) };
    Ok(Checked::from(view.policy(&call)))
}

/// The sources file; `required`: one must be named (by the flag or `EXECUTOR_CONFIG`).
fn load(flag: Option<PathBuf>, required: bool) -> Result<CatalogConfig, PolicyError> {
    match CatalogConfig::locate(flag.clone()) {
        None if required => return Err(PolicyError::NoConfig),
        None => eprintln!("executor: note: no sources file (--config or EXECUTOR_CONFIG): no namespaces to name"),
        Some(_) => {}
    }
    Ok(CatalogConfig::load_located(flag)?)
}

/// Its catalog, connected as `serve` connects it (the Cedar policies validated).
async fn connect(config: &CatalogConfig) -> Result<Arc<Catalog>, PolicyError> {
    let catalog = Catalog::connect(config).await?;
    // Its tools are unknown here, so policies naming them were not checked against them either.
    for source in catalog.namespaces() {
        if let Some(error) = &source.error {
            eprintln!(
                "executor: warning: source {} is unavailable, its tools cannot be checked: {error}",
                source.namespace
            );
        }
    }
    Ok(Arc::new(catalog))
}

/// `Ok` when the catalog has a tool at `path`; else why not. Needed because
/// the policy lets an unknown path "run" (its call then says what exists).
async fn known(catalog: &Catalog, path: &str) -> Result<(), PolicyError> {
    if catalog.effect(path).is_some() {
        return Ok(());
    }
    // Describe says why a tool is missing: no such tool, or its source is unavailable.
    let Err(error) = catalog.describe(json!({ "path": path })).await else { return Ok(()) };
    if error.code != "unknown_tool" {
        return Err(PolicyError::Unavailable { path: path.to_owned(), message: error.message });
    }
    let found = Tools::search(catalog, json!({ "query": path, "limit": 1 })).await.unwrap_or_default();
    let near = match found.pointer("/items/0/path").and_then(Value::as_str) {
        Some(close) => format!(" (did you mean `{close}`?)"),
        None => String::new(),
    };
    Err(PolicyError::UnknownTool { path: path.to_owned(), near })
}

fn unknown_toolkit(name: &ToolkitName, config: &CatalogConfig) -> PolicyError {
    let names: Vec<&str> = config.toolkits.iter().map(|t| t.name.as_str()).collect();
    let known = match names.is_empty() {
        true => "it has no [[toolkits]]".to_owned(),
        false => format!("its toolkits: {}", names.join(", ")),
    };
    PolicyError::UnknownToolkit { name: name.to_string(), known }
}
