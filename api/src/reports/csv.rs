//! Report rows as CSV (RFC 4180) that spreadsheets open as text.
//!
//! Wire format: a header row of the rows' field names (camelCase, in field order),
//! then one line per row, `\r\n` after every line; a cell is quoted when it holds a
//! comma, a semicolon, a quote or a line break: a semicolon too, because
//! spreadsheets in locales whose list separator is `;` (most of Europe) split an
//! unquoted cell there, and the piece after the separator would start a cell of its
//! own (`a;=cmd|...` is two cells, the second a formula).
//! String cells carry values sent by unauthenticated
//! beacons (product codes, catalog ids, tracking ids), so a string cell that a
//! spreadsheet would read as a formula (one starting with `=`, `+`, `-`, `@`, a tab or
//! a carriage return, per OWASP's CSV injection guidance) is prefixed with `'`.

use serde::Serialize;

/// First characters that make a spreadsheet read a cell as a formula (OWASP).
pub const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// Rows as CSV: the header from the first row's field names, RFC 4180 quoting.
///
/// String cells that would start a formula are neutralised with a leading `'`
/// ([`FORMULA_STARTS`]). Numeric cells are written as the JSON numbers they are and
/// never prefixed, so a negative number stays a number (`-1.5`); only string cells
/// come from beacons.
pub fn to_csv<T: Serialize>(rows: &[T]) -> String {
    let mut out = String::new();
    for chunk in CsvChunks::new(rows.iter(), usize::MAX) {
        out.push_str(&chunk);
    }
    out
}

/// CSV text of rows in chunks of about `chunk_bytes` (the header first, with the
/// first row), for streaming a large download; together they are [`to_csv`].
pub struct CsvChunks<I> {
    rows: I,
    names: Option<Vec<String>>,
    chunk_bytes: usize,
}

impl<I> CsvChunks<I> {
    /// Chunks of `rows`.
    pub fn new(rows: I, chunk_bytes: usize) -> Self {
        CsvChunks {
            rows,
            names: None,
            chunk_bytes,
        }
    }

    /// Goes on with the next rows of the same answer (a download read a page at a
    /// time): their lines follow, under the header already written.
    pub fn refill(&mut self, rows: I) {
        self.rows = rows;
    }
}

impl<T: Serialize, I: Iterator<Item = T>> Iterator for CsvChunks<I> {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        let mut out = String::new();
        for r in self.rows.by_ref() {
            let Ok(serde_json::Value::Object(nested)) = serde_json::to_value(&r) else {
                continue;
            };
            let m = flatten(nested);
            let names = self.names.get_or_insert_with(|| {
                let names: Vec<String> = m.keys().cloned().collect();
                let header: Vec<String> = names.iter().map(|n| text(n)).collect();
                out.push_str(&header.join(","));
                out.push_str("\r\n");
                names
            });
            let line: Vec<String> = names
                .iter()
                .map(|n| match m.get(n) {
                    Some(serde_json::Value::String(s)) => text(s),
                    Some(serde_json::Value::Null) | None => String::new(),
                    Some(v) => v.to_string(),
                })
                .collect();
            out.push_str(&line.join(","));
            out.push_str("\r\n");
            if out.len() >= self.chunk_bytes {
                break;
            }
        }
        (!out.is_empty()).then_some(out)
    }
}

/// A row's fields with nested objects spread into `parent.child` columns (the invalid
/// counts by reason: `invalidClicks.knownBot`, ...), in field order.
fn flatten(
    m: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    for (k, v) in m {
        match v {
            serde_json::Value::Object(inner) => {
                for (ik, iv) in flatten(inner) {
                    out.insert(format!("{k}.{ik}"), iv);
                }
            }
            v => {
                out.insert(k, v);
            }
        }
    }
    out
}

/// A string cell: neutralised if it would be a formula, then quoted as needed.
fn text(s: &str) -> String {
    if s.starts_with(FORMULA_STARTS) {
        quote(&format!("'{s}"))
    } else {
        quote(s)
    }
}

fn quote(s: &str) -> String {
    if s.contains([',', ';', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A product code from an unauthenticated beacon that a `;`-separated
    /// spreadsheet would split into a second cell holding a formula (issue 23).
    #[test]
    fn a_separator_in_a_cell_never_starts_a_formula_in_any_locale() {
        #[derive(Serialize)]
        struct Row {
            code: String,
        }
        let csv = to_csv(&[Row {
            code: "a;=cmd|' /C calc'!A0".into(),
        }]);
        assert_eq!(csv, "code\r\n\"a;=cmd|' /C calc'!A0\"\r\n");
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Row {
        product_code: String,
        value: f64,
    }

    fn row(code: &str, value: f64) -> Row {
        Row {
            product_code: code.into(),
            value,
        }
    }

    #[test]
    fn formula_strings_are_text_and_negative_numbers_stay_numbers() {
        let rows = [
            row("=HYPERLINK(\"http://x\",\"y\")", -1.5),
            row("+1", 0.0),
            row("-2", -3.0),
            row("@SUM(A1)", 1.0),
            row("\tx", 1.0),
            row("\rx", 1.0),
            row("a=b", 2.0),
        ];
        assert_eq!(
            to_csv(&rows),
            "productCode,value\r\n\
             \"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\",-1.5\r\n\
             '+1,0.0\r\n\
             '-2,-3.0\r\n\
             '@SUM(A1),1.0\r\n\
             '\tx,1.0\r\n\
             \"'\rx\",1.0\r\n\
             a=b,2.0\r\n"
        );
    }

    #[test]
    fn nested_counts_become_columns_of_their_own() {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Counts {
            known_bot: u64,
            click_window: u64,
        }
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct WithCounts {
            clicks: u64,
            invalid_clicks: Counts,
        }
        let rows = [WithCounts {
            clicks: 1,
            invalid_clicks: Counts {
                known_bot: 2,
                click_window: 99,
            },
        }];
        assert_eq!(
            to_csv(&rows),
            "clicks,invalidClicks.knownBot,invalidClicks.clickWindow\r\n1,2,99\r\n"
        );
    }

    /// Splits one CSV line into its cells, undoing RFC 4180 quoting.
    fn cells(line: &str) -> Vec<String> {
        let (mut out, mut cell, mut quoted, mut chars) =
            (Vec::new(), String::new(), false, line.chars().peekable());
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', true) if chars.peek() == Some(&'"') => {
                    chars.next();
                    cell.push('"');
                }
                ('"', _) => quoted = !quoted,
                (',', false) => out.push(std::mem::take(&mut cell)),
                (c, _) => cell.push(c),
            }
        }
        out.push(cell);
        out
    }

    proptest! {
        #[test]
        fn chunks_join_to_the_whole(codes in proptest::collection::vec("[a-z,\"]{0,6}", 0..40), size in 1usize..64) {
            let rows: Vec<Row> = codes.iter().map(|c| row(c, 1.0)).collect();
            let joined: String = CsvChunks::new(rows.iter(), size).collect();
            prop_assert_eq!(joined, to_csv(&rows));
        }

        #[test]
        fn no_string_cell_opens_as_a_formula(
            codes in proptest::collection::vec("[=+@\\-\t\r\n,\"a-z0-9 ]{0,8}", 1..8),
        ) {
            let rows: Vec<Row> = codes.iter().map(|c| row(c, -1.0)).collect();
            let csv = to_csv(&rows);
            // Records end in "\r\n"; a quoted cell may hold "\r\n" itself, so split on
            // the record ends outside quotes by parsing the whole text.
            let mut records = Vec::new();
            let (mut current, mut quotes) = (String::new(), 0usize);
            for part in csv.split_inclusive("\r\n") {
                current.push_str(part);
                quotes += part.matches('"').count();
                if quotes % 2 == 0 {
                    records.push(current.trim_end_matches("\r\n").to_owned());
                    current.clear();
                }
            }
            prop_assert_eq!(records.len(), rows.len() + 1);
            for (record, code) in records[1..].iter().zip(&codes) {
                let c = cells(record);
                prop_assert_eq!(c.len(), 2);
                prop_assert!(!c[0].starts_with(FORMULA_STARTS), "{:?}", c[0]);
                let original = c[0].strip_prefix('\'').filter(|_| code.starts_with(FORMULA_STARTS));
                prop_assert_eq!(original.unwrap_or(&c[0]), code.as_str());
                prop_assert_eq!(c[1].as_str(), "-1.0", "numbers are never prefixed");
            }
        }
    }
}
