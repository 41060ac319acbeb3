//! A failed DynamoDB call as one line: the table and region, what was being
//! done, and the likely fix. The SDK's own error chain (several lines of
//! nested structures) stays out of what the user sees.

use std::error::Error;
use std::fmt::Debug;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use crate::StoreError;

/// `error`, from `operation` on `table`, as a [`StoreError::Backend`] that says what to do.
pub(crate) fn sdk_error<E, R>(
    client: &Client,
    table: &str,
    operation: &'static str,
    error: SdkError<E, R>,
) -> StoreError
where
    E: ProvideErrorMetadata + Error + 'static,
    R: Debug,
{
    let region = client.config().region().map_or_else(|| "no region".to_owned(), |r| r.to_string());
    let at = format!("table {table} in {region}");
    let detail = match &error {
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or("an unnamed error");
            let message = service.err().message().unwrap_or_default();
            service_error(&at, code, message)
        }
        SdkError::TimeoutError(_) => {
            format!("DynamoDB did not answer in time ({at}): check the network and AWS_ENDPOINT_URL")
        }
        SdkError::DispatchFailure(failure) if failure.is_timeout() || failure.is_io() => {
            format!("cannot reach DynamoDB ({at}): check AWS_REGION, AWS_ENDPOINT_URL and the network")
        }
        // Credentials are resolved before a request is sent: a failure there
        // is a dispatch or construction failure whose source says so.
        other if mentions_credentials(other) => format!(
            "no AWS credentials for {at}: set AWS_PROFILE (after `aws sso login` if it uses SSO) or \
             AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        ),
        SdkError::ResponseError(_) => {
            format!("DynamoDB's answer could not be read ({at}): check AWS_ENDPOINT_URL points at DynamoDB")
        }
        other => format!("the request for {at} could not be sent ({}): check the AWS settings", first_line(other)),
    };
    StoreError::Backend { operation, detail }
}

/// What a DynamoDB error code means for the person running the command.
fn service_error(at: &str, code: &str, message: &str) -> String {
    match code {
        "ResourceNotFoundException" => format!(
            "{at} does not exist: create it (`--create-table`, or deploy the CDK stack), or set EXECUTOR_TABLE \
             and AWS_REGION to the deployed table's name and region (the stack's TableName output)"
        ),
        "UnrecognizedClientException"
        | "InvalidSignatureException"
        | "InvalidClientTokenId"
        | "MissingAuthenticationToken"
        | "IncompleteSignature" => format!(
            "AWS refused the credentials for {at} ({code}): check AWS_PROFILE or AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, and that they belong to this region's partition"
        ),
        "ExpiredTokenException" | "ExpiredToken" => {
            format!("the AWS credentials for {at} have expired: refresh them (e.g. `aws sso login`) and retry")
        }
        "AccessDeniedException" => format!(
            "access to {at} denied ({}): the credentials need DynamoDB permissions on that table",
            first_line(message)
        ),
        "ProvisionedThroughputExceededException" | "ThrottlingException" | "RequestLimitExceeded" => format!(
            "DynamoDB throttled the request on {at} ({code}): retry in a moment; if it persists, raise the \
             table's throughput or the account's quota"
        ),
        "ResourceInUseException" => format!("{at} is being created or changed: retry in a minute"),
        _ => format!("{code} on {at}: {}", first_line(message)),
    }
}

fn mentions_credentials(error: &dyn Error) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        if e.to_string().to_ascii_lowercase().contains("credentials") {
            return true;
        }
        source = e.source();
    }
    false
}

/// The error's own first line, without the chain.
fn first_line(error: impl std::fmt::Display) -> String {
    error.to_string().lines().next().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_likely_cause_says_what_to_do_in_one_line() {
        let at = "table executor in eu-west-1";
        let cases = [
            ("ResourceNotFoundException", "--create-table"),
            ("UnrecognizedClientException", "check AWS_PROFILE"),
            ("ExpiredTokenException", "refresh them"),
            ("AccessDeniedException", "need DynamoDB permissions"),
            ("ThrottlingException", "retry in a moment"),
            ("ProvisionedThroughputExceededException", "retry in a moment"),
        ];
        for (code, fix) in cases {
            let line = service_error(at, code, "Some message\nwith a second line");
            assert!(line.contains(at) && line.contains(fix), "{code}: {line}");
            assert!(!line.contains('\n'), "{code}: {line}");
        }
        assert_eq!(service_error(at, "Odd", "one\ntwo"), "Odd on table executor in eu-west-1: one");
    }
}
