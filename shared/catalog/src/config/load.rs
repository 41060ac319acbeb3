//! Reading a sources file: where it is, its TOML checked field by field,
//! toolkits and quotas validated here, each source by `source.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use executor_core::{Principal, QuotaLimits, SourcePolicy, ToolPattern, Toolkit, ToolkitName};
use serde::Deserialize;

use crate::cedar::CedarSource;
use crate::config::source::{FieldProblem, RawSource, validate_source};
use crate::config::{CONFIG_ENV, CatalogConfig, ConfigError, INDEX_ENV, OutboundConfig, SourceConfig};

// What the file says, before validation. Unknown fields are refused so a typo
// is an error, not a silently ignored setting.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    outbound: RawOutbound,
    #[serde(default)]
    sources: Vec<RawSource>,
    #[serde(default)]
    toolkits: Vec<RawToolkit>,
    /// Owner name (as `keys list` shows it) -> limits.
    #[serde(default)]
    quotas: BTreeMap<String, QuotaLimits>,
    index: Option<PathBuf>,
    #[serde(default)]
    policy: RawPolicy,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    /// Cedar policies, relative to the sources file.
    cedar: Option<PathBuf>,
}

// Fields are checked one by one (not by serde), so an error names the toolkit.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolkit {
    name: String,
    tools: Vec<String>,
    policy: Option<toml::Value>,
    cedar: Option<PathBuf>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOutbound {
    allow_loopback: Option<bool>,
    timeout_ms: Option<u64>,
    max_response_bytes: Option<usize>,
}

impl CatalogConfig {
    /// The sources file to load: the `--config` flag when given, else `EXECUTOR_CONFIG`, else none.
    pub fn locate(flag: Option<PathBuf>) -> Option<PathBuf> {
        flag.or_else(|| std::env::var_os(CONFIG_ENV).filter(|v| !v.is_empty()).map(PathBuf::from))
    }

    /// The sources file named by `flag` or `EXECUTOR_CONFIG`, validated; with
    /// neither, no sources, toolkits or quota overrides. `EXECUTOR_CATALOG_INDEX`
    /// names the index in place of the file's `index`.
    pub fn load_located(flag: Option<PathBuf>) -> Result<Self, ConfigError> {
        let mut config = match Self::locate(flag) {
            Some(path) => Self::load(&path)?,
            None => Self {
                outbound: OutboundConfig::default(),
                sources: Vec::new(),
                toolkits: Vec::new(),
                quotas: BTreeMap::new(),
                index: None,
                cedar: None,
                toolkit_cedar: BTreeMap::new(),
            },
        };
        if let Some(index) = std::env::var_os(INDEX_ENV).filter(|v| !v.is_empty()) {
            config.index = Some(PathBuf::from(index));
        }
        Ok(config)
    }

    /// Read and validate a sources file. Relative spec paths are relative to the file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read { file: path.into(), error })?;
        Self::from_toml_str(&text, path)
    }

    /// Validate TOML text; `file` names it in errors and anchors relative spec paths.
    pub fn from_toml_str(text: &str, file: &Path) -> Result<Self, ConfigError> {
        let raw: RawConfig =
            toml::from_str(text).map_err(|e| ConfigError::Syntax { file: file.into(), message: e.to_string() })?;
        let defaults = OutboundConfig::default();
        let outbound = OutboundConfig {
            allow_loopback: raw.outbound.allow_loopback.unwrap_or(defaults.allow_loopback),
            timeout: raw.outbound.timeout_ms.map_or(defaults.timeout, Duration::from_millis),
            max_response_bytes: raw.outbound.max_response_bytes.unwrap_or(defaults.max_response_bytes),
        };
        let base_dir = file.parent().unwrap_or(Path::new("."));
        let mut sources: Vec<SourceConfig> = Vec::new();
        for source in raw.sources {
            let name = source.namespace.clone();
            let invalid = |field: &'static str, problem: String| ConfigError::Invalid {
                file: file.into(),
                source_name: name.clone(),
                field,
                problem,
            };
            let validated = validate_source(source, base_dir).map_err(|(field, problem)| invalid(field, problem))?;
            if sources.iter().any(|s| s.namespace == validated.namespace) {
                return Err(invalid("namespace", "another source already uses this namespace".into()));
            }
            sources.push(validated);
        }
        let read_cedar = |section: String, relative: &Path| {
            let policies = base_dir.join(relative);
            CedarSource::read(&policies).map_err(|error| ConfigError::ReadPolicies {
                file: file.into(),
                section,
                policies,
                error,
            })
        };
        let cedar = raw.policy.cedar.as_deref().map(|path| read_cedar("[policy] cedar".into(), path)).transpose()?;
        let mut toolkits: Vec<Toolkit> = Vec::new();
        let mut toolkit_cedar = BTreeMap::new();
        for raw in raw.toolkits {
            let invalid = |field: &'static str, problem: String| ConfigError::InvalidToolkit {
                file: file.into(),
                toolkit: raw.name.clone(),
                field,
                problem,
            };
            let toolkit = validate_toolkit(&raw).map_err(|(field, problem)| invalid(field, problem))?;
            if toolkits.iter().any(|t| t.name == toolkit.name) {
                return Err(invalid("name", "another toolkit already has this name".into()));
            }
            if let Some(path) = &raw.cedar {
                let section = format!("toolkit `{}`, field `cedar`", toolkit.name);
                toolkit_cedar.insert(toolkit.name.clone(), read_cedar(section, path)?);
            }
            toolkits.push(toolkit);
        }
        let mut quotas = BTreeMap::new();
        for (owner, limits) in raw.quotas {
            let principal = Principal::parse(owner.as_str()).map_err(|e| ConfigError::InvalidQuota {
                file: file.into(),
                owner,
                problem: e.to_string(),
            })?;
            quotas.insert(principal, limits);
        }
        // Relative to the file, as spec paths are.
        let index = raw.index.map(|index| base_dir.join(index));
        Ok(Self { outbound, sources, toolkits, quotas, index, cedar, toolkit_cedar })
    }
}

fn validate_toolkit(raw: &RawToolkit) -> Result<Toolkit, FieldProblem> {
    let name = ToolkitName::parse(&raw.name).map_err(|e| ("name", e.to_string()))?;
    if raw.tools.is_empty() {
        return Err(("tools", "must list at least one tool pattern, e.g. tools = [\"github.issues.*\"]".into()));
    }
    let tools = raw
        .tools
        .iter()
        .map(|pattern| ToolPattern::parse(pattern).map_err(|e| ("tools", e.to_string())))
        .collect::<Result<_, _>>()?;
    let policy = match &raw.policy {
        None => SourcePolicy::default(),
        Some(value) => value.clone().try_into().map_err(|e: toml::de::Error| ("policy", e.message().to_owned()))?,
    };
    Ok(Toolkit { name, tools, policy })
}
