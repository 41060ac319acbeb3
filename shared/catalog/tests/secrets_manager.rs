//! A bearer token kept in AWS Secrets Manager (moto_server, the same harness
//! as the DynamoDB tests) reaches the upstream, and never the code.

mod support;

use executor_catalog::{Catalog, CatalogConfig};
use executor_core::ExecutionId;
use executor_sandbox::{CallContext, Tools};
use serde_json::json;

const TOKEN: &str = "sm-token-93c1e7-secret";

#[tokio::test(flavor = "multi_thread")]
async fn an_arn_is_resolved_through_secrets_manager_and_redacted() {
    let endpoint = &executor_tests::moto().endpoint;
    // SAFETY: this binary has this one test; nothing else reads the environment concurrently.
    unsafe {
        std::env::set_var("AWS_ENDPOINT_URL", endpoint);
        std::env::set_var("AWS_REGION", "eu-west-1");
        std::env::set_var("AWS_ACCESS_KEY_ID", "test");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
    }
    let client = aws_sdk_secretsmanager::Client::new(&executor_tests::moto_sdk_config("eu-west-1"));
    let name = format!("shop-token-{}", std::process::id());
    let created = client.create_secret().name(&name).secret_string(TOKEN).send().await.unwrap();
    let arn = created.arn().unwrap().to_owned();

    let shop = support::start_shop("http://localhost/").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shop.yaml"), support::SHOP_SPEC).unwrap();
    let missing = arn.replace(&name, "no-such-secret");
    let config = format!(
        "[outbound]\nallow_loopback = true\n\
         [[sources]]\nnamespace = \"shop\"\nkind = \"openapi\"\nspec = \"shop.yaml\"\nbase_url = \"{base}\"\n\
         auth = {{ type = \"bearer\", token = \"{arn}\" }}\n\
         [[sources]]\nnamespace = \"broken\"\nkind = \"openapi\"\nspec = \"shop.yaml\"\nbase_url = \"{base}\"\n\
         auth = {{ type = \"bearer\", token = \"{missing}\" }}\n",
        base = shop.base_url,
    );
    let config = CatalogConfig::from_toml_str(&config, &dir.path().join("executor.toml")).unwrap();
    let catalog = Catalog::connect(&config).await.unwrap();

    let ctx = CallContext::new(ExecutionId::parse("exec-sm").unwrap(), 0);
    catalog.call("shop.items.listItems", json!({}), &ctx).await.unwrap();
    assert_eq!(*shop.recorded.authorization.lock().unwrap(), [format!("Bearer {TOKEN}")]);
    let echoed = catalog.call("shop.debug.echoAuth", json!({}), &ctx).await.unwrap_err();
    assert_eq!(echoed.message, "HTTP 401: bad credentials: Bearer [redacted]");

    let broken = catalog.namespaces()[1].error.clone().unwrap();
    assert!(broken.starts_with(&format!("source `broken` (secrets) failed: secret `{missing}`")), "{broken}");
    assert!(!broken.contains(TOKEN));
}
