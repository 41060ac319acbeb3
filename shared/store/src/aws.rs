//! The AWS SDK configuration from the standard `AWS_*` variables, loaded once
//! per process: the DynamoDB and Scheduler clients then share one HTTP client
//! (one TLS setup), which matters for a Lambda cold start.

use aws_config::SdkConfig;
use tokio::sync::OnceCell;

pub async fn sdk_config() -> &'static SdkConfig {
    static CONFIG: OnceCell<SdkConfig> = OnceCell::const_new();
    CONFIG.get_or_init(|| aws_config::load_defaults(aws_config::BehaviorVersion::latest())).await
}
