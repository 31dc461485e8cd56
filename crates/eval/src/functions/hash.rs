//! Hash-based identifiers: `uniqueString` (Microsoft's 64-bit MurmurHash variant, 13 base32 characters), `guid`
//! (name-based UUID v5 in ARM's namespace) and `newGuid` (a fresh GUID, only in parameter default values).

use uuid::Uuid;

use super::{Args, FunctionDef};
use crate::error::{EvalError, FnError};
use crate::eval::Evaluator;
use crate::value::Value;

pub(super) const FUNCTIONS: &[FunctionDef] = &[
    FunctionDef::eager("uniqueString", 1, None, unique_string),
    FunctionDef::eager("guid", 1, None, guid),
    FunctionDef::eager("newGuid", 0, Some(0), new_guid),
];

/// The namespace of `guid()`'s name-based UUIDs (`ARMNamespaceGuid`).
const ARM_GUID_NAMESPACE: Uuid = Uuid::from_u128(0x11fb06fb_712d_4ddd_98c7_e71bbd588830);

/// The base32 alphabet of `uniqueString` (RFC 4648 letters and digits, lower case).
const UNIQUE_STRING_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The arguments, all strings, joined with `-` (how both hash functions build their input).
fn joined_strings(args: &Args) -> Result<String, FnError> {
    let mut parts = Vec::with_capacity(args.len());
    for i in 0..args.len() {
        parts.push(args.string(i)?);
    }
    Ok(parts.join("-"))
}

fn unique_string(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let input = joined_strings(&args)?;
    Ok(Value::String(unique_string_of(&input)))
}

/// `uniqueString` of an already joined input.
pub(crate) fn unique_string_of(input: &str) -> String {
    let mut hash = murmur_hash64(input.as_bytes());
    let mut out = String::with_capacity(13);
    for _ in 0..13 {
        out.push(UNIQUE_STRING_ALPHABET[(hash >> 59) as usize] as char);
        hash <<= 5;
    }
    out
}

/// Microsoft's MurmurHash64 variant (two 32-bit lanes, seed 0), as ARM uses it for `uniqueString`.
fn murmur_hash64(data: &[u8]) -> u64 {
    const C1: u32 = 0x239b_961b;
    const C2: u32 = 0xab0e_9789;
    let (mut h1, mut h2) = (0u32, 0u32);
    let le = |bytes: &[u8]| {
        bytes
            .iter()
            .rev()
            .fold(0u32, |acc, &b| (acc << 8) | u32::from(b))
    };
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let k1 = le(&block[..4])
            .wrapping_mul(C1)
            .rotate_left(15)
            .wrapping_mul(C2);
        h1 = (h1 ^ k1)
            .rotate_left(19)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x561c_cd1b);
        let k2 = le(&block[4..])
            .wrapping_mul(C2)
            .rotate_left(17)
            .wrapping_mul(C1);
        h2 = (h2 ^ k2)
            .rotate_left(13)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x0bca_a747);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let (first, second) = tail.split_at(tail.len().min(4));
        h1 ^= le(first).wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        if !second.is_empty() {
            h2 ^= le(second).wrapping_mul(C2).rotate_left(17).wrapping_mul(C1);
        }
    }
    // The length is mixed in as a 32-bit value, as the original does.
    let len = data.len() as u32;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (u64::from(h2) << 32) | u64::from(h1)
}

fn fmix(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

fn guid(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let input = joined_strings(&args)?;
    Ok(Value::String(guid_of(&input)))
}

/// `guid` of an already joined input: RFC 4122 v5 (SHA-1), lower-case canonical text.
pub(crate) fn guid_of(input: &str) -> String {
    Uuid::new_v5(&ARM_GUID_NAMESPACE, input.as_bytes())
        .hyphenated()
        .to_string()
}

fn new_guid(ev: &mut Evaluator<'_>, _: Args) -> Result<Value, FnError> {
    if !ev.env().allows_nondeterministic() {
        // ARM reports this as a template error of its own, not as a failed function call.
        return Err(FnError::from(EvalError::expression(
            "The template function 'newGuid' is not expected at this location. The function can only be used with parameter default values. Please see https://aka.ms/arm-template-expressions for usage details.",
        )));
    }
    Ok(Value::String(ev.env().new_guid()))
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use serde_json::json;

    use super::{guid_of, unique_string_of};
    use crate::env::{DeploymentFacts, Environment, RuntimeCall, SimpleEnvironment, UserFunction};
    use crate::error::EvalError;
    use crate::eval::Evaluator;
    use crate::functions::test_util::{check, check_err};
    use crate::value::Value;

    /// `'it''s'`: an ARM string literal.
    fn literal(s: &str) -> String {
        format!("'{}'", s.replace('\'', "''"))
    }

    fn call(function: &str, args: &[String]) -> String {
        let args: Vec<String> = args.iter().map(|a| literal(a)).collect();
        format!("{function}({})", args.join(", "))
    }

    /// Every vector of the shared conformance file, through the evaluator; excluded entries are left out.
    #[test]
    fn conformance_hash_vectors() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/conformance/hashes.json"
        );
        let text = std::fs::read_to_string(path).expect("hashes.json is readable");
        let data: serde_json::Value = serde_json::from_str(&text).expect("hashes.json is JSON");
        let excluded: Vec<(String, Vec<String>)> = data["excluded"]
            .as_array()
            .expect("excluded list")
            .iter()
            .map(|e| {
                (
                    e["function"].as_str().unwrap_or_default().to_string(),
                    serde_json::from_value(e["args"].clone()).expect("string args"),
                )
            })
            .collect();
        let mut checked = 0;
        for function in ["uniqueString", "guid"] {
            for vector in data[function].as_array().expect("vector list") {
                let args: Vec<String> =
                    serde_json::from_value(vector["args"].clone()).expect("string args");
                if excluded.contains(&(function.to_string(), args.clone())) {
                    continue;
                }
                let expected = vector["expected"].as_str().expect("expected value");
                check(&call(function, &args), json!(expected));
                checked += 1;
            }
        }
        assert!(checked >= 8, "only {checked} vectors were checked");
    }

    #[test]
    fn unique_string_reference_table() {
        check("uniqueString('test')", json!("rbgf3xv4ufgzg"));
        check("uniqueString('hello', 'world')", json!("a7wkljktk6wne"));
        check("uniqueString('abc')", json!("cgtzqvhu4i23s"));
        check("uniqueString('foo', 'bar', 'baz')", json!("xzi4ioaxtmth4"));
        check("uniqueString('a', 'b', 'c')", json!("gmauwwrtcq2xa"));
        check(
            "uniqueString('/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/my-rg')",
            json!("bmg7c6xu4tw46"),
        );
        check(
            "uniqueString('/subscriptions/00000000-0000-0000-0000-000000000000', 'resource-id')",
            json!("cwvxuqg24sifi"),
        );
        check("uniqueString('')", json!("aaaaaaaaaaaaa"));
        // Arguments are joined with '-' before hashing.
        assert_eq!(unique_string_of("a-b-c"), "gmauwwrtcq2xa");
        check("UNIQUESTRING('test')", json!("rbgf3xv4ufgzg"));
    }

    #[test]
    fn unique_string_is_13_base32_characters_for_every_tail_length() {
        for len in 0..40 {
            let s = unique_string_of(&"x".repeat(len));
            assert_eq!(s.len(), 13);
            assert!(
                s.bytes()
                    .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b))
            );
        }
        assert_ne!(unique_string_of("x"), unique_string_of("xx"));
    }

    #[test]
    fn guid_reference_table() {
        check(
            "guid('test')",
            json!("d6a5baf1-8b9b-542a-8525-2982f1f98a0c"),
        );
        check(
            "guid('a', 'b')",
            json!("2d796349-8c7e-55ec-9624-54ece82ed031"),
        );
        check(
            "guid('a', 'b', 'c')",
            json!("a98fa280-e03f-5afa-8d8e-92d0a9c201e8"),
        );
        check(
            "guid('hello', 'world')",
            json!("a5b868f8-11fe-567a-ace0-e77cc87f104e"),
        );
        // hashes.json excludes ba91b5ff-... (a re-implementation that joined without '-'); ARM joins with '-'.
        check(
            "guid('test', 'test2', 'test3')",
            json!("43ca56fb-e844-5667-aabf-b316c27c09cc"),
        );
        assert_eq!(
            guid_of("testtest2test3"),
            "ba91b5ff-f126-51c5-a93f-d37f8292ee79"
        );
    }

    #[test]
    fn argument_errors() {
        check_err("uniqueString(1)", "position 1 must be of type 'String'");
        check_err("guid('a', true())", "position 2 must be of type 'String'");
        check_err("uniqueString()", "at least 1");
        check_err("guid()", "at least 1");
        check_err("newGuid('x')", "expects 0 argument(s)");
    }

    #[test]
    fn new_guid_comes_from_the_environment() {
        check("newGuid()", json!("00000000-0000-4000-8000-000000000000"));
    }

    /// An environment outside parameter default values.
    struct Deterministic(SimpleEnvironment);

    impl Environment for Deterministic {
        fn parameter(&self, name: &str) -> Result<Value, EvalError> {
            self.0.parameter(name)
        }
        fn variable(&self, name: &str) -> Result<Value, EvalError> {
            self.0.variable(name)
        }
        fn user_function(&self, namespace: &str, name: &str) -> Option<Rc<UserFunction>> {
            self.0.user_function(namespace, name)
        }
        fn budget(&self) -> &crate::Budget {
            self.0.budget()
        }
        fn facts(&self) -> &DeploymentFacts {
            self.0.facts()
        }
        fn runtime(&self, call: RuntimeCall<'_>) -> Result<Value, EvalError> {
            self.0.runtime(call)
        }
        fn allows_nondeterministic(&self) -> bool {
            false
        }
        fn new_guid(&self) -> String {
            self.0.new_guid()
        }
    }

    #[test]
    fn new_guid_is_refused_outside_parameter_defaults() {
        let env = Deterministic(SimpleEnvironment::default());
        let err = Evaluator::new(&env)
            .eval_string("[newGuid()]")
            .expect_err("newGuid must be refused");
        assert_eq!(err.code(), "InvalidTemplate");
        assert!(
            err.to_string()
                .contains("can only be used with parameter default values"),
            "{err}"
        );
        // Deterministic functions still work there.
        let ok = Evaluator::new(&env).eval_string("[guid('test')]");
        assert_eq!(ok, Ok(Value::from("d6a5baf1-8b9b-542a-8525-2982f1f98a0c")));
    }
}
