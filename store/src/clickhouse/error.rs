//! How a ClickHouse failure is classified: a retry may help
//! ([`StoreError::Unavailable`]) or not ([`StoreError::Refused`]).

use crate::StoreError;

/// Server error codes a retry cannot fix: the request, the schema or the credentials
/// are wrong. Any other server error is taken as passing.
pub const REFUSED_CODES: &[u32] = &[
    6,   // CANNOT_PARSE_TEXT
    16,  // NO_SUCH_COLUMN_IN_TABLE
    20,  // NUMBER_OF_COLUMNS_DOESNT_MATCH
    26,  // CANNOT_PARSE_QUOTED_STRING
    27,  // CANNOT_PARSE_INPUT_ASSERTION_FAILED
    32,  // ATTEMPT_TO_READ_AFTER_EOF (a RowBinary row of the wrong shape)
    33,  // CANNOT_READ_ALL_DATA
    36,  // BAD_ARGUMENTS
    38,  // CANNOT_PARSE_DATE
    41,  // CANNOT_PARSE_DATETIME
    42,  // NUMBER_OF_ARGUMENTS_DOESNT_MATCH
    43,  // ILLEGAL_TYPE_OF_ARGUMENT
    44,  // ILLEGAL_COLUMN
    46,  // UNKNOWN_FUNCTION
    47,  // UNKNOWN_IDENTIFIER
    48,  // NOT_IMPLEMENTED
    50,  // UNKNOWN_TYPE
    53,  // TYPE_MISMATCH
    60,  // UNKNOWN_TABLE
    62,  // SYNTAX_ERROR
    69,  // ARGUMENT_OUT_OF_BOUND
    70,  // CANNOT_CONVERT_TYPE
    72,  // CANNOT_PARSE_NUMBER
    73,  // UNKNOWN_FORMAT
    80,  // INCORRECT_QUERY
    81,  // UNKNOWN_DATABASE
    115, // UNKNOWN_SETTING
    117, // INCORRECT_DATA
    131, // TOO_LARGE_STRING_SIZE
    164, // READONLY
    181, // ILLEGAL_FINAL
    184, // ILLEGAL_AGGREGATION
    192, // UNKNOWN_USER
    193, // WRONG_PASSWORD
    194, // REQUIRED_PASSWORD
    195, // IP_ADDRESS_NOT_ALLOWED
    215, // NOT_AN_AGGREGATE
    386, // NO_COMMON_TYPE
    497, // ACCESS_DENIED
    516, // AUTHENTICATION_FAILED
];

/// Maps a client error of operation `what`.
pub(crate) fn ch(what: &'static str) -> impl Fn(clickhouse::error::Error) -> StoreError {
    move |e| classify(what, e)
}

pub(crate) fn classify(what: &str, e: clickhouse::error::Error) -> StoreError {
    use clickhouse::error::Error as E;
    let msg = format!("ClickHouse {what}: {e}");
    match &e {
        E::Network(_) | E::TimedOut | E::Compression(_) | E::Decompression(_) | E::Other(_) => {
            StoreError::Unavailable(msg)
        }
        E::BadResponse(text) => match exception_code(text) {
            Some(code) if REFUSED_CODES.contains(&code) => StoreError::Refused(msg),
            _ => StoreError::Unavailable(msg),
        },
        // Bad parameters, rows that do not decode, schema mismatches: a retry sends
        // or reads the same thing again.
        _ => StoreError::Refused(msg),
    }
}

/// The server's error code in a response: `Code: 60, e.displayText() = ...` (18.x),
/// `Code: 60. DB::Exception: ...` (later), or just `Code: 60` from the header.
pub(crate) fn exception_code(text: &str) -> Option<u32> {
    let rest = &text[text.find("Code: ")? + "Code: ".len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_error_codes_are_read_from_both_formats() {
        let old = "Code: 60, e.displayText() = DB::Exception: Table x.y doesn't exist., e.what() = DB::Exception";
        let new =
            "Code: 241. DB::Exception: Memory limit (total) exceeded. (MEMORY_LIMIT_EXCEEDED)";
        assert_eq!(exception_code(old), Some(60));
        assert_eq!(exception_code(new), Some(241));
        assert_eq!(exception_code("Code: 159"), Some(159));
        assert_eq!(exception_code("502 Bad Gateway"), None);
    }

    #[test]
    fn refused_only_when_a_retry_cannot_help() {
        let e = |s: &str| classify("t", clickhouse::error::Error::BadResponse(s.into()));
        assert!(
            !e("Code: 60, e.displayText() = DB::Exception: Table doesn't exist").is_retryable()
        );
        assert!(!e("Code: 53. DB::Exception: Type mismatch").is_retryable());
        assert!(e("Code: 241. DB::Exception: Memory limit exceeded").is_retryable());
        assert!(e("Code: 252. DB::Exception: Too many parts").is_retryable());
        assert!(e("503 Service Unavailable").is_retryable());
        assert!(classify("t", clickhouse::error::Error::TimedOut).is_retryable());
        assert!(!classify("t", clickhouse::error::Error::NotEnoughData).is_retryable());
    }
}
