//! `bubble`: the native server.

fn main() {}
