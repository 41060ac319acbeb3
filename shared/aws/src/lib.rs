//! The AWS SDK configuration, loaded once per process so the DynamoDB,
//! Scheduler and Secrets Manager clients share one HTTP client (one TLS
//! set-up), which matters for a Lambda cold start.
//!
//! Two sources:
//! - [`from_env`]: the standard variables Lambda sets for every function
//!   (`AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//!   `AWS_SESSION_TOKEN`) plus `AWS_ENDPOINT_URL`. Always compiled; what the
//!   Lambda functions use.
//! - with the `profiles` feature (the `executor` command), the same when the
//!   environment has a region and credentials, else the SDK's whole default
//!   chain: profiles, SSO, web identity, credential processes.
//!
//! Either way the SDK sends through [`ReqwestHttpClient`].

mod http;

pub use http::ReqwestHttpClient;

use std::time::Duration;

use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_runtime_api::client::behavior_version::BehaviorVersion;
use aws_smithy_types::retry::RetryConfig;
use aws_smithy_types::timeout::TimeoutConfig;
pub use aws_types::SdkConfig;
use aws_types::region::Region;
use tokio::sync::OnceCell;

/// The SDK's own default (what `aws-config` sets): a dead endpoint fails fast.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(3100);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AwsConfigError {
    #[error("could not set up the AWS SDK's HTTP client: {0}")]
    HttpClient(String),
    #[error(
        "{0} is not set: set the AWS region (AWS_REGION) and credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) in the environment; AWS Lambda sets them for every function"
    )]
    Missing(&'static str),
}

/// The process's SDK configuration, loaded on first use.
pub async fn sdk_config() -> Result<&'static SdkConfig, AwsConfigError> {
    static CONFIG: OnceCell<SdkConfig> = OnceCell::const_new();
    CONFIG.get_or_try_init(load).await
}

#[cfg(feature = "profiles")]
async fn load() -> Result<SdkConfig, AwsConfigError> {
    // Region and credentials in the environment: nothing else is consulted, so
    // no profile is read and no instance-metadata endpoint probed (whose
    // failures the default chain logs as warnings off EC2).
    if let Ok(config) = from_env(|name| std::env::var(name).ok()) {
        return Ok(config);
    }
    Ok(aws_config::defaults(BehaviorVersion::latest()).http_client(http_client()?).load().await)
}

fn http_client() -> Result<ReqwestHttpClient, AwsConfigError> {
    ReqwestHttpClient::new(CONNECT_TIMEOUT).map_err(|e| AwsConfigError::HttpClient(e.to_string()))
}

#[cfg(not(feature = "profiles"))]
async fn load() -> Result<SdkConfig, AwsConfigError> {
    from_env(|name| std::env::var(name).ok())
}

/// The configuration from environment variables, read through `var`.
pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<SdkConfig, AwsConfigError> {
    let var = |name: &str| var(name).filter(|value| !value.is_empty());
    let region =
        var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")).ok_or(AwsConfigError::Missing("AWS_REGION"))?;
    let key_id = var("AWS_ACCESS_KEY_ID").ok_or(AwsConfigError::Missing("AWS_ACCESS_KEY_ID"))?;
    let secret = var("AWS_SECRET_ACCESS_KEY").ok_or(AwsConfigError::Missing("AWS_SECRET_ACCESS_KEY"))?;
    let credentials = Credentials::new(key_id, secret, var("AWS_SESSION_TOKEN"), None, "environment");
    let mut config = SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region))
        .credentials_provider(SharedCredentialsProvider::new(credentials))
        .http_client(http_client()?)
        .retry_config(RetryConfig::standard())
        .timeout_config(TimeoutConfig::builder().connect_timeout(CONNECT_TIMEOUT).build());
    if let Some(endpoint) = var("AWS_ENDPOINT_URL") {
        config = config.endpoint_url(endpoint);
    }
    Ok(config.build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_credential_types::provider::ProvideCredentials;

    fn config(vars: &[(&str, &str)]) -> Result<SdkConfig, AwsConfigError> {
        from_env(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string()))
    }

    type Vars = &'static [(&'static str, &'static str)];

    const KEYS: [(&str, &str); 2] = [("AWS_ACCESS_KEY_ID", "AKID"), ("AWS_SECRET_ACCESS_KEY", "secret")];

    #[test]
    fn what_is_missing_is_named() {
        let cases: [(Vars, AwsConfigError); 4] = [
            (&KEYS, AwsConfigError::Missing("AWS_REGION")),
            (&[("AWS_REGION", ""), KEYS[0], KEYS[1]], AwsConfigError::Missing("AWS_REGION")),
            (&[("AWS_REGION", "eu-west-1"), KEYS[1]], AwsConfigError::Missing("AWS_ACCESS_KEY_ID")),
            (&[("AWS_REGION", "eu-west-1"), KEYS[0]], AwsConfigError::Missing("AWS_SECRET_ACCESS_KEY")),
        ];
        for (vars, expected) in cases {
            assert_eq!(config(vars).unwrap_err(), expected, "{vars:?}");
        }
    }

    #[test]
    fn region_endpoint_and_credentials_are_read() {
        let cases: [(Vars, &str, Option<&str>, Option<&str>); 3] = [
            (&[("AWS_REGION", "eu-west-1"), KEYS[0], KEYS[1]], "eu-west-1", None, None),
            (
                &[("AWS_DEFAULT_REGION", "us-east-2"), KEYS[0], KEYS[1], ("AWS_SESSION_TOKEN", "tok")],
                "us-east-2",
                None,
                Some("tok"),
            ),
            (
                &[
                    ("AWS_REGION", "eu-west-1"),
                    ("AWS_DEFAULT_REGION", "us-east-2"),
                    KEYS[0],
                    KEYS[1],
                    ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
                ],
                "eu-west-1",
                Some("http://127.0.0.1:5000"),
                None,
            ),
        ];
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for (vars, region, endpoint, token) in cases {
            let config = config(vars).unwrap();
            assert_eq!(config.region().map(Region::as_ref), Some(region), "{vars:?}");
            assert_eq!(config.endpoint_url(), endpoint, "{vars:?}");
            let credentials = runtime.block_on(config.credentials_provider().unwrap().provide_credentials()).unwrap();
            assert_eq!((credentials.access_key_id(), credentials.secret_access_key()), ("AKID", "secret"));
            assert_eq!(credentials.session_token(), token, "{vars:?}");
        }
    }
}
