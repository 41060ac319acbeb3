//! Secrets by reference: the config names where a secret lives (`env:NAME` or
//! an AWS Secrets Manager ARN), never its value. Values are fetched once per
//! process and cached; `redact.rs` removes them from anything that could be
//! journaled, logged or shown.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use tokio::sync::{Mutex, OnceCell};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SecretRef {
    Env(String),
    AwsSecretsManager(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretRefError {
    /// Deliberately does not echo the value: it may be a secret pasted into the file.
    #[error(
        "a secret must be a reference, `env:NAME` or `arn:aws:secretsmanager:<region>:<account>:secret:<name>`; \
         never write the value itself in the config"
    )]
    NotAReference,
    #[error("`env:{0}` does not name an environment variable (letters, digits and `_`)")]
    BadEnvName(String),
}

impl SecretRef {
    pub fn parse(text: &str) -> Result<Self, SecretRefError> {
        if let Some(name) = text.strip_prefix("env:") {
            let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            return if valid { Ok(Self::Env(name.into())) } else { Err(SecretRefError::BadEnvName(name.into())) };
        }
        if text.starts_with("arn:aws:secretsmanager:") {
            return Ok(Self::AwsSecretsManager(text.into()));
        }
        Err(SecretRefError::NotAReference)
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Env(name) => write!(f, "env:{name}"),
            Self::AwsSecretsManager(arn) => f.write_str(arn),
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum SecretError {
    #[error("secret `{0}`: the environment variable is not set")]
    EnvMissing(SecretRef),
    #[error("secret `{reference}`: Secrets Manager refused or failed: {detail}")]
    Aws { reference: SecretRef, detail: String },
    #[error("secret `{0}` has no string value (binary secrets are not supported)")]
    NotAString(SecretRef),
}

/// Fetches and caches secret values for the life of the process.
#[derive(Default)]
pub struct Secrets {
    cache: Mutex<HashMap<SecretRef, Arc<str>>>,
    aws: OnceCell<aws_sdk_secretsmanager::Client>,
}

impl Secrets {
    pub async fn resolve(&self, reference: &SecretRef) -> Result<Arc<str>, SecretError> {
        if let Some(value) = self.cache.lock().await.get(reference) {
            return Ok(value.clone());
        }
        let value: Arc<str> = match reference {
            SecretRef::Env(name) => std::env::var(name).map_err(|_| SecretError::EnvMissing(reference.clone()))?.into(),
            SecretRef::AwsSecretsManager(arn) => {
                let client = self
                    .aws
                    .get_or_try_init(|| async {
                        executor_aws::sdk_config().await.map(aws_sdk_secretsmanager::Client::new)
                    })
                    .await
                    .map_err(|e| SecretError::Aws { reference: reference.clone(), detail: e.to_string() })?;
                let output = client.get_secret_value().secret_id(arn).send().await.map_err(|e| SecretError::Aws {
                    reference: reference.clone(),
                    detail: aws_sdk_secretsmanager::error::DisplayErrorContext(e).to_string(),
                })?;
                output.secret_string().ok_or_else(|| SecretError::NotAString(reference.clone()))?.into()
            }
        };
        self.cache.lock().await.insert(reference.clone(), value.clone());
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse() {
        assert_eq!(SecretRef::parse("env:TOKEN_1"), Ok(SecretRef::Env("TOKEN_1".into())));
        let arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:gh-AbCdEf";
        assert_eq!(SecretRef::parse(arn), Ok(SecretRef::AwsSecretsManager(arn.into())));
        assert_eq!(SecretRef::parse("ghp_live_value"), Err(SecretRefError::NotAReference));
        assert_eq!(SecretRef::parse("env:A-B"), Err(SecretRefError::BadEnvName("A-B".into())));
        assert!(!SecretRefError::NotAReference.to_string().contains("ghp_live_value"));
    }

    #[tokio::test]
    async fn env_secrets_resolve_and_a_missing_one_names_only_the_reference() {
        let secrets = Secrets::default();
        let path = secrets.resolve(&SecretRef::Env("PATH".into())).await.unwrap();
        assert_eq!(&*path, std::env::var("PATH").unwrap());
        let missing = secrets.resolve(&SecretRef::Env("EXECUTOR_TEST_UNSET_SECRET".into())).await.unwrap_err();
        assert_eq!(missing.to_string(), "secret `env:EXECUTOR_TEST_UNSET_SECRET`: the environment variable is not set");
    }
}
