//! Text a person decides on shows every character it holds. Bidirectional
//! controls (U+202E can make `rm -rf /` read as something else), zero-width
//! and other invisible format characters, and control characters are written
//! as visible escapes (`\u{202E}`), so what is approved is what is displayed.

use std::fmt::Write;

/// Whether `c` changes how text around it displays, or displays as nothing.
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{0000}'..='\u{0008}' | '\u{000B}'..='\u{001F}' | '\u{007F}'..='\u{009F}' // controls but \t and \n
        | '\u{00AD}'                      // soft hyphen
        | '\u{034F}'                      // combining grapheme joiner
        // prepended concatenation marks (Arabic, Syriac, Kaithi): they join the digits after them
        | '\u{0600}'..='\u{0605}' | '\u{06DD}' | '\u{070F}' | '\u{0890}' | '\u{0891}' | '\u{08E2}'
        | '\u{110BD}' | '\u{110CD}'
        | '\u{061C}'                      // Arabic letter mark
        | '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' // Hangul fillers
        | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}'         // Mongolian selectors and vowel separator
        | '\u{200B}'..='\u{200F}'         // zero-width space/joiners, LRM, RLM
        | '\u{2028}'..='\u{202E}'         // line/paragraph separators, bidi embeddings and overrides
        | '\u{2060}'..='\u{206F}'         // word joiner, invisible operators, bidi isolates, deprecated formats
        | '\u{FE00}'..='\u{FE0F}'         // variation selectors
        | '\u{FEFF}'                      // zero-width no-break space
        | '\u{FFF0}'..='\u{FFFB}'         // reserved as invisible, interlinear annotations
        | '\u{13430}'..='\u{1343F}'       // Egyptian hieroglyph format controls
        | '\u{1BCA0}'..='\u{1BCA3}'       // shorthand format controls
        | '\u{1D173}'..='\u{1D17A}'       // musical formatting
        | '\u{E0000}'..='\u{E0FFF}'       // tags and supplementary variation selectors
    )
}

/// `text` with every invisible or reordering character as a `\u{XXXX}` escape.
pub(crate) fn escape_invisible(text: &str) -> String {
    if !text.chars().any(is_invisible) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_invisible(c) {
            let _ = write!(out, "\\u{{{:04X}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_characters_become_escapes() {
        let cases = [
            ("plain text, émoji 🎉, 日本語", "plain text, émoji 🎉, 日本語"),
            ("tab\tand\nnewline stay", "tab\tand\nnewline stay"),
            ("a\u{202E}fdp.exe", "a\\u{202E}fdp.exe"),
            ("\u{2066}x\u{2069}", "\\u{2066}x\\u{2069}"),
            ("zero\u{200B}width\u{FEFF}", "zero\\u{200B}width\\u{FEFF}"),
            ("\u{200E}\u{200F}\u{061C}", "\\u{200E}\\u{200F}\\u{061C}"),
            ("bell\u{7}", "bell\\u{0007}"),
            ("tag\u{E0041}", "tag\\u{E0041}"),
            ("soft\u{AD}hyphen", "soft\\u{00AD}hyphen"),
        ];
        for (input, expected) in cases {
            assert_eq!(escape_invisible(input), expected, "{input:?}");
        }
    }

    /// Checked against Unicode's own data: every control but tab and
    /// newline, every format character (bidi controls, zero-width ones),
    /// line and paragraph separators, and every default-ignorable code point
    /// (what renders as nothing: fillers, selectors, tags) is escaped.
    #[test]
    fn every_character_unicode_calls_invisible_is_escaped() {
        use icu_properties::props::{DefaultIgnorableCodePoint, GeneralCategory};
        use icu_properties::{CodePointMapData, CodePointSetData};
        let category = CodePointMapData::<GeneralCategory>::new();
        let ignorable = CodePointSetData::new::<DefaultIgnorableCodePoint>();
        let missed: Vec<String> = (0..=0x10FFFF_u32)
            .filter_map(char::from_u32)
            .filter(|&c| c != '\t' && c != '\n')
            .filter(|&c| {
                let hidden = matches!(
                    category.get(c),
                    GeneralCategory::Control
                        | GeneralCategory::Format
                        | GeneralCategory::LineSeparator
                        | GeneralCategory::ParagraphSeparator
                );
                (hidden || ignorable.contains(c)) && !is_invisible(c)
            })
            .map(|c| format!("U+{:04X} {:?}", c as u32, category.get(c)))
            .collect();
        assert!(missed.is_empty(), "shown as they are: {missed:?}");
    }
}
