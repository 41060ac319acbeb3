//! Text shown to people (approval pages, approval messages): bounded in size.

/// At most `limit` bytes, cut at a character boundary, saying how much is left out.
pub fn cut_text(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… ({} more bytes not shown)", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::cut_text;

    #[test]
    fn cuts_at_a_character_boundary_and_says_how_much() {
        let cases = [
            ("short", 10, "short"),
            ("exactly", 7, "exactly"),
            ("abcdef", 3, "abc\n… (3 more bytes not shown)"),
            // "é" is two bytes: a cut inside it moves back before it.
            ("aéb", 2, "a\n… (3 more bytes not shown)"),
        ];
        for (text, limit, expected) in cases {
            assert_eq!(cut_text(text, limit), expected, "{text:?} at {limit}");
        }
    }
}
