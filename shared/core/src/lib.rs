//! The domain of Executor on Lambda.
//!
//! Everything here is pure data and decisions: no I/O, no AWS. The store,
//! sandbox and service crates bring the outside world in and call these types
//! to decide what happens. Time comes in through one injected [`Clock`].

pub mod alarm;
pub mod approval;
pub mod clock;
pub mod connection;
pub mod console;
pub mod event;
pub mod execution;
pub mod grant;
pub mod history;
pub mod idempotency;
pub mod ids;
pub mod journal;
pub mod oauth_client;
pub mod policy;
pub mod principal;
pub mod quota;
pub mod session;
pub mod text;
pub mod time;
pub mod toolkit;

pub use alarm::{AlarmDecision, Timeouts, decide_session_alarm, needs_paused_count};
pub use approval::{ApprovalLinks, LinkStatus, MAX_OPEN_LINKS};
pub use clock::{Clock, ManualClock, SystemClock};
pub use connection::{CONNECTION_RETENTION, OAUTH_STATE_TTL, OAuthState, SourceConnection};
pub use console::{
    CONSOLE_LINK_TTL, CONSOLE_LOGIN_TTL, ConsoleGrant, ConsoleSecret, ConsoleSecretKind, DEFAULT_CONSOLE_SESSION,
    csrf_of_session,
};
pub use event::{EVENT_SOURCE, Event, EventType, MAX_EVENT_TEXT_BYTES, execution_events, session_destroyed};
pub use execution::{
    Actor, Applied, ApprovalAction, Channel, Decider, Execution, ExecutionEvent, ExecutionFailure, ExecutionState,
    ExecutionStatus, HEARTBEAT_EVERY, HEARTBEAT_STALE, RETENTION, TransitionError,
};
pub use grant::{DEFAULT_GRANT_TTL, Grant, GrantedBy, Remember};
pub use history::{
    AllowedBy, CallOutcome, Called, DEFAULT_AUDIT_RETENTION, DEFAULT_RULE, DecidedBy, ExecutionRecord, Happened,
    HistoryAppend, HistoryEntry, KEY_ID_LEN, PendingSummary, Via, args_summary, entries_of, key_id,
};
pub use idempotency::{
    IDEMPOTENCY_WINDOW, IdempotencyKey, IdempotencyKeyError, MAX_IDEMPOTENCY_KEY_CHARS, Receipt, code_sha256,
};
pub use ids::{ExecutionId, GrantId, IdError, SessionId};
pub use journal::{ArgsHash, Journal, JournalStep, NonDeterministicReplay, PendingCall, Replay, StepOutcome};
pub use oauth_client::{
    CALLBACK_PATH, CLIENT_METADATA_PATH, CLIENT_NAME, ClientSite, DEFAULT_REGISTRATION_TTL, OAuthClient,
};
pub use policy::{
    DecisionReason, Effect, PatternError, PolicyAction, PolicyDecision, PolicyRule, SourcePolicy, ToolPattern,
};
pub use principal::{ApiKey, Principal, PrincipalError, TokenHash};
pub use quota::{QuotaExceeded, QuotaLimit, QuotaLimits, Quotas};
pub use session::{ClientInfo, ElicitationMode, Session, SessionError, SessionStatus};
pub use text::{REDACTED, cut_text, redact_secret_fields};
pub use time::Timestamp;
pub use toolkit::{Toolkit, ToolkitDecision, ToolkitName, ToolkitNameError, strictness};
