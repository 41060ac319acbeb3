//! Identifiers that arrive from clients (`Mcp-Session-Id`, `executionId`) and end
//! up inside storage keys, so they are validated once, here.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest identifier accepted; generated ids are far shorter.
pub const MAX_ID_LEN: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{kind} is empty")]
    Empty { kind: &'static str },
    #[error("{kind} is {len} characters long; at most {MAX_ID_LEN} are allowed")]
    TooLong { kind: &'static str, len: usize },
    #[error("{kind} may only contain ASCII letters, digits, '-' and '_'")]
    InvalidCharacter { kind: &'static str },
}

fn validate(kind: &'static str, value: &str) -> Result<(), IdError> {
    if value.is_empty() {
        return Err(IdError::Empty { kind });
    }
    if value.len() > MAX_ID_LEN {
        return Err(IdError::TooLong { kind, len: value.len() });
    }
    if !value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(IdError::InvalidCharacter { kind });
    }
    Ok(())
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn parse(value: impl Into<String>) -> Result<Self, IdError> {
                let value = value.into();
                validate($kind, &value)?;
                Ok(Self(value))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(value: String) -> Result<Self, IdError> {
                Self::parse(value)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// An MCP session (`Mcp-Session-Id`).
    SessionId,
    "session id"
);
id_type!(
    /// One run of agent code, paused or not (`executionId`).
    ExecutionId,
    "execution id"
);
id_type!(
    /// A remembered approval ("always allow"), as `GET /api/grants` lists it.
    GrantId,
    "grant id"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_validated() {
        let long = "a".repeat(MAX_ID_LEN + 1);
        let cases: [(&str, Option<IdError>); 6] = [
            ("abc-DEF_123", None),
            ("", Some(IdError::Empty { kind: "session id" })),
            (&long, Some(IdError::TooLong { kind: "session id", len: MAX_ID_LEN + 1 })),
            ("a#b", Some(IdError::InvalidCharacter { kind: "session id" })),
            ("a b", Some(IdError::InvalidCharacter { kind: "session id" })),
            ("é", Some(IdError::InvalidCharacter { kind: "session id" })),
        ];
        for (input, expected) in cases {
            assert_eq!(SessionId::parse(input).err(), expected, "{input:?}");
        }
    }

    #[test]
    fn deserialising_validates_too() {
        assert!(serde_json::from_str::<ExecutionId>("\"ok_1\"").is_ok());
        assert!(serde_json::from_str::<ExecutionId>("\"EXEC#x\"").is_err());
    }
}
