//! Native approvals for 2026-07-28 clients: a pause becomes an input-required
//! result that asks the client's own UI for approval (an elicitation). Its
//! request state names the pause (the execution and the step of its pending
//! call), is bound to the owner, encrypted (ChaCha20-Poly1305: the client
//! learns nothing from it) and sealed (HMAC-SHA256). The client retries the
//! call with the answer and the state; the retry decides that pause and no
//! other (on any instance that has the same key). Once the pause is decided,
//! the same state is refused: a retried answer never approves a later call.

use std::time::Duration;

use executor_core::{ApprovalAction, ExecutionId, PendingCall, Principal, Remember};
use ring::aead::{CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationSchema, EnumSchema, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, PrimitiveSchemaDefinition, RequestStateCodec, SealOptions,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::RequestStateKey;

/// The key of our one input request in `inputRequests` / `inputResponses`.
const APPROVAL: &str = "approval";
/// The form field in which the person may choose "always allow" (`once` or `always`).
const REMEMBER: &str = "remember";

/// What the state carries, encrypted: the pause it answers.
#[derive(Serialize, Deserialize)]
struct State {
    #[serde(rename = "executionId")]
    execution_id: ExecutionId,
    /// The step of the pause's first pending call: unique within an execution.
    step: u32,
}

/// The pause a retried call answers, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    pub execution_id: ExecutionId,
    pub step: u32,
    pub action: ApprovalAction,
    /// The person's choice in the form; only an accept is remembered.
    pub remember: Remember,
}

/// Why a retried call could not continue an execution.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NativeError {
    #[error("the request state is not one this server issued for you, or it expired; call execute again")]
    BadState,
    #[error(
        "the retried call must answer the `approval` input request with accept, decline or cancel (and \
         `remember`, if given, once or always)"
    )]
    NoAnswer,
}

pub(crate) struct NativeApprovals {
    codec: RequestStateCodec,
    cipher: LessSafeKey,
    ttl: Duration,
}

impl NativeApprovals {
    pub fn new(key: &RequestStateKey, ttl: Duration) -> Self {
        let codec = RequestStateCodec::try_new(key.bytes().to_vec()).expect("a RequestStateKey is long enough");
        // A key of its own for encryption, derived so the MAC key is never reused.
        let derived =
            Sha256::new().chain_update(b"executor/request-state/encryption").chain_update(key.bytes()).finalize();
        let cipher = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &derived).expect("32 bytes"));
        Self { codec, cipher, ttl }
    }

    /// Ask the client's user about `pending` (the pause at its first call's
    /// step), with a state bound to `owner`.
    pub fn ask(&self, owner: &Principal, id: &ExecutionId, pending: &[PendingCall]) -> InputRequiredResult {
        let context = context(owner);
        let options = SealOptions::new().associated_data(&context).ttl(self.ttl);
        let state = State { execution_id: id.clone(), step: pending.first().map_or(0, |call| call.step) };
        let sealed = self.codec.seal_with(&self.encrypt(&state, &context), &options);
        let mut requests = InputRequests::new();
        requests.insert(APPROVAL.into(), InputRequest::Elicitation(approval_form(pending)));
        InputRequiredResult::new(Some(requests), Some(sealed))
    }

    /// The pause and decision of a retried call of `owner`.
    pub fn answer(
        &self,
        owner: &Principal,
        state: &str,
        responses: Option<&InputResponses>,
    ) -> Result<Answer, NativeError> {
        let context = context(owner);
        let sealed = self.codec.open_with(state, &context).map_err(|_| NativeError::BadState)?;
        let state = self.decrypt(sealed, &context).ok_or(NativeError::BadState)?;
        let answer = responses.and_then(|r| r.get(APPROVAL));
        let action = answer
            .and_then(|answer| answer.get("action"))
            .and_then(|action| action.as_str())
            .and_then(|action| ApprovalAction::parse(action).ok())
            .ok_or(NativeError::NoAnswer)?;
        let remember = match answer.and_then(|answer| answer.get("content")).and_then(|c| c.get(REMEMBER)) {
            None => Remember::Once,
            Some(choice) => choice.as_str().and_then(|c| Remember::parse(c).ok()).ok_or(NativeError::NoAnswer)?,
        };
        let remember = if action == ApprovalAction::Accept { remember } else { Remember::Once };
        Ok(Answer { execution_id: state.execution_id, step: state.step, action, remember })
    }

    /// nonce || ciphertext+tag, bound to `context`.
    fn encrypt(&self, state: &State, context: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).expect("the system has randomness");
        let mut body = serde_json::to_vec(state).expect("the state serialises");
        let aad = ring::aead::Aad::from(context);
        self.cipher
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), aad, &mut body)
            .expect("a state is far below the cipher's limit");
        [nonce.as_slice(), &body].concat()
    }

    fn decrypt(&self, mut sealed: Vec<u8>, context: &[u8]) -> Option<State> {
        if sealed.len() < NONCE_LEN {
            return None;
        }
        let body = sealed.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&sealed).ok()?;
        let mut body = body;
        let plain = self.cipher.open_in_place(nonce, ring::aead::Aad::from(context), &mut body).ok()?;
        serde_json::from_slice(plain).ok()
    }
}

/// The elicitation that asks the person about `pending` (every call of the
/// pause): what each call does, and whether to remember the approval.
pub(crate) fn approval_form(pending: &[PendingCall]) -> ElicitRequest {
    let mut message = match pending.len() {
        1 => String::from("The code wants to make a call that needs your approval."),
        n => format!("The code wants to make {n} calls that need your approval; your answer decides all of them."),
    };
    // Each call's message names the tool, what it does, its effect and the arguments (secrets redacted).
    for call in pending {
        let text = crate::http_edge::visible::escape_invisible(&call.message);
        message.push_str(&format!("\n\nTool: tools.{}\n{text}", call.path));
    }
    let tools: Vec<String> = pending.iter().map(|call| format!("tools.{}", call.path)).collect();
    let remember = EnumSchema::builder(vec!["once".into(), "always".into()])
        .enum_titles(vec!["Only this call".into(), format!("Always allow {}", tools.join(", "))])
        .and_then(|b| b.with_default("once"))
        .expect("the default is one of the values")
        .title("Remember this approval?")
        .description("\"always\" runs later calls of the same tool without asking, until you revoke it")
        .build();
    let schema = ElicitationSchema::builder()
        .property(REMEMBER, PrimitiveSchemaDefinition::Enum(remember))
        .build()
        .expect("a one-field form is a valid schema");
    let params = ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: schema };
    ElicitRequest::new(params)
}

/// Binds a state to its owner: another principal's retry cannot open it.
fn context(owner: &Principal) -> Vec<u8> {
    format!("executor/approval|{}", owner.as_str()).into_bytes()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

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
        // Long enough that sealed random bytes never spell it by chance ("e1" did, 1 run in ~40).
        const ID: &str = "execution-7c1f9a2b5d";
        let id = ExecutionId::parse(ID).unwrap();
        let pending = [PendingCall::new(3, "gh.issues.create", json!({"title": "t"}), "Create an issue?")];
        let asked = native().ask(&alice, &id, &pending);
        let state = asked.request_state.clone().unwrap();
        // Nothing in the state is readable: not the id, not the step, in any base64 alignment.
        let decoded: Vec<Vec<u8>> = state
            .split(['.', '~', ':'])
            .flat_map(|part| {
                use base64::Engine;
                let engines = [
                    base64::engine::general_purpose::URL_SAFE_NO_PAD,
                    base64::engine::general_purpose::STANDARD_NO_PAD,
                ];
                engines.into_iter().filter_map(move |e| e.decode(part.trim_end_matches('=')).ok())
            })
            .collect();
        assert!(!state.contains(ID) && !state.contains("executionId"), "{state}");
        for bytes in &decoded {
            let text = String::from_utf8_lossy(bytes);
            assert!(!text.contains("executionId") && !text.contains(ID), "{text}");
        }
        let request = serde_json::to_value(&asked.input_requests.unwrap()[APPROVAL]).unwrap();
        assert_eq!(request["method"], "elicitation/create");
        let message = request["params"]["message"].as_str().unwrap();
        assert!(message.contains("Tool: tools.gh.issues.create\nCreate an issue?"), "{message}");

        let schema = &request["params"]["requestedSchema"]["properties"][REMEMBER];
        assert_eq!(schema["oneOf"][1]["const"], "always", "{schema}");
        assert_eq!(schema["oneOf"][1]["title"], "Always allow tools.gh.issues.create", "{schema}");
        assert_eq!(schema["default"], "once", "{schema}");

        let answer = |action: &str| InputResponses::from([(APPROVAL.to_owned(), json!({"action": action}))]);
        let remembering = |action: &str, remember: Value| {
            InputResponses::from([(APPROVAL.to_owned(), json!({"action": action, "content": {REMEMBER: remember}}))])
        };
        let (once, always) = (Remember::Once, Remember::Always);
        type Case<'a> = (&'a Principal, String, Option<InputResponses>, Result<(ApprovalAction, Remember), &'a str>);
        let cases: Vec<Case> = vec![
            (&alice, state.clone(), Some(answer("accept")), Ok((ApprovalAction::Accept, once))),
            (&alice, state.clone(), Some(answer("decline")), Ok((ApprovalAction::Decline, once))),
            (&alice, state.clone(), Some(answer("cancel")), Ok((ApprovalAction::Cancel, once))),
            (&alice, state.clone(), Some(remembering("accept", json!("always"))), Ok((ApprovalAction::Accept, always))),
            (&alice, state.clone(), Some(remembering("accept", json!("once"))), Ok((ApprovalAction::Accept, once))),
            // Declining is never remembered.
            (&alice, state.clone(), Some(remembering("decline", json!("always"))), Ok((ApprovalAction::Decline, once))),
            (&alice, state.clone(), Some(remembering("accept", json!("forever"))), Err("no answer")),
            (&alice, state.clone(), Some(remembering("accept", json!(true))), Err("no answer")),
            (&bob, state.clone(), Some(answer("accept")), Err("bad state")),
            (&alice, format!("{state}x"), Some(answer("accept")), Err("bad state")),
            (&alice, state.clone(), None, Err("no answer")),
            (&alice, state.clone(), Some(answer("maybe")), Err("no answer")),
        ];
        for (owner, state, responses, expected) in cases {
            let got = native().answer(owner, &state, responses.as_ref());
            match (got, expected) {
                (Ok(answer), Ok((action, remember))) => {
                    assert_eq!(answer, Answer { execution_id: id.clone(), step: 3, action, remember })
                }
                (Err(NativeError::BadState), Err("bad state")) | (Err(NativeError::NoAnswer), Err("no answer")) => {}
                (got, want) => panic!("{owner:?} {state}: got {got:?}, want {want:?}"),
            }
        }
    }
}
