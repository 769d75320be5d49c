//! XML escaping for text and attribute values we write.
//!
//! `& < > " '` become entity references; tab, newline and carriage return become
//! character references so parsers do not normalise them away (in attributes) or
//! rewrite `\r` (in text); characters XML 1.0 cannot carry at all (other control
//! characters, U+FFFE, U+FFFF) become U+FFFD, so the output always parses.

/// True for characters XML 1.0 allows (`Char` production).
fn xml_char(c: char) -> bool {
    matches!(c, '\u{9}' | '\u{A}' | '\u{D}' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Appends `s` escaped for XML text or a double-quoted attribute value.
pub fn escape_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c if xml_char(c) => out.push(c),
            _ => out.push('\u{FFFD}'),
        }
    }
}

/// `s` escaped for XML text or a double-quoted attribute value.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    escape_into(s, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_specials_and_replaces_what_xml_cannot_hold() {
        assert_eq!(escape("a&b<c>d\"e'f"), "a&amp;b&lt;c&gt;d&quot;e&apos;f");
        assert_eq!(escape("x\ty\nz\r"), "x&#9;y&#10;z&#13;");
        assert_eq!(
            escape("\u{0}\u{1b}\u{FFFE}é😀"),
            "\u{FFFD}\u{FFFD}\u{FFFD}é😀"
        );
    }
}
