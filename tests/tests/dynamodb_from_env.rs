//! `DynamoStore::from_env` honours `EXECUTOR_TABLE` and the standard `AWS_*`
//! variables. Alone in its own test binary because it sets process variables.

use std::time::{Duration, SystemTime};

use executor_core::{ClientInfo, ElicitationMode, Principal, Session, SessionId, Timestamp};
use executor_store::{Access, DynamoStore, SessionStore};

#[tokio::test]
async fn from_env_uses_executor_table_and_aws_endpoint_url() {
    let endpoint = executor_tests::moto().endpoint.clone();
    // SAFETY: this binary has one test and sets the variables before any other thread reads them.
    unsafe {
        std::env::remove_var("EXECUTOR_TABLE");
        std::env::set_var("AWS_ENDPOINT_URL", &endpoint);
        std::env::set_var("AWS_REGION", "eu-west-1");
        std::env::set_var("AWS_ACCESS_KEY_ID", "test");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
    }
    let missing = DynamoStore::from_env().await.err().expect("EXECUTOR_TABLE is required").to_string();
    assert!(missing.contains("EXECUTOR_TABLE is not set"), "{missing}");

    unsafe { std::env::set_var("EXECUTOR_TABLE", "executor-from-env") };
    let store = DynamoStore::from_env().await.unwrap();
    assert_eq!(store.table(), "executor-from-env");
    store.create_table().await.unwrap();
    store.create_table().await.expect("creating an existing table is not an error");

    let now: Timestamp = SystemTime::now().into();
    let session = Session::new(
        SessionId::parse("env").unwrap(),
        Principal::parse("alice").unwrap(),
        now,
        "2025-06-18",
        ClientInfo::default(),
        ElicitationMode::Model,
        now.plus(Duration::from_secs(3600)),
    );
    store.create_session(&session).await.unwrap();
    assert_eq!(store.get_session(Access::Internal, &session.id).await.unwrap(), session);

    // The item really is in eu-west-1 of the moto server, where the variables pointed.
    let tables = executor_tests::dynamodb_client_in("eu-west-1").list_tables().send().await.unwrap();
    assert!(tables.table_names().iter().any(|t| t == "executor-from-env"), "{tables:?}");
}
