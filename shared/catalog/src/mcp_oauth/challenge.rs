//! Step 1: what a server's 401 says, read from its `WWW-Authenticate`
//! headers (RFC 9110 11.6.1); the `Bearer` challenge's parameters.

/// One challenge of a `WWW-Authenticate` header: its scheme, and its
/// parameters with lower-cased names (a token68 is left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub scheme: String,
    pub params: Vec<(String, String)>,
}

impl Challenge {
    fn param(&self, name: &str) -> Option<&str> {
        self.params.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Every challenge in `headers` (each a `WWW-Authenticate` value), per RFC
/// 9110 11.6.1: challenges and their parameters are both comma-separated;
/// a name followed by `=` is a parameter, any other word starts a challenge.
/// Whatever does not parse is skipped, never an error.
pub fn challenges<'a>(headers: impl IntoIterator<Item = &'a str>) -> Vec<Challenge> {
    let mut found: Vec<Challenge> = Vec::new();
    for header in headers {
        let mut rest = header;
        loop {
            rest = rest.trim_start_matches(|c: char| c == ',' || c.is_ascii_whitespace());
            let end = rest.find(|c: char| c == ',' || c == '=' || c == '"' || c.is_ascii_whitespace());
            let (word, after) = rest.split_at(end.unwrap_or(rest.len()));
            if word.is_empty() {
                match after.chars().next() {
                    // A stray `=` or quote: skip to the next comma.
                    Some(_) => {
                        rest = after.find(',').map_or("", |i| &after[i..]);
                        continue;
                    }
                    None => break,
                }
            }
            let after_spaces = after.trim_start_matches(|c: char| c.is_ascii_whitespace());
            let Some(value_part) = after_spaces.strip_prefix('=') else {
                found.push(Challenge { scheme: word.to_owned(), params: Vec::new() });
                rest = after;
                continue;
            };
            let value_part = value_part.trim_start_matches(|c: char| c.is_ascii_whitespace());
            let (value, remaining) = match value_part.strip_prefix('"') {
                Some(quoted) => unquote(quoted),
                None => {
                    let end = value_part.find(|c: char| c == ',' || c.is_ascii_whitespace());
                    let (value, remaining) = value_part.split_at(end.unwrap_or(value_part.len()));
                    // `word=` then a comma or the end, or `==`: a token68 (`abc==`), not a parameter.
                    if value.is_empty() || value.starts_with('=') {
                        rest = remaining.trim_start_matches('=');
                        continue;
                    }
                    (value.to_owned(), remaining)
                }
            };
            if let Some(challenge) = found.last_mut() {
                challenge.params.push((word.to_ascii_lowercase(), value));
            }
            rest = remaining;
        }
    }
    found
}

/// The text of a quoted string (after its opening quote) and what follows
/// it; an unterminated one runs to the end.
fn unquote(quoted: &str) -> (String, &str) {
    let mut value = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (value, &quoted[i + 1..]),
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    value.push(escaped);
                }
            }
            c => value.push(c),
        }
    }
    (value, "")
}

/// What a server's 401 says about its authorization: where its metadata is,
/// and the scopes the request needed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
}

impl BearerChallenge {
    /// The `Bearer` challenge among `headers`' challenges.
    pub fn from_headers<'a>(headers: impl IntoIterator<Item = &'a str>) -> Self {
        let all = challenges(headers);
        let bearer = all.iter().find(|c| c.scheme.eq_ignore_ascii_case("bearer"));
        Self {
            resource_metadata: bearer.and_then(|c| c.param("resource_metadata")).map(str::to_owned),
            scope: bearer.and_then(|c| c.param("scope")).map(str::to_owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A challenge as (scheme, parameters).
    type Parsed = (String, Vec<(String, String)>);

    fn parsed(headers: &[&str]) -> Vec<Parsed> {
        challenges(headers.iter().copied()).into_iter().map(|c| (c.scheme, c.params)).collect()
    }

    fn owned(scheme: &str, params: &[(&str, &str)]) -> Parsed {
        (scheme.into(), params.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect())
    }

    #[test]
    fn challenges_are_read_however_they_are_written() {
        let meta = "https://mcp.example/.well-known/oauth-protected-resource";
        let cases: Vec<(Vec<&str>, Vec<Parsed>)> = vec![
            (
                vec![r#"Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource""#],
                vec![owned("Bearer", &[("resource_metadata", meta)])],
            ),
            (
                vec!["Bearer resource_metadata=https://mcp.example/.well-known/oauth-protected-resource"],
                vec![owned("Bearer", &[("resource_metadata", meta)])],
            ),
            (
                vec![
                    r#"Bearer realm="mcp", error="invalid_token", error_description="The token, \"it\" expired", scope="a b""#,
                ],
                vec![owned(
                    "Bearer",
                    &[
                        ("realm", "mcp"),
                        ("error", "invalid_token"),
                        ("error_description", "The token, \"it\" expired"),
                        ("scope", "a b"),
                    ],
                )],
            ),
            (
                vec![r#"Basic realm="x", Bearer resource_metadata="https://m/x""#],
                vec![owned("Basic", &[("realm", "x")]), owned("Bearer", &[("resource_metadata", "https://m/x")])],
            ),
            (
                vec![r#"Basic realm="x""#, r#"bearer Resource_Metadata = "https://m/x" , scope=read"#],
                vec![
                    owned("Basic", &[("realm", "x")]),
                    owned("bearer", &[("resource_metadata", "https://m/x"), ("scope", "read")]),
                ],
            ),
            (vec!["Negotiate abc123==, Bearer"], vec![owned("Negotiate", &[]), owned("Bearer", &[])]),
            (vec!["Bearer"], vec![owned("Bearer", &[])]),
            (vec!["", " , ,"], vec![]),
            (vec![r#"Bearer realm="unterminated"#], vec![owned("Bearer", &[("realm", "unterminated")])]),
            (vec![r#"=x, "quoted", Bearer a=1"#], vec![owned("Bearer", &[("a", "1")])]),
        ];
        for (headers, expected) in cases {
            assert_eq!(parsed(&headers), expected, "{headers:?}");
        }
        let bearer =
            BearerChallenge::from_headers([r#"Basic realm="x", Bearer resource_metadata="/prm", scope="a b""#]);
        assert_eq!(bearer, BearerChallenge { resource_metadata: Some("/prm".into()), scope: Some("a b".into()) });
        assert_eq!(BearerChallenge::from_headers([r#"Basic resource_metadata="/prm""#]), BearerChallenge::default());
    }

    #[test]
    fn any_header_text_parses_without_panicking() {
        // A small deterministic generator over the characters that matter to the grammar.
        let alphabet: Vec<char> = " ,=\"\\\tBearer_metadta:/é".chars().collect();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let mut text = String::new();
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 40) as usize;
            for _ in 0..len {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                text.push(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            for challenge in challenges([text.as_str()]) {
                assert!(!challenge.scheme.is_empty(), "{text:?}");
                assert!(challenge.params.iter().all(|(n, _)| !n.is_empty()), "{text:?}");
            }
        }
    }
}
