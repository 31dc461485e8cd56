//! Comparison functions: deep `equals`, and `less`, `lessOrEquals`, `greater`, `greaterOrEquals` over numbers
//! (integers and floats mixed) or strings (culture-aware ordering, see [`compare_strings`]).

use std::cmp::Ordering;

use super::{Args, FunctionDef};
use crate::error::FnError;
use crate::eval::Evaluator;
use crate::value::Value;

pub(super) const FUNCTIONS: &[FunctionDef] = &[
    FunctionDef::eager("equals", 2, Some(2), equals),
    FunctionDef::eager("less", 2, Some(2), |_, args| {
        compare(&args).map(|o| Value::Bool(o == Ordering::Less))
    }),
    FunctionDef::eager("lessOrEquals", 2, Some(2), |_, args| {
        compare(&args).map(|o| Value::Bool(o != Ordering::Greater))
    }),
    FunctionDef::eager("greater", 2, Some(2), |_, args| {
        compare(&args).map(|o| Value::Bool(o == Ordering::Greater))
    }),
    FunctionDef::eager("greaterOrEquals", 2, Some(2), |_, args| {
        compare(&args).map(|o| Value::Bool(o != Ordering::Less))
    }),
];

/// Deep equality: case-sensitive strings, `1 == 1.0`, object key order ignored ([`Value`]'s `PartialEq`).
fn equals(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let values = args.as_slice();
    Ok(Value::Bool(values[0] == values[1]))
}

fn compare(args: &Args) -> Result<Ordering, FnError> {
    let values = args.as_slice();
    let ordering = match (&values[0], &values[1]) {
        (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
        (Value::Int(a), Value::Float(b)) => (*a as f64).partial_cmp(b),
        (Value::Float(a), Value::Int(b)) => a.partial_cmp(&(*b as f64)),
        (Value::Float(a), Value::Float(b)) => a.partial_cmp(b),
        (Value::String(a), Value::String(b)) => Some(compare_strings(a, b)),
        (a, b) => {
            return Err(FnError::msg(format!(
                "the arguments must be both numbers or both strings, but the provided values are of type '{}' and '{}'.",
                a.value_type(),
                b.value_type()
            )));
        }
    };
    ordering.ok_or_else(|| FnError::msg("the numbers cannot be compared."))
}

/// The collation weights of one character: (primary, secondary, tertiary). A primary of 0 means the character is
/// ignored until the last tie-break.
type Weights = (u32, u32, u32);

/// Punctuation and symbols in the order the .NET (Windows NLS / ICU root) collation puts them, before digits and
/// letters. `-` and `'` are missing on purpose: NLS "word sort" ignores them at the first levels.
const SYMBOL_ORDER: &str = "\t\n\u{b}\u{c}\r _,;:!?.\"()[]{}@*/\\&#%`^+<=>|~$";

const DIGIT_BASE: u32 = 0x100;
const LETTER_BASE: u32 = 0x200;
const OTHER_BASE: u32 = 0x1_0000;

/// Base letters of U+00C0..=U+00FF (Latin-1 letters with diacritics); `*` marks the two symbols in the block.
const LATIN1_BASE: &[u8; 64] = b"aaaaaaaceeeeiiiidnooooo*ouuuuytsaaaaaaaceeeeiiiidnooooo*ouuuuyty";

fn weights(c: char) -> Weights {
    if c == '-' || c == '\'' || c == '\u{ad}' || c.is_control() && !c.is_ascii_whitespace() {
        return (0, 0, 0);
    }
    if let Some(i) = SYMBOL_ORDER.find(c) {
        return (1 + i as u32, 0, 0);
    }
    if let Some(d) = c.to_digit(10).filter(|_| c.is_ascii_digit()) {
        return (DIGIT_BASE + d, 0, 0);
    }
    if c.is_ascii_alphabetic() {
        let lower = c.to_ascii_lowercase();
        return (
            LETTER_BASE + u32::from(lower as u8 - b'a'),
            0,
            u32::from(c.is_ascii_uppercase()),
        );
    }
    let code = u32::from(c);
    if (0xC0..=0xFF).contains(&code) {
        let base = LATIN1_BASE[(code - 0xC0) as usize];
        if base != b'*' {
            let upper = code < 0xE0 && code != 0xDF;
            return (LETTER_BASE + u32::from(base - b'a'), code, u32::from(upper));
        }
    }
    if c.is_alphanumeric() {
        // Other scripts: after Latin, in code point order, case folded first.
        let lower = c.to_lowercase().next().unwrap_or(c);
        return (OTHER_BASE + u32::from(lower), 0, u32::from(lower != c));
    }
    // Other symbols sort with the punctuation, after the ASCII ones.
    (1 + SYMBOL_ORDER.len() as u32 + code, 0, 0)
}

/// The characters the first levels skip (`coop` sorts before `co-op`).
fn ignored(s: &str) -> impl Iterator<Item = char> + '_ {
    s.chars().filter(|c| weights(*c).0 == 0)
}

/// Compares strings the way ARM's culture-aware comparison does (not ordinal): the docs tables say
/// `less('A', 'a')` is false and `greater('A', 'a')` true, i.e. letters compare case-insensitively first and lower
/// case sorts before upper case only to break ties. Levels: base characters (symbols < digits < letters), then
/// diacritics, then case, then the ignored characters, and finally ordinal order so distinct strings never tie.
pub(super) fn compare_strings(a: &str, b: &str) -> Ordering {
    let wa: Vec<Weights> = a.chars().map(weights).collect();
    let wb: Vec<Weights> = b.chars().map(weights).collect();
    let level = |w: &[Weights], pick: fn(&Weights) -> u32| -> Vec<u32> {
        w.iter().filter(|x| x.0 != 0).map(pick).collect()
    };
    level(&wa, |w| w.0)
        .cmp(&level(&wb, |w| w.0))
        .then_with(|| level(&wa, |w| w.1).cmp(&level(&wb, |w| w.1)))
        .then_with(|| level(&wa, |w| w.2).cmp(&level(&wb, |w| w.2)))
        .then_with(|| ignored(a).cmp(ignored(b)))
        .then_with(|| a.encode_utf16().cmp(b.encode_utf16()))
}

#[cfg(test)]
mod tests {
    use super::compare_strings;
    use crate::env::SimpleEnvironment;
    use crate::functions::test_util::{check, check_err, eval_in};
    use crate::value::Value;
    use proptest::prelude::*;
    use serde_json::json;
    use std::cmp::Ordering;

    #[track_caller]
    fn check_with(params: serde_json::Value, expr: &str, expected: serde_json::Value) {
        let mut env = SimpleEnvironment::default();
        if let Value::Object(o) = Value::from(params) {
            env.parameters = o;
        }
        let result = eval_in(&env, expr).unwrap_or_else(|e| panic!("{expr} failed: {e}"));
        assert_eq!(
            result,
            Value::from(expected.clone()),
            "{expr} gave {:?}",
            result.to_json()
        );
    }

    #[test]
    fn equals_docs_examples() {
        // functions/comparison-equals.json (pre-2024 sample values) and logical-not-equals.json / logical-if.json.
        check("equals(1, 1)", json!(true));
        check("equals('a', 'a')", json!(true));
        check(
            "equals(createArray('a', 'b'), createArray('a', 'b'))",
            json!(true),
        );
        check_with(
            json!({"first": {"a": "b"}, "second": {"a": "b"}}),
            "equals(parameters('first'), parameters('second'))",
            json!(true),
        );
        check("not(equals(1, 2))", json!(true));
        check("if(equals('a', 'a'), 'yes', 'no')", json!("yes"));
        check("if(equals('a', 'b'), 'yes', 'no')", json!("no"));
    }

    #[test]
    fn equals_is_deep_and_case_sensitive() {
        check("equals('demo', 'Demo')", json!(false));
        check("equals(123, 456)", json!(false));
        check("equals(1, '1')", json!(false));
        check("equals(null(), null())", json!(true));
        check("equals(createArray(1, 2), createArray(2, 1))", json!(false));
        check_with(
            json!({"x": {"a": 1, "b": [1, {"c": true}]}, "y": {"b": [1, {"c": true}], "a": 1}}),
            "equals(parameters('x'), parameters('y'))",
            json!(true),
        );
        check_with(json!({"f": 1.0}), "equals(1, parameters('f'))", json!(true));
        check_err("equals(1)", "equals");
    }

    #[test]
    fn ordering_docs_examples() {
        // functions/comparison-{less,lessorequals,greater,greaterorequals}.json: ints 1 vs 2, strings 'A' vs 'a'.
        check("less(1, 2)", json!(true));
        check("less('A', 'a')", json!(false));
        check("lessOrEquals(1, 2)", json!(true));
        check("lessOrEquals('A', 'a')", json!(false));
        check("greater(1, 2)", json!(false));
        check("greater('A', 'a')", json!(true));
        check("greaterOrEquals(1, 2)", json!(false));
        check("greaterOrEquals('A', 'a')", json!(true));
    }

    #[test]
    fn comparisons_evaluation_case() {
        // evaluation/Comparisons_are_evaluated_correctly.json (the comparison functions).
        check("less(123, 456)", json!(true));
        check("lessOrEquals(123, 456)", json!(true));
        check("greater(123, 456)", json!(false));
        check("greaterOrEquals(123, 456)", json!(false));
        check("equals(123, 456)", json!(false));
    }

    #[test]
    fn pieces_of_lambda_evaluation_cases() {
        // evaluation/Issue8782.json: greater(property2, 0) and a case-folded equals.
        check("greater(1, 0)", json!(true));
        check("greater(0, 0)", json!(false));
        check("equals(toLower('Test'), toLower('test'))", json!(true));
        // evaluation/List_comprehension_function_evaluation_works.json sorts with less(): -13 3 5 8 10, abc def ghi.
        check("less(-13, 3)", json!(true));
        check("less(8, 5)", json!(false));
        check("less('abc', 'def')", json!(true));
        check("less('ghi', 'def')", json!(false));
        check("greater(3, 2)", json!(true));
    }

    #[test]
    fn numbers_mix_ints_and_floats() {
        check_with(json!({"f": 1.5}), "less(1, parameters('f'))", json!(true));
        check_with(
            json!({"f": 1.5}),
            "greater(parameters('f'), 2)",
            json!(false),
        );
        check_with(
            json!({"f": 2.0}),
            "greaterOrEquals(parameters('f'), 2)",
            json!(true),
        );
        check("lessOrEquals(5, 5)", json!(true));
        check("less(5, 5)", json!(false));
        check(
            "less(-9223372036854775808, 9223372036854775807)",
            json!(true),
        );
    }

    #[test]
    fn strings_use_culture_order() {
        check("less('a', 'B')", json!(true));
        check("less('apple', 'Banana')", json!(true));
        check("less('a', 'b')", json!(true));
        check("greater('abc', 'ab')", json!(true));
        check("less('1', 'a')", json!(true));
        check("less('_', '1')", json!(true));
        check("less('resume', 'résumé')", json!(true));
        check("less('résumé', 'resumf')", json!(true));
        check("greaterOrEquals('same', 'same')", json!(true));
        check("lessOrEquals('same', 'same')", json!(true));
        check("less('co-op', 'coop')", json!(false));
        check("less('coop', 'cop')", json!(true));
    }

    #[test]
    fn mixed_types_are_errors() {
        check_err("less(1, 'a')", "both numbers or both strings");
        check_err("greater(true(), false())", "'Boolean' and 'Boolean'");
        check_err(
            "lessOrEquals(createArray(), createArray())",
            "both numbers or both strings",
        );
        check_err("greaterOrEquals(null(), 1)", "both numbers or both strings");
    }

    proptest! {
        #[test]
        fn string_order_is_a_total_order(a in "\\PC{0,8}", b in "\\PC{0,8}", c in "\\PC{0,8}") {
            prop_assert_eq!(compare_strings(&a, &b), compare_strings(&b, &a).reverse());
            prop_assert_eq!(compare_strings(&a, &b) == Ordering::Equal, a == b);
            if compare_strings(&a, &b) != Ordering::Greater && compare_strings(&b, &c) != Ordering::Greater {
                prop_assert_ne!(compare_strings(&a, &c), Ordering::Greater);
            }
        }
    }
}
