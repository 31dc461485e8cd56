//! Fuzzes the expression parser: any input must parse or fail cleanly, and what parses must print back to text
//! that parses to the same tree.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(expr) = cairn_expr::parse(text) {
        let printed = expr.to_string();
        let again = cairn_expr::parse(&printed).expect("printed expressions parse");
        assert!(again.same_as(&expr), "{text:?} printed as {printed:?} reparsed differently");
    }
    let _ = cairn_expr::parse_template_string(text);
});
