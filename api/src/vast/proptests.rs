//! Property tests of building and injection.
