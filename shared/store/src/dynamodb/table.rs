//! The table's schema, created here for tests and `--store dynamodb`; the CDK
//! stack declares the same (keys `pk`/`sk` strings, TTL on `expires_at`,
//! on-demand billing).

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::create_table::CreateTableError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TimeToLiveSpecification,
};

use super::errors::sdk_error;
use super::item::{EXPIRES_AT, PK, SK};
use crate::StoreError;

const OPERATION: &str = "create the DynamoDB table";

/// Create `table` if it does not exist, and switch TTL on. Safe to repeat.
pub(crate) async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    let build = |e: aws_sdk_dynamodb::error::BuildError| StoreError::backend(OPERATION, e);
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(build)
    };
    let key = |name: &str, kind| KeySchemaElement::builder().attribute_name(name).key_type(kind).build().map_err(build);
    let created = client
        .create_table()
        .table_name(table)
        .attribute_definitions(attribute(PK)?)
        .attribute_definitions(attribute(SK)?)
        .key_schema(key(PK, KeyType::Hash)?)
        .key_schema(key(SK, KeyType::Range)?)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await;
    match created {
        Ok(_) => {}
        Err(e) if matches!(e.as_service_error(), Some(CreateTableError::ResourceInUseException(_))) => return Ok(()),
        Err(e) => return Err(sdk_error(client, table, OPERATION, e)),
    }
    wait_until_active(client, table).await?;
    let spec = TimeToLiveSpecification::builder().enabled(true).attribute_name(EXPIRES_AT).build().map_err(build)?;
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(spec)
        .send()
        .await
        .map_err(|e| sdk_error(client, table, OPERATION, e))?;
    Ok(())
}

async fn wait_until_active(client: &Client, table: &str) -> Result<(), StoreError> {
    use aws_sdk_dynamodb::types::TableStatus;
    for _ in 0..120 {
        let described = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| sdk_error(client, table, OPERATION, e))?;
        if described.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    Err(StoreError::backend(OPERATION, format!("table {table} did not become ACTIVE within 60 s")))
}
