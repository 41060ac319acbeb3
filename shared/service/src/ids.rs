//! Fresh identifiers and seeds from the system's random source.

use executor_core::{ExecutionId, SessionId};

/// 128 random bits, hex: unguessable, so an id alone grants nothing.
fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

pub(crate) fn execution_id() -> Result<ExecutionId, getrandom::Error> {
    Ok(ExecutionId::parse(random_hex()?).expect("hex is a valid id"))
}

pub(crate) fn session_id() -> Result<SessionId, getrandom::Error> {
    Ok(SessionId::parse(random_hex()?).expect("hex is a valid id"))
}

pub(crate) fn seed() -> Result<u64, getrandom::Error> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)?;
    Ok(u64::from_le_bytes(bytes))
}
