use std::fmt;

/// What a store call can fail with. `what` names the record ("session",
/// "execution", "API key") so messages make sense on their own.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Absent, expired, or owned by someone else: callers cannot tell which.
    #[error("{what} not found")]
    NotFound { what: &'static str },
    #[error("{what} already exists; use a new id")]
    AlreadyExists { what: &'static str },
    /// The version the caller read is no longer the stored one.
    #[error("{what} was changed by another request since it was read; read it again and retry")]
    Conflict { what: &'static str },
    #[error("{what} is {size} bytes, over the storage limit of {limit} bytes; {advice}")]
    TooLarge { what: &'static str, size: usize, limit: usize, advice: &'static str },
    #[error("stored {what} cannot be read ({detail}); it was written by an incompatible version or damaged")]
    Corrupt { what: &'static str, detail: String },
    #[error("storage backend failed to {operation}: {detail}")]
    Backend { operation: &'static str, detail: String },
}

impl StoreError {
    /// A pause not stored because its owner holds a live grant for a call it
    /// waits on (a write with [`crate::Ungranted`]): that call may run.
    pub fn is_grant_held(&self) -> bool {
        matches!(self, Self::AlreadyExists { what } if *what == crate::records::GRANT)
    }

    /// What such a write answers: [`Self::is_grant_held`].
    pub fn grant_held() -> Self {
        Self::AlreadyExists { what: crate::records::GRANT }
    }

    pub fn backend(operation: &'static str, error: impl fmt::Display) -> Self {
        Self::Backend { operation, detail: error.to_string() }
    }

    pub(crate) fn corrupt(what: &'static str, detail: impl fmt::Display) -> Self {
        Self::Corrupt { what, detail: detail.to_string() }
    }
}
