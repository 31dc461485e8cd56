//! Fuzzes expression evaluation under small budgets (64 KiB per value, 1 MiB in all, 100,000 steps, depth 64):
//! any text must evaluate or fail with an error, never panic, and stay within its budgets, so no input makes
//! evaluation allocate or loop without bound. The environment and the property are shared with the
//! `budget_properties` property test of `cairn-eval`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/eval/tests/hostile/mod.rs"]
mod hostile;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // As an expression (the brackets added), and as a template string as written.
    hostile::check_evaluation(&format!("[{text}]"));
    hostile::check_evaluation(text);
});
