//! `bubble-bench`: benchmark scenarios.

fn main() {}
