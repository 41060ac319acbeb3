//! Native approvals for 2026-07-28 clients: a pause becomes an input-required
//! result that asks the client's own UI for approval (an elicitation), and its
//! request state, sealed with HMAC-SHA256, names the execution and is bound to
//! the owner. The client retries the call with the answer and the state; the
//! retry resumes the execution (on any instance that has the same key).

use std::fmt;
use std::time::Duration;

use executor_core::{ApprovalAction, ExecutionId, PendingCall, Principal};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, RequestStateCodec, SealOptions,
};
use serde::{Deserialize, Serialize};

/// The key of our one input request in `inputRequests` / `inputResponses`.
const APPROVAL: &str = "approval";

/// The HMAC key for request states: at least 32 bytes, the same on every
/// instance (`EXECUTOR_REQUEST_STATE_KEY`). Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct RequestStateKey(Vec<u8>);

impl RequestStateKey {
    pub const MIN_BYTES: usize = RequestStateCodec::MIN_KEY_LENGTH;

    /// `None` when shorter than [`Self::MIN_BYTES`].
    pub fn new(bytes: impl Into<Vec<u8>>) -> Option<Self> {
        let bytes = bytes.into();
        (bytes.len() >= Self::MIN_BYTES).then_some(Self(bytes))
    }
}

impl fmt::Debug for RequestStateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RequestStateKey(..)")
    }
}

/// What the sealed state carries (readable by the client, not forgeable).
#[derive(Serialize, Deserialize)]
struct State {
    #[serde(rename = "executionId")]
    execution_id: ExecutionId,
}

/// Why a retried call could not continue an execution.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NativeError {
    #[error("the request state is not one this server issued for you, or it expired; call execute again")]
    BadState,
    #[error("the retried call must answer the `approval` input request with accept, decline or cancel")]
    NoAnswer,
}

pub(crate) struct NativeApprovals {
    codec: RequestStateCodec,
    ttl: Duration,
}

impl NativeApprovals {
    pub fn new(key: &RequestStateKey, ttl: Duration) -> Self {
        let codec = RequestStateCodec::try_new(key.0.clone()).expect("a RequestStateKey is long enough");
        Self { codec, ttl }
    }

    /// Ask the client's user about `pending`, with a state bound to `owner`.
    pub fn ask(&self, owner: &Principal, id: &ExecutionId, pending: &[PendingCall]) -> InputRequiredResult {
        let context = context(owner);
        let options = SealOptions::new().associated_data(&context).ttl(self.ttl);
        let state = State { execution_id: id.clone() };
        let sealed = self.codec.seal_json_with(&state, &options).expect("the state serialises");
        let mut message = String::from("The code wants to make a call that needs your approval.");
        for call in pending {
            message.push_str(&format!("\n\n{}\nTool: tools.{}\nArguments: {}", call.message, call.path, call.args));
        }
        let schema = ElicitationSchema::builder().build().expect("an empty form is a valid schema");
        let params = ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: schema };
        let mut requests = InputRequests::new();
        requests.insert(APPROVAL.into(), InputRequest::Elicitation(ElicitRequest::new(params)));
        InputRequiredResult::new(Some(requests), Some(sealed))
    }

    /// The execution and decision of a retried call of `owner`.
    pub fn answer(
        &self,
        owner: &Principal,
        state: &str,
        responses: Option<&InputResponses>,
    ) -> Result<(ExecutionId, ApprovalAction), NativeError> {
        let state: State = self.codec.open_json_with(state, &context(owner)).map_err(|_| NativeError::BadState)?;
        let action = responses
            .and_then(|r| r.get(APPROVAL))
            .and_then(|answer| answer.get("action"))
            .and_then(|action| action.as_str())
            .and_then(|action| ApprovalAction::parse(action).ok())
            .ok_or(NativeError::NoAnswer)?;
        Ok((state.execution_id, action))
    }
}

/// Binds a state to its owner: another principal's retry cannot open it.
fn context(owner: &Principal) -> Vec<u8> {
    format!("executor/approval|{}", owner.as_str()).into_bytes()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn native() -> NativeApprovals {
        NativeApprovals::new(&RequestStateKey::new(vec![7u8; 32]).unwrap(), Duration::from_secs(60))
    }

    #[test]
    fn keys_must_be_long_enough_and_never_print() {
        assert!(RequestStateKey::new(vec![1u8; 31]).is_none());
        let key = RequestStateKey::new(b"0123456789abcdef0123456789abcdef".to_vec()).unwrap();
        assert_eq!(format!("{key:?}"), "RequestStateKey(..)");
    }

    #[test]
    fn a_state_opens_only_for_its_owner_with_an_answer() {
        let (alice, bob) = (Principal::parse("alice").unwrap(), Principal::parse("bob").unwrap());
        let id = ExecutionId::parse("e1").unwrap();
        let pending = [PendingCall::new(0, "gh.issues.create", json!({"title": "t"}), "Create an issue?")];
        let asked = native().ask(&alice, &id, &pending);
        let state = asked.request_state.clone().unwrap();
        let request = serde_json::to_value(&asked.input_requests.unwrap()[APPROVAL]).unwrap();
        assert_eq!(request["method"], "elicitation/create");
        assert!(request["params"]["message"].as_str().unwrap().contains("Tool: tools.gh.issues.create"));

        let answer = |action: &str| InputResponses::from([(APPROVAL.to_owned(), json!({"action": action}))]);
        type Case<'a> = (&'a Principal, String, Option<InputResponses>, Result<ApprovalAction, &'a str>);
        let cases: Vec<Case> = vec![
            (&alice, state.clone(), Some(answer("accept")), Ok(ApprovalAction::Accept)),
            (&alice, state.clone(), Some(answer("decline")), Ok(ApprovalAction::Decline)),
            (&alice, state.clone(), Some(answer("cancel")), Ok(ApprovalAction::Cancel)),
            (&bob, state.clone(), Some(answer("accept")), Err("bad state")),
            (&alice, format!("{state}x"), Some(answer("accept")), Err("bad state")),
            (&alice, state.clone(), None, Err("no answer")),
            (&alice, state.clone(), Some(answer("maybe")), Err("no answer")),
        ];
        for (owner, state, responses, expected) in cases {
            let got = native().answer(owner, &state, responses.as_ref());
            match (got, expected) {
                (Ok((got_id, action)), Ok(want)) => assert_eq!((got_id, action), (id.clone(), want)),
                (Err(NativeError::BadState), Err("bad state")) | (Err(NativeError::NoAnswer), Err("no answer")) => {}
                (got, want) => panic!("{owner:?} {state}: got {got:?}, want {want:?}"),
            }
        }
    }
}
