//! `--since T` of `executor executions list` and `executor audit export`: an
//! RFC 3339 time, or a duration back from now (`30m`, `24h`, `7d`).
//!
//! It is resolved to an instant once, where the command is typed, and sent
//! as that instant: an export asks the store for one page after another, and
//! every page must start from the same point, however long the export takes.

use std::time::Duration;

use executor_core::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinceError {
    #[error(
        "invalid --since {given:?} ({why}): give an RFC 3339 time (2026-12-01T10:00:00Z) or a duration back from \
         now: a whole number and s, m, h or d (30m, 24h, 7d)"
    )]
    Invalid { given: String, why: String },
}

/// `text` as an instant, a duration counting back from `now`.
pub fn parse(text: &str, now: Timestamp) -> Result<Timestamp, SinceError> {
    let invalid = |why: String| SinceError::Invalid { given: text.to_owned(), why };
    let given = text.trim();
    // A duration is digits then one unit; a time starts with a four-digit year and a `-`.
    if given.len() > 4 && given.as_bytes()[4] == b'-' {
        return Timestamp::parse_rfc3339(given).map_err(invalid);
    }
    let back = duration(given).map_err(|why| invalid(why.to_owned()))?;
    // Further back than 1970 is everything there is.
    Ok(Timestamp::from_millis(now.as_millis().saturating_sub(u64::try_from(back.as_millis()).unwrap_or(u64::MAX))))
}

/// `30m`, `24h`, `7d`, `90s`.
fn duration(text: &str) -> Result<Duration, &'static str> {
    let Some(unit) = text.chars().last() else {
        return Err("it is empty");
    };
    let seconds = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return Err("neither a time nor a duration"),
    };
    let number = &text[..text.len() - 1];
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err("a duration is a whole number followed by its unit");
    }
    let count: u64 = number.parse().map_err(|_| "the number is too large")?;
    count.checked_mul(seconds).map(Duration::from_secs).ok_or("the number is too large")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations_back_from_now() {
        let now = Timestamp::parse_rfc3339("2026-12-08T10:00:00Z").unwrap();
        let cases = [
            ("2026-12-01T10:00:00Z", "2026-12-01T10:00:00.000Z"),
            ("2026-12-01T10:00:00.250Z", "2026-12-01T10:00:00.250Z"),
            (" 2026-12-01T11:00:00+01:00 ", "2026-12-01T10:00:00.000Z"),
            ("30m", "2026-12-08T09:30:00.000Z"),
            ("24h", "2026-12-07T10:00:00.000Z"),
            ("7d", "2026-12-01T10:00:00.000Z"),
            ("90s", "2026-12-08T09:58:30.000Z"),
            ("0h", "2026-12-08T10:00:00.000Z"),
            ("100000d", "1970-01-01T00:00:00.000Z"),
        ];
        for (given, expected) in cases {
            assert_eq!(parse(given, now).map(Timestamp::to_rfc3339).as_deref(), Ok(expected), "{given}");
        }
    }

    #[test]
    fn anything_else_says_what_is_accepted() {
        let now = Timestamp::from_millis(1_000_000);
        let cases = [
            ("", "it is empty"),
            ("7", "neither a time nor a duration"),
            ("7w", "neither a time nor a duration"),
            ("yesterday", "neither a time nor a duration"),
            ("h", "a whole number followed by its unit"),
            ("-5m", "a whole number followed by its unit"),
            ("1.5h", "a whole number followed by its unit"),
            ("99999999999999999999d", "too large"),
            ("999999999999999999d", "too large"),
            ("2026-12-01", "a `T` and the time of day must follow the date"),
            ("2026-12-01T10:00:00", "it needs a time zone"),
            ("2026-02-30T10:00:00Z", "there is no such day"),
        ];
        for (given, why) in cases {
            let error = parse(given, now).unwrap_err().to_string();
            assert!(error.starts_with(&format!("invalid --since {given:?} (")), "{given}: {error}");
            assert!(error.contains(why) && error.contains("(30m, 24h, 7d)"), "{given}: {error}");
        }
    }
}
