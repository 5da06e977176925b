//! Bubble's engine for JavaScript.
