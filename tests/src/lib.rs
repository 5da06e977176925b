//! Helpers for black-box tests of the `bubble` binary.
