//! Fresh identifiers and seeds from the system's random source.

use executor_core::ExecutionId;

/// 128 random bits: unguessable, so an execution id alone grants nothing.
pub(crate) fn execution_id() -> Result<ExecutionId, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(ExecutionId::parse(hex::encode(bytes)).expect("hex is a valid id"))
}

pub(crate) fn seed() -> Result<u64, getrandom::Error> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)?;
    Ok(u64::from_le_bytes(bytes))
}
